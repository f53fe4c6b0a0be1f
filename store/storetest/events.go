package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

// eventTests check the outbox (store.Events): onChange events written
// with their commit, leased by claims, settled, parked and replayed; and
// the scheduled handler's ticks.
var eventTests = []test{
	{"WrittenWithCommit", testEventsWithCommit},
	{"Revisions", testEventsRevisions},
	{"ClaimOrderAndLimit", testEventsClaimOrder},
	{"ShortClaimTookAll", testEventsShortClaim},
	{"Leases", testEventsLeases},
	{"ConcurrentClaims", testEventsConcurrentClaims},
	{"ExclusiveClaims", testEventsExclusiveClaims},
	{"OneEventPerDocument", testEventsOneEventPerDocument},
	{"RenewedLeases", testEventsRenewedLeases},
	{"Ack", testEventsAck},
	{"Retry", testEventsRetry},
	{"StartCountsTheAttempt", testEventsStart},
	{"InterruptedAfterLease", testEventsInterrupted},
	{"InterruptedAfterReopen", testEventsInterruptedReopen},
	{"ClaimThatStartsRuns", testEventsClaimStart},
	{"CommitThatClaims", testEventsCommitClaim},
	{"DeadAndReplay", testEventsDead},
	{"ReplayStartsAChain", testEventsReplayOrigin},
	{"SettledStaySettled", testEventsSettledStaySettled},
	{"AppsApart", testEventsApps},
	{"NextEventDue", testEventsNextDue},
	{"Reopen", testEventsReopen},
	{"Ticks", testEventsTicks},
	{"AcquireTick", testEventsAcquireTick},
}

// lease is how long the suite's claims lease their events.
const lease = time.Minute

// testEventsWithCommit: a commit with Event enqueues exactly its event; a
// commit without one, or a refused commit, enqueues none.
func testEventsWithCommit(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t0 := e.clk.Now()
	e.commit(e.over(app, "jobs", "quiet", `{"n":1}`))
	if evs := e.listEvents(app, false); len(evs) != 0 {
		t.Fatalf("a commit without Event made events %v", seqs(evs))
	}
	e.wantClaim(app, t0.Add(time.Hour), 10)
	if apps := e.eventApps(); len(apps) != 0 {
		t.Fatalf("EventApps without events = %v", apps)
	}

	w := e.over(app, "jobs", "x", `{"n":1}`)
	w.Event = &store.EventSpec{Depth: 3, NextAt: t0.Add(time.Second)}
	seq := e.commit(w)
	evs := e.listEvents(app, false)
	if len(evs) != 1 {
		t.Fatalf("one commit with Event: events %v", seqs(evs))
	}
	if ev := evs[0]; ev.AppID != app || ev.Seq != seq || ev.Depth != 3 || ev.Dead {
		t.Fatalf("event = %+v; want app %d, seq %d, depth 3, live", ev, app, seq)
	}
	wantState(t, "new event", &evs[0], 0, "", t0.Add(time.Second))

	refused := []*store.Write{
		e.write(app, "jobs", "x", "", "1-z", `{"n":"blind"}`),
		e.write(app, "jobs", "ghost", "1-a", "2-z", `{"n":"ghost"}`),
	}
	for _, r := range refused {
		r.Event = &store.EventSpec{NextAt: t0}
		if _, err := e.st.Commit(e.ctx, r); !errors.Is(err, store.ErrHeadMoved) {
			t.Fatalf("Commit(%s base %q): %v, want ErrHeadMoved", r.ID, r.BaseRev, err)
		}
	}
	e.commit(e.over(app, "jobs", "x", `{"n":2}`))
	if got := seqs(e.listEvents(app, false)); !slices.Equal(got, []int64{seq}) {
		t.Fatalf("after refused commits and one without Event: events %v, want [%d]", got, seq)
	}
	e.wantClaim(app, t0.Add(time.Hour), 10, seq)
	if apps := e.eventApps(); !slices.Equal(apps, []int64{app}) {
		t.Fatalf("EventApps = %v, want [%d]", apps, app)
	}
}

