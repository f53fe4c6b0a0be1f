package storetest

import (
	"errors"
	"fmt"
	"slices"
	"sync"
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

// over is a write of db/id that replaces its current head (body ""
// deletes it), linked to that head as the engine links it.
func (e *env) over(app int64, db, id, body string) *store.Write {
	e.t.Helper()
	base, prev, n := "", int64(0), 1
	if d := e.get(app, db, id); d != nil {
		base, prev, n = d.Rev, d.Seq, gen(e.t, d.Rev)+1
	}
	w := e.write(app, db, id, base, fmt.Sprintf("%d-%s", n, id), body)
	w.PrevSeq = prev
	return w
}

// emit commits a write of jobs/id with an event due at at, and returns
// the write and its seq.
func (e *env) emit(app int64, id, body string, at time.Time) (*store.Write, int64) {
	e.t.Helper()
	w := e.over(app, "jobs", id, body)
	w.Event = &store.EventSpec{NextAt: at}
	return w, e.commit(w)
}

// emitN commits n documents j0…j{n-1} with events due at at, and
// returns their seqs.
func (e *env) emitN(app int64, n int, at time.Time) []int64 {
	e.t.Helper()
	var ss []int64
	for i := range n {
		_, s := e.emit(app, fmt.Sprint("j", i), `{}`, at)
		ss = append(ss, s)
	}
	return ss
}

func (e *env) claimFor(app int64, now time.Time, limit int, d time.Duration) []store.Event {
	e.t.Helper()
	evs, err := e.st.ClaimEvents(e.ctx, app, now, limit, d)
	if err != nil {
		e.t.Fatalf("ClaimEvents(at %v, limit %d): %v", now, limit, err)
	}
	for _, ev := range evs {
		if ev.AppID != app || ev.Dead || ev.Rev.Seq != ev.Seq {
			e.t.Fatalf("ClaimEvents(app %d) handed out %+v", app, ev)
		}
	}
	return evs
}

// wantClaim claims with the suite's lease and checks the seqs handed out.
func (e *env) wantClaim(app int64, now time.Time, limit int, want ...int64) []store.Event {
	e.t.Helper()
	evs := e.claimFor(app, now, limit, lease)
	if got := seqs(evs); !slices.Equal(got, want) {
		e.t.Fatalf("ClaimEvents(at %v, limit %d) = seqs %v, want %v", now, limit, got, want)
	}
	return evs
}

// wantExclusive is wantClaim with ClaimEventsExclusive.
func (e *env) wantExclusive(app int64, now time.Time, limit int, want ...int64) []store.Event {
	e.t.Helper()
	evs, err := e.st.ClaimEventsExclusive(e.ctx, app, now, limit, lease)
	if err != nil {
		e.t.Fatalf("ClaimEventsExclusive(at %v, limit %d): %v", now, limit, err)
	}
	if got := seqs(evs); !slices.Equal(got, want) {
		e.t.Fatalf("ClaimEventsExclusive(at %v, limit %d) = seqs %v, want %v", now, limit, got, want)
	}
	return evs
}

func (e *env) listEvents(app int64, dead bool) []store.Event {
	e.t.Helper()
	evs, err := e.st.ListEvents(e.ctx, app, dead, 0, 1000)
	if err != nil {
		e.t.Fatalf("ListEvents(dead=%v): %v", dead, err)
	}
	return evs
}

func (e *env) settle(app, seq int64, s store.Settlement) {
	e.t.Helper()
	if err := e.st.SettleEvent(e.ctx, app, seq, s); err != nil {
		e.t.Fatalf("SettleEvent(%d, %+v): %v", seq, s, err)
	}
}

func (e *env) eventApps() []int64 {
	e.t.Helper()
	apps, err := e.st.EventApps(e.ctx)
	if err != nil {
		e.t.Fatalf("EventApps: %v", err)
	}
	slices.Sort(apps)
	return apps
}

func (e *env) nextDue(app int64) (time.Time, bool) {
	e.t.Helper()
	at, ok, err := e.st.NextEventDue(e.ctx, app)
	if err != nil {
		e.t.Fatalf("NextEventDue: %v", err)
	}
	return at, ok
}

// wantDue checks NextEventDue; the zero time means none.
func (e *env) wantDue(app int64, want time.Time) {
	e.t.Helper()
	at, ok := e.nextDue(app)
	if ok != !want.IsZero() || (ok && !at.Equal(want)) {
		e.t.Fatalf("NextEventDue = %v, %v; want %v, %v", at, ok, want, !want.IsZero())
	}
}

// waitFor polls until cond holds. A settlement may become durable after
// SettleEvent returns; tests that need it to have landed wait for it.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	const patience = 20 * time.Second
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not seen within %v", what, patience)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitGone waits for an ack to land: the event is listed no more.
func (e *env) waitGone(app, seq int64) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("ack of event %d", seq), func() bool {
		return find(e.listEvents(app, false), seq) == nil && find(e.listEvents(app, true), seq) == nil
	})
}

