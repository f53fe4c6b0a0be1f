package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
)

// tickWatch records which node took each tick and how often each node
// asked for one, and can stop a node asking, as a dead node's stop.
type tickWatch struct {
	store.Store
	node   int
	taken  *sync.Map // planned (ms) -> node
	asks   *atomic.Int64
	frozen *atomic.Bool
}

func (w tickWatch) AcquireTick(ctx context.Context, appID int64, planned time.Time, node string, hold time.Time) (bool, error) {
	if w.frozen.Load() {
		return false, errors.New("this node is dead")
	}
	defer w.asks.Add(1)
	ok, err := w.Store.AcquireTick(ctx, appID, planned, node, hold)
	if ok {
		w.taken.Store(planned.UnixMilli(), w.node)
	}
	return ok, err
}

// waitAsks waits until a node has asked for ticks want times.
func waitAsks(t *testing.T, asks *atomic.Int64, want int64) {
	t.Helper()
	eventually(t, "the node asks for the tick", func() error {
		if n := asks.Load(); n < want {
			return fmt.Errorf("%d asks", n)
		}
		return nil
	})
}

// waitOnlyLongTick waits until the one long tick is the only work in
// progress on clk: every node has handled what the last advance fired and
// armed its next timer. The long tick counts as work until it ends.
func waitOnlyLongTick(t *testing.T, clk *clock.Virtual) {
	t.Helper()
	eventually(t, "the nodes settle beside the long tick", func() error {
		if n := clk.Working(); n > 1 {
			return fmt.Errorf("%d pieces of work in progress", n)
		}
		return nil
	})
}

// slowTicks is a backend whose tick planned at slow runs until release
// is closed (or it is stopped); each tick's planned time goes to started
// as it starts.
func slowTicks(started chan<- int64, release <-chan struct{}, slow *atomic.Int64) *appcodetest.Backend {
	return &appcodetest.Backend{Scheduled: func(ctx context.Context, ev appcode.TickEvent, hc appcode.HandlerContext) error {
		started <- ev.ScheduledTime
		if ev.ScheduledTime == slow.Load() {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}}
}

// TestNodesTickHoldLapsesWhenItsNodeDies: a tick that runs for several
// hold lengths keeps the schedule, renewing its hold; when its node stops
// renewing, as a dead node does, the other node ticks again within about a
// hold (30 s), not after the run limit (15 minutes here): the schedule, and
// the lease sweep it usually runs, is not stalled by a crash.
func TestNodesTickHoldLapsesWhenItsNodeDies(t *testing.T) {
	t.Parallel()
	started := make(chan int64, 100)
	release := make(chan struct{})
	var slow atomic.Int64 // the planned time of the one long tick
	b := slowTicks(started, release, &slow)
	const interval, renewEvery, hold = 5 * time.Second, 10 * time.Second, 30 * time.Second
	b.Cfg.Scheduled.Interval = interval
	b.Cfg.OnChange.Concurrency, b.Cfg.OnChange.MaxAttempts, b.Cfg.OnChange.Timeout = 1, 1, appcode.DefaultRunTimeout
	var taken sync.Map
	asks := []*atomic.Int64{{}, {}}
	frozen := []*atomic.Bool{{}, {}}
	_, clk := goNodes(t, 2, b, func(i int, st *postgres.Store) store.Store {
		return tickWatch{Store: st, node: i, taken: &taken, asks: asks[i], frozen: frozen[i]}
	})
	defer close(release)
	first := clk.Now().Add(interval)
	slow.Store(first.UnixMilli())

	waitTimers(t, clk, 2) // both nodes wait for the first tick
	clk.Advance(interval)
	if got := <-started; got != first.UnixMilli() {
		t.Fatalf("first tick planned at %d, want %d", got, first.UnixMilli())
	}
	v, _ := taken.Load(first.UnixMilli())
	holder := v.(int)
	other := 1 - holder

	// Three hold lengths in steps of an interval: the holder renews, the
	// other node asks for each tick and is refused.
	for i := range int(3 * hold / interval) {
		// Any timer within an interval is not enough: the holder's renewal
		// may be armed while the other node, still handling its last
		// refusal, has not armed its next tick, which an advance now would
		// push an interval further.
		waitOnlyLongTick(t, clk)
		want := asks[other].Load() + 1
		waitTimerWithin(t, clk, interval)
		clk.Advance(interval)
		waitAsks(t, asks[other], want)
		// The holder's renewals, each done before the clock moves on: the
		// first ask and one every renewEvery since the tick started.
		waitAsks(t, asks[holder], 1+int64(time.Duration(i+1)*interval/renewEvery))
		select {
		case got := <-started:
			t.Fatalf("tick %d started %v into a tick that still runs and renews its hold", got, time.Duration(i+1)*interval)
		default:
		}
	}

	// The holder dies: the other node ticks within a hold and an interval
	// of its last renewal.
	frozen[holder].Store(true)
	from := clk.Now()
	for {
		waitOnlyLongTick(t, clk)
		want := asks[other].Load() + 1
		waitTimerWithin(t, clk, interval)
		clk.Advance(interval)
		waitAsks(t, asks[other], want)
		if v, ok := taken.Load(clk.Now().UnixMilli()); ok && v == other {
			break
		}
		if took := clk.Now().Sub(from); took > hold+renewEvery+interval {
			t.Fatalf("the live node has not ticked %v after the other died, want within %v", took, hold+renewEvery+interval)
		}
	}
	select {
	case got := <-started:
		if got != clk.Now().UnixMilli() {
			t.Fatalf("tick %d ran, want %d", got, clk.Now().UnixMilli())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the live node took the tick but did not run it")
	}
}
