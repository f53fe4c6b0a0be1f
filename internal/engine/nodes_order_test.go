package engine_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/pgtest"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
)

// goNodes starts n engines with the Go backend b on one fresh PostgreSQL
// database, sharing one virtual clock, with alice/app deployed.
func goNodes(t *testing.T, n int, b *appcodetest.Backend, wrap func(i int, st *postgres.Store) store.Store) ([]*engine.Engine, *clock.Virtual) {
	t.Helper()
	dbURL := pgtest.Fresh(t, 8)
	clk := clock.NewVirtual(time.Date(2026, 9, 24, 12, 0, 0, 0, time.UTC))
	var es []*engine.Engine
	for i := range n {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		st, err := postgres.Open(ctx, dbURL)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		var s store.Store = st
		if wrap != nil {
			s = wrap(i, st)
		}
		e := engine.New(s, engine.Options{Clock: clk, Code: appcodetest.Compiler{B: b}, PollEvery: 5 * time.Millisecond})
		t.Cleanup(e.Close)
		es = append(es, e)
	}
	deployGoApp(t, es[0])
	for _, e := range es {
		if err := e.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// Each node's runner takes its first look at the app before the test
	// writes: until then a commit has no slot to hand its event to.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := clk.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	return es, clk
}

// waitTimers waits until at least n timers are armed on clk.
func waitTimers(t *testing.T, clk *clock.Virtual, n int) {
	t.Helper()
	for range 10000 {
		if clk.Pending() >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d timers armed, want %d", clk.Pending(), n)
}

// TestNodesTickHoldsTheSchedule: a scheduled tick that runs past the next
// interval keeps the other node, free at that interval, from starting a
// tick beside it (docs/architecture.md, "backend.js and delivery": ticks never overlap, across all nodes). Once
// it ends, ticks go on.
func TestNodesTickHoldsTheSchedule(t *testing.T) {
	t.Parallel()
	started := make(chan int64, 10)
	release := make(chan struct{})
	var slow atomic.Int64 // the planned time of the one slow tick
	b := slowTicks(started, release, &slow)
	b.Cfg.Scheduled.Interval = time.Second
	b.Cfg.OnChange.Concurrency, b.Cfg.OnChange.MaxAttempts, b.Cfg.OnChange.Timeout = 1, 1, appcode.DefaultRunTimeout
	_, clk := goNodes(t, 2, b, nil)
	t0 := clk.Now()
	slow.Store(t0.Add(time.Second).UnixMilli())

	waitTimers(t, clk, 2) // both nodes wait for the first tick
	clk.Advance(time.Second)
	if got := <-started; got != t0.Add(time.Second).UnixMilli() {
		t.Fatalf("first tick planned at %d", got)
	}
	// The free node waits for the next tick; when it comes, it finds the
	// schedule held, skips it and waits again. (The other timer is the
	// running tick's renewal of its hold.)
	for range 2 {
		waitTimers(t, clk, 2)
		clk.Advance(time.Second)
		waitTimers(t, clk, 2)
		select {
		case got := <-started:
			t.Fatalf("tick %d started while the first tick still runs", got)
		default:
		}
	}
	close(release)
	// The long tick ends and lets the schedule go.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := clk.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	waitTimers(t, clk, 2)
	clk.Advance(time.Second)
	if got := <-started; got != t0.Add(4*time.Second).UnixMilli() {
		t.Fatalf("after the long tick, the next tick planned at %d, want %d", got, t0.Add(4*time.Second).UnixMilli())
	}
}

// claimsSeen counts a node's claims that have returned.
type claimsSeen struct {
	store.Store
	n *atomic.Int64
}

func (c claimsSeen) ClaimEvents(ctx context.Context, cl store.Claim) ([]store.Event, error) {
	defer c.n.Add(1)
	return c.Store.ClaimEvents(ctx, cl)
}

// TestNodesConcurrencyOneKeepsCommitOrder: with onChange concurrency 1,
// a node does not start the next event while another node still runs
// the one before it (docs/architecture.md, "backend.js and delivery": strict app-wide commit order), however
// often it looks; once that run ends, the next event goes out.
func TestNodesConcurrencyOneKeepsCommitOrder(t *testing.T) {
	t.Parallel()
	started := make(chan int64, 10)
	release := make(chan struct{})
	b := &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		started <- ev.Seq
		if ev.DocID == "j1" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}}
	b.Cfg.OnChange.Concurrency, b.Cfg.OnChange.MaxAttempts, b.Cfg.OnChange.Timeout = 1, 3, appcode.DefaultRunTimeout
	claims := []*atomic.Int64{{}, {}}
	es, _ := goNodes(t, 2, b, func(i int, st *postgres.Store) store.Store { return claimsSeen{st, claims[i]} })
	ctx := context.Background()
	alice := engine.Actor{User: "alice"}
	put := func(id string) int64 {
		t.Helper()
		r, err := es[0].Put(ctx, alice, "alice/app", "jobs", id, []byte(`{}`), appcode.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Seq
	}
	s1 := put("j1")
	if got := <-started; got != s1 {
		t.Fatalf("first delivered seq %d, want %d", got, s1)
	}
	s2 := put("j2")
	// The node that does not run seq 1 looks for due events again and
	// again (the poll is 5 ms); the one that does has no free slot.
	total := func() int64 { return claims[0].Load() + claims[1].Load() }
	from := total()
	eventually(t, "five more claims", func() error {
		if n := total() - from; n < 5 {
			return fmt.Errorf("%d claims", n)
		}
		return nil
	})
	select {
	case got := <-started:
		t.Fatalf("seq %d delivered while seq %d still runs, with concurrency 1", got, s1)
	default:
	}
	close(release)
	if got := <-started; got != s2 {
		t.Fatalf("after seq %d, delivered seq %d, want %d", s1, got, s2)
	}
}