// waitDead waits for an event to be listed dead.
func (e *env) waitDead(app, seq int64) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("death of event %d", seq), func() bool { return find(e.listEvents(app, true), seq) != nil })
}

// waitRetry waits for a retry to be listed with its attempts and time.
func (e *env) waitRetry(app, seq int64, s store.Settlement) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("retry of event %d", seq), func() bool {
		ev := find(e.listEvents(app, false), seq)
		return ev != nil && ev.Attempts == s.Attempts && ev.NextAt.Equal(s.NextAt)
	})
}

// waitDue waits until NextEventDue reports at: the event due then is
// neither leased nor dead any more.
func (e *env) waitDue(app int64, at time.Time) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("NextEventDue = %v", at), func() bool {
		got, ok := e.nextDue(app)
		return ok && got.Equal(at)
	})
}

func find(evs []store.Event, seq int64) *store.Event {
	for i := range evs {
		if evs[i].Seq == seq {
			return &evs[i]
		}
	}
	return nil
}

func seqs(evs []store.Event) []int64 {
	var out []int64
	for _, ev := range evs {
		out = append(out, ev.Seq)
	}
	return out
}

// wantState checks an event's delivery state.
func wantState(t *testing.T, what string, ev *store.Event, attempts int, lastError string, nextAt time.Time) {
	t.Helper()
	if ev == nil {
		t.Fatalf("%s: no event", what)
	}
	if ev.Attempts != attempts || ev.LastError != lastError || (!nextAt.IsZero() && !ev.NextAt.Equal(nextAt)) {
		t.Fatalf("%s: attempts %d, last error %q, next at %v; want %d, %q, %v", what, ev.Attempts, ev.LastError, ev.NextAt, attempts, lastError, nextAt)
	}
}

// wantRev checks that an event's revision is the one w committed at seq.
func wantRev(t *testing.T, what string, got store.Revision, w *store.Write, seq int64) {
	t.Helper()
	if got.DB != w.DB || got.ID != w.ID || got.Rev != w.Rev || got.Deleted != w.Deleted || got.Seq != seq ||
		!got.Time.Equal(w.Time) || got.Writer != w.Writer || got.Path != w.Path {
		t.Fatalf("%s: revision %s/%s %s deleted=%v seq %d at %v by %+v via %q; want %s/%s %s deleted=%v seq %d at %v by %+v via %q",
			what, got.DB, got.ID, got.Rev, got.Deleted, got.Seq, got.Time, got.Writer, got.Path,
			w.DB, w.ID, w.Rev, w.Deleted, seq, w.Time, w.Writer, w.Path)
	}
	if w.Deleted {
		if len(got.Body) != 0 {
			t.Fatalf("%s: tombstone with body %s", what, got.Body)
		}
	} else if len(got.Body) == 0 || !sameJSON(t, got.Body, w.Body) {
		t.Fatalf("%s: body %s, want %s", what, got.Body, w.Body)
	}
	if (got.Channels == nil) != (w.Channels == nil) || !slices.Equal(got.Channels, w.Channels) {
		t.Fatalf("%s: channels %#v, want %#v", what, got.Channels, w.Channels)
	}
}