// originOf is the origin testEventsRevisions gives its i-th write: 0 (a
// chain of its own) or another seq.
func originOf(i int) int64 { return int64(i%3) * 1000 }

// testEventsRevisions: an event carries the revision committed with it
// and Old, the revision it replaced: nil for a create, and for a write
// over a tombstone.
func testEventsRevisions(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	at := e.clk.Now()
	var ws []*store.Write
	var ss []int64
	old := map[int]int{} // event index -> index of the write it replaced
	add := func(db, id, body string, edit func(w *store.Write)) {
		e.tick()
		w := e.over(app, db, id, body)
		if edit != nil {
			edit(w)
		}
		for i := len(ws) - 1; i >= 0; i-- {
			if ws[i].DB == db && ws[i].ID == id {
				if !ws[i].Deleted {
					old[len(ws)] = i
				}
				break
			}
		}
		w.Event = &store.EventSpec{Depth: len(ws), Origin: originOf(len(ws)), NextAt: at}
		ws = append(ws, w)
		ss = append(ss, e.commit(w))
	}
	check := func(what string, evs []store.Event, from int) {
		t.Helper()
		if !slices.Equal(seqs(evs), ss[from:]) {
			t.Fatalf("%s: seqs %v, want %v", what, seqs(evs), ss[from:])
		}
		for k, ev := range evs {
			i := from + k
			what := fmt.Sprintf("%s: event of write %d (%s/%s)", what, i, ws[i].DB, ws[i].ID)
			if ev.Depth != i || ev.Origin != originOf(i) {
				t.Fatalf("%s: depth %d, origin %d; want %d, %d", what, ev.Depth, ev.Origin, i, originOf(i))
			}
			wantRev(t, what, ev.Rev, ws[i], ss[i])
			if j, ok := old[i]; ok {
				wantOld(t, what, ev.Old, ws[j], ss[j])
			} else {
				wantOld(t, what, ev.Old, nil, 0)
			}
		}
	}
	add("jobs", "x", `{"status":"pending","n":1}`, func(w *store.Write) {
		w.Writer, w.Path = store.Writer{User: "alice", Device: "laptop"}, "cli"
		w.Channels = []string{"ops", "team:a b"}
	})
	add("jobs", "x", `{"status":"running","n":2}`, func(w *store.Write) {
		w.Writer, w.Path = store.Writer{Handler: "advance"}, "advance"
		w.Channels = []string{}
	})
	add("jobs", "x", "", nil)
	add("jobs", "y", `{"status":"pending"}`, nil)
	check("ListEvents", e.listEvents(app, false), 0)
	// An exclusive claim hands out every event of a document at once.
	check("exclusive ClaimEvents", e.wantExclusive(app, at, 10, ss...), 0)
	for _, s := range ss {
		e.settle(app, s, store.Settlement{Ack: true})
	}
	for _, s := range ss {
		e.waitGone(app, s)
	}

	// More of the same, claimed after the first ones: a store may answer
	// claims of fresh events differently.
	n := len(ws)
	add("jobs", "x", `{"status":"again"}`, nil) // over a tombstone: no Old
	add("jobs", "x", `{"status":"done"}`, func(w *store.Write) { w.Channels = []string{"ops"} })
	add("other", "x", `{"db":"other"}`, nil)
	add("jobs", "y", "", nil)
	check("exclusive ClaimEvents of later events", e.wantExclusive(app, at, 10, ss[n:]...), n)
	check("ListEvents after claims", e.listEvents(app, false), n)
}

// testEventsAck: an acked event is gone: not listed, never handed out.
func testEventsAck(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t0 := e.clk.Now()
	ss := e.emitN(app, 3, t0)
	e.wantClaim(app, t0, 10, ss...)
	e.settle(app, ss[1], store.Settlement{Ack: true})
	e.waitGone(app, ss[1])
	if got := seqs(e.listEvents(app, false)); !slices.Equal(got, []int64{ss[0], ss[2]}) {
		t.Fatalf("ListEvents after an ack = %v, want %v", got, []int64{ss[0], ss[2]})
	}
	e.wantClaim(app, t0.Add(lease), 10, ss[0], ss[2])
	e.settle(app, ss[0], store.Settlement{Ack: true})
	e.settle(app, ss[2], store.Settlement{Ack: true})
	e.waitGone(app, ss[0])
	e.waitGone(app, ss[2])
	e.wantClaim(app, t0.Add(3*lease), 10)
	e.wantDue(app, time.Time{})
	if apps := e.eventApps(); len(apps) != 0 {
		t.Fatalf("EventApps after every ack = %v", apps)
	}
}

