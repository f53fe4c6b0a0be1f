package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

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
			evs, err := e.st.ClaimEvents(e.ctx, store.Claim{AppID: app, Now: t0, Limit: 3, Lease: lease})
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
		evs, err := e.st.ClaimEvents(e.ctx, store.Claim{AppID: app, Now: at, Limit: limit, Lease: lease, Exclusive: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := seqs(evs); !slices.Equal(got, want) {
			t.Fatalf("ClaimEvents(exclusive, at %v, limit %d) = seqs %v, want %v", at, limit, got, want)
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
		evs, err := e.st.ClaimEvents(e.ctx, store.Claim{AppID: third, Now: now, Limit: 10, Lease: lease, Exclusive: true})
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
		evs, err := e.st.ClaimEvents(e.ctx, store.Claim{AppID: other, Now: now, Limit: 10, Lease: lease})
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