// wantOld checks an event's Old: the revision w committed at seq, or nil
// when w is nil.
func wantOld(t *testing.T, what string, got *store.Revision, w *store.Write, seq int64) {
	t.Helper()
	if w == nil {
		if got != nil {
			t.Fatalf("%s: old revision %+v, want none", what, *got)
		}
		return
	}
	if got == nil {
		t.Fatalf("%s: no old revision, want %s at seq %d", what, w.Rev, seq)
	}
	if got.DB != w.DB || got.ID != w.ID || got.Rev != w.Rev || got.Seq != seq || got.Deleted || !sameJSON(t, got.Body, w.Body) {
		t.Fatalf("%s: old revision %s/%s %s seq %d deleted=%v %s; want %s/%s %s seq %d %s",
			what, got.DB, got.ID, got.Rev, got.Seq, got.Deleted, got.Body, w.DB, w.ID, w.Rev, seq, w.Body)
	}
}

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
	check("ClaimEventsExclusive", e.wantExclusive(app, at, 10, ss...), 0)
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
	check("ClaimEventsExclusive of later events", e.wantExclusive(app, at, 10, ss[n:]...), n)
	check("ListEvents after claims", e.listEvents(app, false), n)
}

// testEventsClaimOrder: a claim hands out due events only, lowest seq
// first whatever their due times, at most limit of them.
func testEventsClaimOrder(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t0 := e.clk.Now()
	dues := []time.Duration{3 * time.Second, 0, time.Second, 0, 10 * time.Second}
	ss := make([]int64, len(dues))
	for i, d := range dues {
		_, ss[i] = e.emit(app, fmt.Sprint("j", i), `{}`, t0.Add(d))
	}
	e.wantClaim(app, t0.Add(-time.Nanosecond), 10)
	e.wantClaim(app, t0.Add(time.Second), 10, ss[1], ss[2], ss[3])
	e.wantClaim(app, t0.Add(10*time.Second), 10, ss[0], ss[4])

	many := e.app("alice", "many")
	var ms []int64
	for i := range 7 {
		_, s := e.emit(many, fmt.Sprint("m", i), `{}`, t0)
		ms = append(ms, s)
	}
	page, err := e.st.ListEvents(e.ctx, many, false, ms[1], 3)
	if err != nil || !slices.Equal(seqs(page), ms[2:5]) {
		t.Fatalf("ListEvents(after %d, limit 3) = %v, %v; want %v", ms[1], seqs(page), err, ms[2:5])
	}
	e.wantClaim(many, t0, 3, ms[:3]...)
	e.wantClaim(many, t0, 3, ms[3:6]...)
	e.wantClaim(many, t0, 3, ms[6])
	e.wantClaim(many, t0, 3)
	// An event committed after the claims waits for its due time too.
	_, late := e.emit(many, "late", `{}`, t0.Add(30*time.Second))
	e.wantClaim(many, t0.Add(30*time.Second-time.Nanosecond), 3)
	e.wantClaim(many, t0.Add(30*time.Second), 3, late)
}

// testEventsShortClaim: a claim that hands out fewer events than its
// limit leased every event then due, among leased, dead, backing-off and
// not yet due ones, so the deliverer need not claim again; what falls due
// later is handed out then.
func testEventsShortClaim(t *testing.T, e *env) {
	t0 := e.clk.Now()
	// Events just committed, none settled: a store may hand them out from
	// memory.
	fresh := e.app("alice", "fresh")
	fs := e.emitN(fresh, 5, t0)
	e.wantClaim(fresh, t0, 20, fs...)
	e.wantClaim(fresh, t0, 20)
	_, f6 := e.emit(fresh, "f6", `{}`, t0)
	e.wantClaim(fresh, t0, 20, f6)

	app := e.app("alice", "jobs")
	ss := e.emitN(app, 12, t0)
	e.wantClaim(app, t0, 4, ss[:4]...)
	e.settle(app, ss[0], store.Settlement{Dead: true, Attempts: 1, NextAt: t0, LastError: "boom"})
	retry := store.Settlement{Attempts: 1, NextAt: t0.Add(time.Hour), LastError: "later"}
	e.settle(app, ss[1], retry)
	e.waitDead(app, ss[0])
	e.waitRetry(app, ss[1], retry)
	_, later := e.emit(app, "later", `{}`, t0.Add(10*time.Second))
	now := t0.Add(time.Second)
	got := e.claimFor(app, now, 20, lease)
	if want := ss[4:]; !slices.Equal(seqs(got), want) {
		t.Fatalf("claim of 20 = %v, want every due one: %v", seqs(got), want)
	}
	e.wantClaim(app, now, 20)
	e.wantClaim(app, t0.Add(10*time.Second), 20, later)
}

