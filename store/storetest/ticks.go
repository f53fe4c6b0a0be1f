package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

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
