package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
)

// leaseWatch records a node's claims and renewals, and can stop both, as
// a dead node's stop.
type leaseWatch struct {
	store.Store
	node    int
	claimed *sync.Map // seq -> node that claimed it last
	renews  *atomic.Int64
	frozen  *atomic.Bool
}

func (w leaseWatch) ClaimEvents(ctx context.Context, c store.Claim) ([]store.Event, error) {
	if w.frozen.Load() {
		return nil, nil
	}
	evs, err := w.Store.ClaimEvents(ctx, c)
	for _, ev := range evs {
		w.claimed.Store(ev.Seq, w.node)
	}
	return evs, err
}

// A commit may claim its own event (EventSpec.ClaimUntil).
func (w leaseWatch) Commit(ctx context.Context, wr *store.Write) (int64, error) {
	seq, err := w.Store.Commit(ctx, wr)
	if err == nil && wr.Event != nil && wr.Event.Claimed {
		w.claimed.Store(seq, w.node)
	}
	return seq, err
}

func (w leaseWatch) RenewEvents(ctx context.Context, appID int64, seqs []int64, until time.Time) error {
	if w.frozen.Load() {
		return nil
	}
	defer w.renews.Add(1)
	return w.Store.RenewEvents(ctx, appID, seqs, until)
}

// TestNodesLeaseRenewedWhileRunLives: an event whose run outlives several
// lease lengths stays with its node, which renews the lease, while the
// other node looks for work all along (docs/architecture.md, "backend.js and delivery"). Once that node stops
// renewing, as a dead node does, the event runs on the other node within
// about a lease.
func TestNodesLeaseRenewedWhileRunLives(t *testing.T) {
	t.Parallel()
	started := make(chan int64, 10)
	release := make(chan struct{})
	b := &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		started <- ev.Seq
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}}
	b.Cfg.OnChange.Concurrency, b.Cfg.OnChange.MaxAttempts, b.Cfg.OnChange.Timeout = 4, 3, time.Hour
	var claimed sync.Map
	renews := []*atomic.Int64{{}, {}}
	frozen := []*atomic.Bool{{}, {}}
	es, clk := goNodes(t, 2, b, func(i int, st *postgres.Store) store.Store {
		return leaseWatch{Store: st, node: i, claimed: &claimed, renews: renews[i], frozen: frozen[i]}
	})
	defer close(release)
	r, err := es[0].Put(context.Background(), engine.Actor{User: "alice"}, "alice/app", "jobs", "long", []byte(`{}`), appcode.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := <-started; got != r.Seq {
		t.Fatalf("started seq %d, want %d", got, r.Seq)
	}
	v, _ := claimed.Load(r.Seq)
	holder := v.(int)
	// Ten renewal periods: over three lease lengths.
	const renewEvery, lease = 10 * time.Second, 30 * time.Second
	for i := range 10 {
		// The renewal's own timer, not just any: both nodes also arm one
		// for when the lease runs out, and moving the clock before the
		// holder armed its next renewal would skip that renewal.
		waitTimerWithin(t, clk, renewEvery)
		clk.Advance(renewEvery)
		eventually(t, "a renewal", func() error {
			if n := renews[holder].Load(); n < int64(i+1) {
				return fmt.Errorf("%d renewals", n)
			}
			return nil
		})
	}
	// The other node polls every 5 ms: give it time to look.
	time.Sleep(50 * time.Millisecond)
	select {
	case got := <-started:
		t.Fatalf("seq %d started again while its run lives and its lease is renewed", got)
	default:
	}
	// The holder stops renewing: within about a lease the other node
	// claims the event; its run counts as interrupted (docs/architecture.md, "backend.js and delivery"), so it
	// runs there after the first backoff.
	frozen[holder].Store(true)
	from := clk.Now()
	other := func() bool { v, _ := claimed.Load(r.Seq); return v.(int) != holder }
	for !other() {
		if clk.Now().Sub(from) > lease+5*time.Second {
			t.Fatalf("the event was not claimed elsewhere within %v of its node's last renewal", lease+5*time.Second)
		}
		clk.Advance(time.Second)
		time.Sleep(20 * time.Millisecond)
	}
	if took := clk.Now().Sub(from); took < lease {
		t.Fatalf("the event was claimed elsewhere %v after its node's last renewal, before its lease of %v ended", took, lease)
	}
	for range 30 {
		clk.Advance(time.Second)
		select {
		case got := <-started:
			if got != r.Seq {
				t.Fatalf("started seq %d, want %d", got, r.Seq)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatal("the event claimed elsewhere did not run within 30 s")
}

// waitTimerWithin waits until a timer of clk is due within d of its now.
func waitTimerWithin(t *testing.T, clk *clock.Virtual, d time.Duration) {
	t.Helper()
	for range 10000 {
		if at, ok := clk.NextAt(); ok && !at.After(clk.Now().Add(d)) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no timer due within %v", d)
}