// testEventsRetry: a retry ends the lease, hides the event until its
// NextAt, then hands it out with its attempts and error.
func testEventsRetry(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t0 := e.clk.Now()
	_, s := e.emit(app, "x", `{"n":1}`, t0)
	e.wantClaim(app, t0, 10, s)

	// Both retries fall due before the lease of the claim before them
	// ends: settling ended it.
	next := t0
	for i, msg := range []string{"boom", "again"} {
		r := store.Settlement{Attempts: i + 1, NextAt: next.Add(10 * time.Second), LastError: msg}
		e.settle(app, s, r)
		e.waitDue(app, r.NextAt)
		wantState(t, "listed retry", find(e.listEvents(app, false), s), r.Attempts, msg, r.NextAt)
		e.wantClaim(app, r.NextAt.Add(-time.Nanosecond), 10)
		evs := e.wantClaim(app, r.NextAt, 10, s)
		wantState(t, "claimed retry", &evs[0], r.Attempts, msg, r.NextAt)
		if evs[0].Rev.ID != "x" || !sameJSON(t, evs[0].Rev.Body, []byte(`{"n":1}`)) {
			t.Fatalf("claimed retry carries %s %s", evs[0].Rev.ID, evs[0].Rev.Body)
		}
		next = r.NextAt
	}
	e.settle(app, s, store.Settlement{Ack: true})
	e.waitGone(app, s)
	e.wantClaim(app, next.Add(time.Hour), 10)
}

// testEventsDead: a dead event is parked, listed as dead, never handed
// out, until ReplayEvent makes it deliverable with fresh attempts.
// ReplayEvent of anything but a dead event of the app is ErrNotFound.
func testEventsDead(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	t0 := e.clk.Now()
	_, s1 := e.emit(app, "x", `{"n":1}`, t0)
	_, s2 := e.emit(app, "y", `{"n":2}`, t0)
	e.wantClaim(app, t0, 10, s1, s2)
	e.settle(app, s1, store.Settlement{Dead: true, Attempts: 5, NextAt: t0.Add(time.Minute), LastError: "gave up"})
	e.settle(app, s2, store.Settlement{Ack: true})
	e.waitDead(app, s1)
	e.waitGone(app, s2)

	dead := e.listEvents(app, true)
	if len(dead) != 1 || dead[0].Seq != s1 || !dead[0].Dead || dead[0].Rev.ID != "x" {
		t.Fatalf("dead events = %+v, want event %d of x", dead, s1)
	}
	wantState(t, "dead event", &dead[0], 5, "gave up", time.Time{})
	if live := e.listEvents(app, false); len(live) != 0 {
		t.Fatalf("live events = %v, want none", seqs(live))
	}
	e.wantClaim(app, t0.Add(24*time.Hour), 10)
	e.wantDue(app, time.Time{})
	if apps := e.eventApps(); len(apps) != 0 {
		t.Fatalf("EventApps with only a dead event = %v", apps)
	}

	_, s3 := e.emit(app, "z", `{"n":3}`, t0)
	e.wantClaim(app, t0, 10, s3)
	for _, c := range []struct {
		what string
		app  int64
		seq  int64
	}{{"live", app, s3}, {"acked", app, s2}, {"unknown", app, s3 + 100}, {"another app's", other, s1}} {
		if err := e.st.ReplayEvent(e.ctx, c.app, c.seq, t0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("ReplayEvent(%s event): %v, want ErrNotFound", c.what, err)
		}
	}
	wantState(t, "live event after a refused replay", find(e.listEvents(app, false), s3), 0, "", t0)
	e.wantClaim(app, t0.Add(time.Second), 10)

	r := t0.Add(2 * time.Hour)
	if err := e.st.ReplayEvent(e.ctx, app, s1, r); err != nil {
		t.Fatalf("ReplayEvent(%d): %v", s1, err)
	}
	if dead := e.listEvents(app, true); len(dead) != 0 {
		t.Fatalf("dead events after replay = %v", seqs(dead))
	}
	wantState(t, "replayed event", find(e.listEvents(app, false), s1), 0, "", time.Time{})
	evs := e.wantClaim(app, r, 10, s1, s3)
	wantState(t, "claimed replay", &evs[0], 0, "", time.Time{})
	if evs[0].Rev.ID != "x" || !sameJSON(t, evs[0].Rev.Body, []byte(`{"n":1}`)) {
		t.Fatalf("replayed event carries %s %s", evs[0].Rev.ID, evs[0].Rev.Body)
	}
	if err := e.st.ReplayEvent(e.ctx, app, s1, r); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second ReplayEvent: %v, want ErrNotFound", err)
	}
}

