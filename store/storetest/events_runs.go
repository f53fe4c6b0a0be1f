package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

// The runs of events: a run begins when its attempt is counted
// (StartEvent, or a claim or a commit that starts it), and a run that
// never settled comes back interrupted.

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

// testEventsClaimStart: a claim with Start leaves each event as if
// StartEvent had followed it (the store marked it, Started) or not (the
// caller starts it): either way a run begun counts once, comes back
// interrupted after the lease, and is never marked again. Attempts read
// as before the mark, and an exclusive claim marks nothing.
func testEventsClaimStart(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t0 := e.clk.Now()
	ss := e.emitN(app, 3, t0)
	claim := func(now time.Time, c store.Claim) []store.Event {
		t.Helper()
		c.AppID, c.Now, c.Limit, c.Lease = app, now, 10, lease
		evs, err := e.st.ClaimEvents(e.ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	evs := claim(t0, store.Claim{Start: true})
	if got := seqs(evs); !slices.Equal(got, ss) {
		t.Fatalf("claim with Start = seqs %v, want %v", got, ss)
	}
	wantInterrupted(t, "claim with Start", evs, 0)
	for i := range evs {
		wantState(t, "event claimed with Start", &evs[i], 0, "", t0)
		if !evs[i].Started {
			e.start(app, evs[i].Seq)
		}
	}
	for _, s := range ss {
		wantState(t, fmt.Sprintf("running event %d", s), find(e.listEvents(app, false), s), 1, "", t0)
	}
	// The runs never settle: after the lease they are interrupted, their
	// one attempt counted, and a claim with Start does not mark them again.
	t1 := t0.Add(lease)
	evs = claim(t1, store.Claim{Start: true})
	for i := range evs {
		if !evs[i].Interrupted || evs[i].Started {
			t.Fatalf("event %d after the lease: interrupted %v, started %v; want interrupted, not started", evs[i].Seq, evs[i].Interrupted, evs[i].Started)
		}
		wantState(t, "interrupted event", &evs[i], 1, "", t0)
	}
	// Given back with no attempt: ordinary events again. An exclusive
	// claim with Start leaves the starting to its caller.
	for _, s := range ss {
		e.settle(app, s, store.Settlement{Attempts: 0, NextAt: t1})
	}
	e.waitDue(app, t1)
	evs = claim(t1, store.Claim{Start: true, Exclusive: true})
	if len(evs) == 0 {
		t.Fatal("an exclusive claim of the events given back took none")
	}
	for i := range evs {
		if evs[i].Interrupted || evs[i].Started {
			t.Fatalf("event %d of an exclusive claim: interrupted %v, started %v; want neither", evs[i].Seq, evs[i].Interrupted, evs[i].Started)
		}
		wantState(t, "event given back", &evs[i], 0, "", t1)
	}
}

// testEventsCommitClaim: a commit asked to claim its event (ClaimUntil)
// leases it and marks its run begun, as a claim with Start would, when no
// earlier live event of the document exists; otherwise, or on a store
// without CommitClaims, the event waits for a claim as any other.
func testEventsCommitClaim(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t0 := e.clk.Now()
	honoured := e.st.Capabilities().CommitClaims
	ask := func(id string) (*store.Write, int64) {
		t.Helper()
		w := e.over(app, "jobs", id, `{}`)
		w.Event = &store.EventSpec{NextAt: t0, ClaimUntil: t0.Add(lease)}
		return w, e.commit(w)
	}
	w1, s1 := ask("x")
	if w1.Event.Claimed != honoured {
		t.Fatalf("Claimed = %v on a store with CommitClaims %v", w1.Event.Claimed, honoured)
	}
	// A later write of the same document waits behind the first event.
	w2, s2 := ask("x")
	if w2.Event.Claimed {
		t.Fatal("a commit claimed an event of a document whose earlier event is live")
	}
	if !honoured {
		e.wantClaim(app, t0, 10, s1)
		return
	}
	e.wantClaim(app, t0, 10)
	wantState(t, "event claimed by its commit", find(e.listEvents(app, false), s1), 1, "", t0)
	if ev := find(e.listEvents(app, false), s1); !ev.Running {
		t.Fatal("the event claimed by its commit is not listed as running")
	}
	// Its run never settles: after the lease it is interrupted.
	evs := e.wantClaim(app, t0.Add(lease), 10, s1)
	wantInterrupted(t, "claim after the commit's lease", evs, s1)
	e.settle(app, s1, store.Settlement{Ack: true})
	e.waitGone(app, s1)
	evs = e.wantClaim(app, t0.Add(lease), 10, s2)
	wantInterrupted(t, "claim of the later event", evs, 0)
}
