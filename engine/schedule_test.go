package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/engine"
)

// TestDeployStopsTheRunningTick: a scheduled tick still running when a new
// version is deployed is stopped, says so in the app's log, and the new
// version ticks at the next interval instead of after the old run.
func TestDeployStopsTheRunningTick(t *testing.T) {
	started := make(chan int64, 4)
	stopped := make(chan error, 4)
	first := true
	b := &goBackend{scheduled: func(ctx context.Context, ev engine.TickEvent, hc engine.HandlerContext) error {
		started <- ev.ScheduledTime
		if first { // a tick that would run forever
			first = false
			<-ctx.Done()
			stopped <- ctx.Err()
			return ctx.Err()
		}
		return nil
	}}
	b.cfg.Scheduled.Interval = time.Second
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