// testEventsLeases: a claimed event is not handed out again until its
// lease ends; a claim does not count as an attempt.
func testEventsLeases(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t0 := e.clk.Now()
	ss := e.emitN(app, 3, t0)
	e.wantClaim(app, t0, 10, ss...)
	e.wantClaim(app, t0.Add(lease-time.Nanosecond), 10)
	// Leased events are still waiting: listed, not dead.
	if got := seqs(e.listEvents(app, false)); !slices.Equal(got, ss) {
		t.Fatalf("ListEvents while leased = %v, want %v", got, ss)
	}
	// A new event is handed out while the others stay leased.
	_, s4 := e.emit(app, "new", `{}`, t0)
	e.wantClaim(app, t0.Add(time.Second), 10, s4)

	t1 := t0.Add(lease)
	evs := e.wantClaim(app, t1, 10, ss...)
	for _, ev := range evs {
		wantState(t, fmt.Sprintf("event %d claimed again", ev.Seq), &ev, 0, "", t0)
	}
	// Each claim sets its own lease.
	if evs := e.claimFor(app, t1.Add(time.Second), 10, 10*time.Second); !slices.Equal(seqs(evs), []int64{s4}) {
		t.Fatalf("claim with a 10s lease = %v, want [%d]", seqs(evs), s4)
	}
	e.wantClaim(app, t1.Add(11*time.Second-time.Nanosecond), 10)
	e.wantClaim(app, t1.Add(11*time.Second), 10, s4)
}

