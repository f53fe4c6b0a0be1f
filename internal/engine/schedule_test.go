package engine_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
)

// TestDeployStopsTheRunningTick: a scheduled tick still running when a new
// version is deployed is stopped, says so in the app's log, and the new
// version ticks at the next interval instead of after the old run.
func TestDeployStopsTheRunningTick(t *testing.T) {
	t.Parallel()
	started := make(chan int64, 4)
	stopped := make(chan error, 4)
	first := true
	b := &appcodetest.Backend{Scheduled: func(ctx context.Context, ev appcode.TickEvent, hc appcode.HandlerContext) error {
		started <- ev.ScheduledTime
		if first { // a tick that would run forever
			first = false
			<-ctx.Done()
			stopped <- ctx.Err()
			return ctx.Err()
		}
		return nil
	}}
	b.Cfg.Scheduled.Interval = time.Second
	env := newDeliveryEnv(t, b)
	ctx := context.Background()
	t0 := env.clk.Now()
	waitTimer(t, env.clk)
	env.clk.Advance(time.Second)
	<-started
	if _, err := env.e.Deploy(ctx, env.owner, "alice/app", "", "// go backend, version 2"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(20 * time.Second):
		t.Fatal("the running tick was not stopped by the deploy")
	}
	waitTimer(t, env.clk)
	env.clk.Advance(time.Second)
	if got := <-started; got != t0.Add(2*time.Second).UnixMilli() {
		t.Fatalf("next tick planned at %d, want %d", got, t0.Add(2*time.Second).UnixMilli())
	}
	eventually(t, "a log line saying why the tick stopped", func() error {
		lines, err := env.e.Logs(ctx, env.owner, "alice/app", 0, 100)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if l.Source == "scheduled" && strings.Contains(l.Message, "new version of the code was deployed") {
				return nil
			}
		}
		return fmt.Errorf("log lines %+v", lines)
	})
}

// TestDeployStopsTheRunningOnChange: onChange runs of a version that a
// deploy or a rollback replaces are stopped, however long their run
// limit, and their events run again with the new code as the same
// attempt: replacing the code is no failure of the event. A rollback
// stops a running tick as a deploy does.
func TestDeployStopsTheRunningOnChange(t *testing.T) {
	t.Parallel()
	var live atomic.Int32 // the version the test made live last
	live.Store(1)
	type run struct {
		version int32
		ev      appcode.ChangeEvent
	}
	runs := make(chan run, 10)
	ticks, stopped := make(chan struct{}, 10), make(chan struct{}, 10)
	b := &appcodetest.Backend{
		OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
			v := live.Load()
			runs <- run{v, ev}
			if v < 3 { // awaits something that never settles
				<-ctx.Done()
				return ctx.Err()
			}
			return nil
		},
		Scheduled: func(ctx context.Context, ev appcode.TickEvent, hc appcode.HandlerContext) error {
			ticks <- struct{}{}
			<-ctx.Done()
			stopped <- struct{}{}
			return ctx.Err()
		},
	}
	b.Cfg.OnChange.Timeout = time.Hour
	b.Cfg.Scheduled.Interval = time.Hour
	env := newDeliveryEnv(t, b)
	ctx := context.Background()
	res, err := env.e.Put(ctx, env.owner, "alice/app", "jobs", "j", []byte(`{}`), appcode.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wait := func(ch <-chan struct{}, what string) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(20 * time.Second):
			t.Fatal(what)
		}
	}
	next := func(version int32) {
		t.Helper()
		select {
		case r := <-runs:
			if r.version != version || r.ev.Seq != res.Seq || r.ev.Attempt != 1 {
				t.Fatalf("run of version %d, event %+v; want version %d, seq %d, attempt 1", r.version, r.ev, version, res.Seq)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("no run of version %d", version)
		}
	}
	tick := func() {
		t.Helper()
		// The schedule's timer, and the lease renewal of the onChange run
		// in flight.
		waitTimers(t, env.clk, 2)
		env.clk.Advance(time.Hour)
		wait(ticks, "no tick started")
	}
	next(1)
	tick()
	live.Store(2)
	if _, err := env.e.Deploy(ctx, env.owner, "alice/app", "", "// go backend, version 2"); err != nil {
		t.Fatal(err)
	}
	next(2)
	wait(stopped, "the deploy did not stop the tick")
	tick()
	live.Store(3)
	if err := env.e.Rollback(ctx, env.owner, "alice/app", 1); err != nil {
		t.Fatal(err)
	}
	next(3)
	wait(stopped, "the rollback did not stop the tick")
	eventually(t, "the event acked by the version rolled back to", func() error {
		evs, err := env.e.Events(ctx, env.owner, "alice/app", false, 0, 10)
		if err == nil && len(evs) != 0 {
			err = fmt.Errorf("events waiting: %+v", evs)
		}
		return err
	})
	eventually(t, "log lines saying why the runs stopped", func() error {
		lines, err := env.e.Logs(ctx, env.owner, "alice/app", 0, 100)
		if err != nil {
			return err
		}
		n := 0
		for _, l := range lines {
			if l.Source == "onChange" && strings.Contains(l.Message, "new version of the code was deployed") {
				n++
			}
		}
		if n != 2 {
			return fmt.Errorf("%d such lines in %+v", n, lines)
		}
		return nil
	})
}