// testEventsReplayOrigin: an event keeps the origin of its chain through
// claims, retries and reopens; a replay makes it a chain of its own.
func testEventsReplayOrigin(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t0 := e.clk.Now()
	w := e.over(app, "jobs", "x", `{}`)
	w.Event = &store.EventSpec{Depth: 2, Origin: 7, NextAt: t0}
	s := e.commit(w)
	e.wantClaim(app, t0, 10, s)
	e.settle(app, s, store.Settlement{Attempts: 1, NextAt: t0, LastError: "boom"})
	e.waitRetry(app, s, store.Settlement{Attempts: 1, NextAt: t0})
	e.reopen()
	if evs := e.wantClaim(app, t0, 10, s); evs[0].Origin != 7 || evs[0].Depth != 2 {
		t.Fatalf("retried event after a reopen: origin %d, depth %d; want 7, 2", evs[0].Origin, evs[0].Depth)
	}
	e.settle(app, s, store.Settlement{Dead: true, Attempts: 2, NextAt: t0, LastError: "dead"})
	e.waitDead(app, s)
	if err := e.st.ReplayEvent(e.ctx, app, s, t0); err != nil {
		t.Fatal(err)
	}
	if evs := e.wantClaim(app, t0, 10, s); evs[0].Origin != 0 || evs[0].Depth != 2 {
		t.Fatalf("replayed event: origin %d, depth %d; want 0, 2", evs[0].Origin, evs[0].Depth)
	}
}

// testEventsSettledStaySettled: acked and dead events stay out of claims
// while an earlier event retries.
func testEventsSettledStaySettled(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t0 := e.clk.Now()
	ss := e.emitN(app, 3, t0)
	e.wantClaim(app, t0, 1, ss[0])
	retry := store.Settlement{Attempts: 1, NextAt: t0.Add(5 * time.Second), LastError: "later"}
	e.settle(app, ss[0], retry)
	e.waitRetry(app, ss[0], retry)
	e.wantClaim(app, t0, 10, ss[1], ss[2])
	e.settle(app, ss[1], store.Settlement{Ack: true})
	e.settle(app, ss[2], store.Settlement{Dead: true, Attempts: 1, NextAt: t0, LastError: "dead"})
	e.waitGone(app, ss[1])
	e.waitDead(app, ss[2])

	t1 := t0.Add(2 * lease)
	evs := e.wantClaim(app, t1, 10, ss[0])
	wantState(t, "retried event", &evs[0], 1, "later", retry.NextAt)
	e.wantClaim(app, t1, 10)
	e.wantClaim(app, t1.Add(lease), 10, ss[0])
	e.wantClaim(app, t1.Add(lease), 10)
}