// testEventsConcurrentClaims: claimers racing on one app never get the
// same event while it is leased, and between them get every due one.
func testEventsConcurrentClaims(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t0 := e.clk.Now()
	const n, claimers = 60, 6
	var ws []*store.Write
	for i := range n {
		w := e.over(app, "jobs", fmt.Sprintf("j%02d", i), `{}`)
		w.Event = &store.EventSpec{NextAt: t0}
		ws = append(ws, w)
	}
	e.commitAll(ws)
	var mu sync.Mutex
	got := map[int64]int{}
	handed := 0
	parallel(t, claimers, claimers, func(int) error {
		for {
			evs, err := e.st.ClaimEvents(e.ctx, app, t0, 3, lease)
			if err != nil || len(evs) == 0 {
				return err
			}
			mu.Lock()
			for _, ev := range evs {
				got[ev.Seq]++
			}
			handed += len(evs)
			runaway := handed > 2*n
			mu.Unlock()
			if runaway {
				return fmt.Errorf("more than %d claims of %d events", 2*n, n)
			}
		}
	})
	for seq, k := range got {
		if k != 1 {
			t.Fatalf("event %d handed out %d times while leased", seq, k)
		}
	}
	for _, ev := range e.listEvents(app, false) {
		if got[ev.Seq] != 1 {
			t.Fatalf("event %d was never handed out", ev.Seq)
		}
	}
	if len(got) != n {
		t.Fatalf("%d events handed out, want %d", len(got), n)
	}
	e.wantClaim(app, t0, 10)
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

func (e *env) start(app, seq int64) {
	e.t.Helper()
	if err := e.st.StartEvent(e.ctx, app, seq); err != nil {
		e.t.Fatalf("StartEvent(%d): %v", seq, err)
	}
}

// claimed commits n events of a new app, due now, and claims them.
func (e *env) claimed(n int) (app int64, now time.Time, ss []int64) {
	e.t.Helper()
	app, now = e.app("alice", "jobs"), e.clk.Now()
	ss = e.emitN(app, n, now)
	e.wantClaim(app, now, 10, ss...)
	return app, now, ss
}

// wantInterrupted checks that of a claim's events only the one of seq (0
// for none) comes back interrupted.
func wantInterrupted(t *testing.T, what string, evs []store.Event, seq int64) {
	t.Helper()
	for _, ev := range evs {
		if ev.Interrupted != (ev.Seq == seq) {
			t.Fatalf("%s: event %d interrupted = %v; want only event %d interrupted", what, ev.Seq, ev.Interrupted, seq)
		}
	}
}

// testEventsStart: StartEvent counts the attempt at once, durably, for
// the holder of the lease only; every settlement ends the run, so none
// of them comes back interrupted.
func testEventsStart(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t0 := e.clk.Now()
	ss := e.emitN(app, 4, t0)
	if err := e.st.StartEvent(e.ctx, app, ss[0]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("StartEvent of an event nobody claimed = %v, want ErrNotFound", err)
	}
	wantInterrupted(t, "first claim", e.wantClaim(app, t0, 10, ss...), 0)
	for _, s := range ss[:3] {
		e.start(app, s)
	}
	// Counted while the runs go on.
	for _, s := range ss[:3] {
		wantState(t, fmt.Sprintf("running event %d", s), find(e.listEvents(app, false), s), 1, "", t0)
	}
	wantState(t, "claimed event not started", find(e.listEvents(app, false), ss[3]), 0, "", t0)

	e.settle(app, ss[0], store.Settlement{Ack: true})
	retry := store.Settlement{Attempts: 1, NextAt: t0.Add(10 * time.Second), LastError: "boom"}
	e.settle(app, ss[1], retry)
	// A run the server stopped goes back with the attempts it had.
	back := store.Settlement{Attempts: 0, NextAt: t0}
	e.settle(app, ss[2], back)
	e.settle(app, ss[3], back)
	e.waitGone(app, ss[0])
	e.waitRetry(app, ss[1], retry)
	e.waitRetry(app, ss[2], back)
	e.waitDue(app, t0)
	evs := e.wantClaim(app, t0, 10, ss[2], ss[3])
	e.wantClaim(app, retry.NextAt, 10, ss[1])
	wantInterrupted(t, "claim of events given back", evs, 0)
	for _, ev := range evs {
		wantState(t, fmt.Sprintf("event %d given back", ev.Seq), &ev, 0, "", t0)
	}
	e.settle(app, ss[1], store.Settlement{Ack: true})
	e.settle(app, ss[3], store.Settlement{Ack: true})
	// Dead and replayed: a fresh start.
	e.start(app, ss[2])
	e.settle(app, ss[2], store.Settlement{Dead: true, Attempts: 1, NextAt: t0, LastError: "gave up"})
	e.waitDead(app, ss[2])
	if err := e.st.StartEvent(e.ctx, app, ss[2]); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("StartEvent of a dead event = %v, want ErrNotFound", err)
	}
	r := t0.Add(time.Hour)
	if err := e.st.ReplayEvent(e.ctx, app, ss[2], r); err != nil {
		t.Fatal(err)
	}
	evs = e.wantClaim(app, r, 1, ss[2])
	wantInterrupted(t, "claim of a replayed event", evs, 0)
	wantState(t, "replayed event", &evs[0], 0, "", r)
}

// testEventsInterrupted: an event whose run started and never settled
// comes back from the claim after its lease as interrupted, its attempt
// counted; the events claimed with it that never started come back as
// they were. Once settled, it is an ordinary event again.
func testEventsInterrupted(t *testing.T, e *env) {
	app, t0, ss := e.claimed(3)
	e.start(app, ss[0])
	// A second run: the first was retried at once.
	e.settle(app, ss[0], store.Settlement{Attempts: 1, NextAt: t0, LastError: "boom"})
	e.waitDue(app, t0)
	e.wantClaim(app, t0, 10, ss[0])
	e.start(app, ss[0])
	e.wantClaim(app, t0.Add(lease-time.Nanosecond), 10)

	t1 := t0.Add(lease)
	evs := e.wantClaim(app, t1, 10, ss...)
	wantInterrupted(t, "claim after the lease", evs, ss[0])
	wantState(t, "interrupted event", &evs[0], 2, "boom", t0)
	wantState(t, "event never started", &evs[1], 0, "", t0)

	retry := store.Settlement{Attempts: 2, NextAt: t1.Add(20 * time.Second), LastError: "interrupted"}
	e.settle(app, ss[0], retry)
	e.waitRetry(app, ss[0], retry)
	e.wantClaim(app, retry.NextAt.Add(-time.Nanosecond), 10)
	evs = e.wantClaim(app, retry.NextAt, 10, ss[0])
	wantInterrupted(t, "claim of the settled event", evs, 0)
	wantState(t, "interrupted event retried", &evs[0], 2, "interrupted", retry.NextAt)
}