// testEventsApps: apps' events do not mix, though their seqs do;
// EventApps lists the apps with live events.
func testEventsApps(t *testing.T, e *env) {
	a := e.app("alice", "jobs")
	b := e.app("bob", "jobs")
	quiet := e.app("carol", "jobs")
	t0 := e.clk.Now()
	_, a1 := e.emit(a, "x", `{"app":"a"}`, t0)
	_, a2 := e.emit(a, "y", `{"app":"a"}`, t0)
	_, b1 := e.emit(b, "x", `{"app":"b"}`, t0.Add(time.Hour))
	e.commit(e.over(quiet, "jobs", "x", `{}`))
	want := []int64{a, b}
	slices.Sort(want)
	if apps := e.eventApps(); !slices.Equal(apps, want) {
		t.Fatalf("EventApps = %v, want %v", apps, want)
	}
	e.wantDue(a, t0)
	e.wantDue(b, t0.Add(time.Hour))
	e.wantDue(quiet, time.Time{})

	for _, ev := range e.wantClaim(a, t0.Add(time.Hour), 10, a1, a2) {
		if !sameJSON(t, ev.Rev.Body, []byte(`{"app":"a"}`)) {
			t.Fatalf("app a's claim got %s", ev.Rev.Body)
		}
	}
	// a's leases hold a's events only, whatever their seqs.
	evs := e.wantClaim(b, t0.Add(time.Hour), 10, b1)
	if !sameJSON(t, evs[0].Rev.Body, []byte(`{"app":"b"}`)) {
		t.Fatalf("app b's claim got %s", evs[0].Rev.Body)
	}
	e.wantClaim(quiet, t0.Add(time.Hour), 10)

	e.settle(a, a1, store.Settlement{Ack: true})
	e.settle(a, a2, store.Settlement{Dead: true, Attempts: 1, NextAt: t0, LastError: "a"})
	e.waitGone(a, a1)
	e.waitDead(a, a2)
	if got := seqs(e.listEvents(b, false)); !slices.Equal(got, []int64{b1}) {
		t.Fatalf("b's events after a's settlements = %v, want [%d]", got, b1)
	}
	if dead := e.listEvents(b, true); len(dead) != 0 {
		t.Fatalf("b's dead events = %v", seqs(dead))
	}
	if apps := e.eventApps(); !slices.Equal(apps, []int64{b}) {
		t.Fatalf("EventApps when a has only a dead event = %v, want [%d]", apps, b)
	}
	e.settle(b, b1, store.Settlement{Ack: true})
	e.waitGone(b, b1)
	if apps := e.eventApps(); len(apps) != 0 {
		t.Fatalf("EventApps after the last ack = %v", apps)
	}
	if dead := e.listEvents(a, true); len(dead) != 1 || dead[0].Seq != a2 {
		t.Fatalf("a's dead events after b's ack = %v, want [%d]", seqs(dead), a2)
	}
}

// testEventsNextDue: NextEventDue is the earliest NextAt of the events
// neither dead nor leased.
func testEventsNextDue(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t0 := e.clk.Now()
	e.wantDue(app, time.Time{})
	_, s1 := e.emit(app, "a", `{}`, t0.Add(10*time.Second))
	_, s2 := e.emit(app, "b", `{}`, t0.Add(5*time.Second))
	_, s3 := e.emit(app, "c", `{}`, t0.Add(20*time.Second))
	e.wantDue(app, t0.Add(5*time.Second))
	e.wantClaim(app, t0.Add(5*time.Second), 10, s2)
	e.wantDue(app, t0.Add(10*time.Second))
	e.wantClaim(app, t0.Add(10*time.Second), 10, s1)
	e.settle(app, s1, store.Settlement{Dead: true, Attempts: 1, NextAt: t0, LastError: "dead"})
	e.waitDead(app, s1)
	e.wantDue(app, t0.Add(20*time.Second))
	e.settle(app, s2, store.Settlement{Attempts: 1, NextAt: t0.Add(15 * time.Second)})
	e.waitDue(app, t0.Add(15*time.Second))

	e.wantClaim(app, t0.Add(20*time.Second), 10, s2, s3)
	e.settle(app, s2, store.Settlement{Ack: true})
	e.settle(app, s3, store.Settlement{Ack: true})
	e.waitGone(app, s2)
	e.waitGone(app, s3)
	e.wantDue(app, time.Time{})

	// After claims, events committed later count by NextAt too, not by seq.
	later := e.app("alice", "later")
	_, f1 := e.emit(later, "f1", `{}`, t0)
	e.wantClaim(later, t0, 10, f1)
	e.settle(later, f1, store.Settlement{Ack: true})
	e.waitGone(later, f1)
	e.emit(later, "f2", `{}`, t0.Add(10*time.Second))
	e.emit(later, "f3", `{}`, t0.Add(5*time.Second))
	e.wantDue(later, t0.Add(5*time.Second))
}