// testEventsInterruptedReopen: the mark of a started run survives a
// reopen, which ends every lease: the event comes back interrupted at
// once, the others claimed with it as they were.
func testEventsInterruptedReopen(t *testing.T, e *env) {
	app, t0, ss := e.claimed(3)
	e.start(app, ss[1])
	e.reopen()
	evs := e.wantClaim(app, t0, 10, ss...)
	wantInterrupted(t, "claim after a reopen", evs, ss[1])
	wantState(t, "interrupted event", &evs[1], 1, "", t0)
	wantState(t, "event never started", &evs[0], 0, "", t0)
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

// testEventsTicks: SaveTick and LastTick keep the latest tick of each
// app, across a reopen.
func testEventsTicks(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	t0 := e.clk.Now()
	last := func(app int64) *store.Tick {
		t.Helper()
		tk, err := e.st.LastTick(e.ctx, app)
		if err != nil {
			t.Fatalf("LastTick: %v", err)
		}
		return tk
	}
	same := func(what string, got *store.Tick, want store.Tick) {
		t.Helper()
		if got == nil || !got.Planned.Equal(want.Planned) || !got.Started.Equal(want.Started) || got.Duration != want.Duration || got.Error != want.Error {
			t.Fatalf("%s: LastTick = %+v, want %+v", what, got, want)
		}
	}
	if tk := last(app); tk != nil {
		t.Fatalf("LastTick before any = %+v", tk)
	}
	ticks := []store.Tick{
		{Planned: t0, Started: t0.Add(3 * time.Millisecond), Duration: 1500 * time.Microsecond, Error: "boom"},
		{Planned: t0.Add(time.Minute), Started: t0.Add(time.Minute + time.Millisecond), Duration: 2 * time.Second},
	}
	for i, tk := range ticks {
		if err := e.st.SaveTick(e.ctx, app, tk); err != nil {
			t.Fatalf("SaveTick: %v", err)
		}
		same(fmt.Sprintf("after tick %d", i), last(app), tk)
	}
	if tk := last(other); tk != nil {
		t.Fatalf("LastTick of an app without ticks = %+v", tk)
	}
	e.reopen()
	same("after reopen", last(app), ticks[1])
}

// testEventsAcquireTick: each planned tick goes to one node; planned only
// moves forward; a tick that still holds keeps later ones from starting.
func testEventsAcquireTick(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	t0 := e.clk.Now()
	acquireHold := func(app int64, planned time.Time, node string, hold time.Time, want bool) {
		t.Helper()
		got, err := e.st.AcquireTick(e.ctx, app, planned, node, hold)
		if err != nil || got != want {
			t.Fatalf("AcquireTick(%v, %s, hold %v) = %v, %v; want %v", planned, node, hold, got, err, want)
		}
	}
	// A tick whose hold ends at its planned time never holds back another.
	acquire := func(app int64, planned time.Time, node string, want bool) {
		t.Helper()
		acquireHold(app, planned, node, planned, want)
	}
	p1, p2 := t0, t0.Add(time.Minute)
	acquire(app, p1, "n1", true)
	acquire(app, p1, "n2", false)
	acquire(app, p1, "n1", true) // the holder asks again
	acquire(other, p1, "n2", true)
	acquire(app, p2, "n2", true)
	acquire(app, p2, "n1", false)
	acquire(app, p1, "n1", false) // older than the latest given
	acquire(app, p1, "n3", false)
	acquire(other, p1, "n2", true)

	// Nodes racing for one tick: one wins.
	p3 := p2.Add(time.Minute)
	var wins sync.Map
	parallel(t, 8, 8, func(i int) error {
		ok, err := e.st.AcquireTick(e.ctx, app, p3, fmt.Sprint("r", i), p3)
		if ok {
			wins.Store(i, true)
		}
		return err
	})
	n := 0
	wins.Range(func(any, any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("%d of 8 racing nodes got the tick, want 1", n)
	}

	// A tick that runs past the next intervals holds them off, whichever
	// node asks, until it is released; then the next tick is given.
	third := e.app("carol", "jobs")
	s := time.Second
	acquireHold(third, t0, "n1", t0.Add(time.Hour), true)
	acquire(third, t0.Add(s), "n2", false)
	acquire(third, t0.Add(2*s), "n1", false)
	if err := e.st.ReleaseTick(e.ctx, third, t0, "n2"); err != nil { // not its tick: no effect
		t.Fatal(err)
	}
	acquire(third, t0.Add(3*s), "n2", false)
	if err := e.st.ReleaseTick(e.ctx, third, t0, "n1"); err != nil {
		t.Fatal(err)
	}
	acquire(third, t0.Add(4*s), "n2", true)
	// A node that dies mid-tick holds the schedule only until its hold.
	acquireHold(third, t0.Add(5*s), "n2", t0.Add(10*s), true)
	acquire(third, t0.Add(9*s), "n1", false)
	acquire(third, t0.Add(10*s), "n1", true)
}

// testEventsExclusiveClaims: an exclusive claim (onChange concurrency 1)
// leases nothing while any event of the app is under a live lease, taken
// by an exclusive claim or not; settled or lapsed leases free the app
// again; other apps are not held back; and of claimers racing on an idle
// app, one gets the events.
func testEventsExclusiveClaims(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	now := e.clk.Now()
	s := e.emitN(app, 4, now)
	o := e.emitN(other, 1, now)
	exclusive := func(app int64, at time.Time, limit int, want ...int64) {
		t.Helper()
		evs, err := e.st.ClaimEventsExclusive(e.ctx, app, at, limit, lease)
		if err != nil {
			t.Fatal(err)
		}
		if got := seqs(evs); !slices.Equal(got, want) {
			t.Fatalf("ClaimEventsExclusive(at %v, limit %d) = seqs %v, want %v", at, limit, got, want)
		}
	}
	exclusive(app, now, 1, s[0])
	exclusive(app, now, 10)         // s[0] is leased
	exclusive(other, now, 10, o[0]) // another app is not held back
	e.wantClaim(app, now, 1, s[1])  // a plain claim does not wait
	e.settle(app, s[0], store.Settlement{Ack: true})
	exclusive(app, now, 10) // s[1] is still leased
	retry := store.Settlement{Attempts: 1, NextAt: now.Add(time.Hour)}
	e.settle(app, s[1], retry)
	exclusive(app, now, 1, s[2]) // a settled event holds nothing, even before its outcome lands
	e.waitGone(app, s[0])
	e.waitRetry(app, s[1], retry)
	exclusive(app, now.Add(lease), 10, s[2], s[3]) // s[2]'s lease lapsed: claimed again, with the rest

	// Claimers racing on an idle app: one gets events, the others none.
	third := e.app("carol", "jobs")
	e.emitN(third, 3, now)
	var got sync.Map
	parallel(t, 8, 8, func(i int) error {
		evs, err := e.st.ClaimEventsExclusive(e.ctx, third, now, 10, lease)
		if len(evs) > 0 {
			got.Store(i, len(evs))
		}
		return err
	})
	n := 0
	got.Range(func(_, v any) bool { n++; return true })
	if n != 1 {
		t.Fatalf("%d of 8 racing exclusive claims got events, want 1", n)
	}
}

// testEventsOneEventPerDocument: a claim hands out only the earliest live
// event of each document, whoever holds it, whatever state it is in; the
// next one waits until it is acked or dead. Two claimers racing never get
// two events of one document.
func testEventsOneEventPerDocument(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	now := e.clk.Now()
	_, a1 := e.emit(app, "a", `{"n":1}`, now)
	_, b1 := e.emit(app, "b", `{"n":1}`, now)
	_, a2 := e.emit(app, "a", `{"n":2}`, now)
	_, c1 := e.emit(app, "c", `{"n":1}`, now)
	_, a3 := e.emit(app, "a", `{"n":3}`, now)
	e.wantClaim(app, now, 1, a1)
	e.wantClaim(app, now, 10, b1, c1) // a2 waits behind a1, leased
	half := now.Add(lease / 2)
	e.settle(app, a1, store.Settlement{Attempts: 1, NextAt: half, LastError: "boom"})
	e.waitRetry(app, a1, store.Settlement{Attempts: 1, NextAt: half, LastError: "boom"})
	e.wantClaim(app, now, 10) // a1 backs off: a2 still waits
	e.wantClaim(app, half, 10, a1)
	e.settle(app, a1, store.Settlement{Ack: true})
	e.waitGone(app, a1)
	e.wantClaim(app, half, 10, a2)
	e.settle(app, a2, store.Settlement{Dead: true, Attempts: 3, NextAt: now, LastError: "gave up"})
	e.waitDead(app, a2)
	e.wantClaim(app, half, 10, a3) // a dead event holds nothing back
	// A lease that ran out gives the document's head to the next claimer.
	e.wantClaim(app, half.Add(lease), 10, b1, c1, a3)

	// Two claimers racing over many documents with several events each.
	other := e.app("bob", "jobs")
	for i := range 60 {
		e.emit(other, fmt.Sprint("d", i%20), fmt.Sprintf(`{"n":%d}`, i), now)
	}
	var mu sync.Mutex
	docs := map[string]int{}
	parallel(t, 4, 4, func(int) error {
		evs, err := e.st.ClaimEvents(e.ctx, other, now, 10, lease)
		mu.Lock()
		defer mu.Unlock()
		for _, ev := range evs {
			docs[ev.Rev.ID]++
		}
		return err
	})
	for id, n := range docs {
		if n > 1 {
			t.Fatalf("racing claims handed out %d events of %s at once", n, id)
		}
	}
	if len(docs) != 20 {
		t.Fatalf("racing claims handed out events of %d documents, want all 20", len(docs))
	}
}

// testEventsRenewedLeases: RenewEvents keeps an event leased past its
// first lease, for as long as it is renewed; one not renewed is due again
// when its lease ends. A settled event is not brought back by a renewal.
func testEventsRenewedLeases(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	now := e.clk.Now()
	ss := e.emitN(app, 3, now)
	e.wantClaim(app, now, 10, ss...)
	e.settle(app, ss[2], store.Settlement{Attempts: 1, NextAt: now, LastError: "boom"})
	e.waitRetry(app, ss[2], store.Settlement{Attempts: 1, NextAt: now, LastError: "boom"})
	at := now
	for range 3 {
		at = at.Add(lease / 2)
		if err := e.st.RenewEvents(e.ctx, app, ss[:1], at.Add(lease)); err != nil {
			t.Fatal(err)
		}
	}
	// ss[0] is renewed until at+lease; ss[1] ran out long ago; ss[2] was
	// settled before the renewals and stays claimable.
	e.wantClaim(app, at, 10, ss[1], ss[2])
	e.wantClaim(app, at.Add(lease-time.Second), 10)
	e.wantClaim(app, at.Add(lease), 10, ss...)
}