// testEventsReopen: the outbox survives a reopen: unsettled events are
// delivered again, settled ones keep their outcome, acked ones are gone.
func testEventsReopen(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t0 := e.clk.Now()
	var ss []int64
	for i := range 5 {
		_, s := e.emit(app, fmt.Sprint("j", i), fmt.Sprintf(`{"n":%d}`, i), t0)
		ss = append(ss, s)
	}
	e.wantClaim(app, t0, 4, ss[:4]...)
	retry := store.Settlement{Attempts: 1, NextAt: t0.Add(10 * time.Second), LastError: "boom"}
	e.settle(app, ss[0], store.Settlement{Ack: true})
	e.settle(app, ss[1], retry)
	e.settle(app, ss[2], store.Settlement{Dead: true, Attempts: 4, NextAt: t0, LastError: "gave up"})
	// ss[3] is leased and never settled, ss[4] never claimed.
	e.waitGone(app, ss[0])
	e.waitRetry(app, ss[1], retry)
	e.waitDead(app, ss[2])

	e.reopen()

	live := []int64{ss[1], ss[3], ss[4]}
	if got := seqs(e.listEvents(app, false)); !slices.Equal(got, live) {
		t.Fatalf("live events after reopen = %v, want %v", got, live)
	}
	dead := e.listEvents(app, true)
	if len(dead) != 1 || dead[0].Seq != ss[2] {
		t.Fatalf("dead events after reopen = %v, want [%d]", seqs(dead), ss[2])
	}
	wantState(t, "dead event after reopen", &dead[0], 4, "gave up", time.Time{})
	if apps := e.eventApps(); !slices.Equal(apps, []int64{app}) {
		t.Fatalf("EventApps after reopen = %v", apps)
	}
	e.wantDue(app, t0) // ss[4]

	t1 := t0.Add(lease)
	evs := e.wantClaim(app, t1, 10, live...)
	wantState(t, "retry after reopen", &evs[0], 1, "boom", retry.NextAt)
	for i, ev := range evs {
		if !sameJSON(t, ev.Rev.Body, []byte(fmt.Sprintf(`{"n":%d}`, []int{1, 3, 4}[i]))) {
			t.Fatalf("event %d after reopen carries %s", ev.Seq, ev.Rev.Body)
		}
	}

	// A write after the reopen replaces a head committed before it. Its
	// event waits for the document's earlier one.
	w := e.over(app, "jobs", "j3", `{"n":33}`)
	w.Event = &store.EventSpec{NextAt: t1}
	s := e.commit(w)
	e.wantClaim(app, t1, 10)
	e.settle(app, ss[3], store.Settlement{Ack: true})
	evs = e.wantClaim(app, t1, 10, s)
	wantOld(t, "event of a write after reopen", evs[0].Old, &store.Write{DB: "jobs", ID: "j3", Rev: "1-j3", Body: []byte(`{"n":3}`)}, ss[3])

	// Settlements still in flight at a reopen are kept or lost, but no
	// event that was not acked is: it is delivered again.
	e.settle(app, ss[4], store.Settlement{Attempts: 1, NextAt: t1.Add(time.Second), LastError: "late"})
	e.reopen()
	left := seqs(e.listEvents(app, false))
	if !slices.Contains(left, ss[4]) || !slices.Contains(left, ss[1]) || !slices.Contains(left, s) {
		t.Fatalf("live events after a reopen with settlements in flight = %v; want %d, %d and %d among them", left, ss[1], ss[4], s)
	}
	// ss[3]'s ack may be lost: then s waits behind it.
	if slices.Contains(left, ss[3]) {
		left = slices.DeleteFunc(left, func(x int64) bool { return x == s })
	}
	e.wantClaim(app, t1.Add(2*lease), 10, left...)
}
