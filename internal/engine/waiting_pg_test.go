package engine_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
)

// commitsClaimed counts the events claimed for the node: by their
// commits (store.EventSpec.Claimed) and by the deliverer.
type commitsClaimed struct {
	store.Store
	n *atomic.Int64
}

func (c commitsClaimed) Commit(ctx context.Context, w *store.Write) (int64, error) {
	seq, err := c.Store.Commit(ctx, w)
	if err == nil && w.Event != nil && w.Event.Claimed {
		c.n.Add(1)
	}
	return seq, err
}

func (c commitsClaimed) ClaimEvents(ctx context.Context, cl store.Claim) ([]store.Event, error) {
	evs, err := c.Store.ClaimEvents(ctx, cl)
	c.n.Add(int64(len(evs)))
	return evs, err
}

// TestWaitingListOnPostgres: on a store whose commits claim their events,
// with every run held, the node claims events past the slots
// (runner/waiting.go), at commit or from the outbox, up to concurrency
// more and a claim's batch. Once the runs go on,
// every event runs once, never more than concurrency at once, and the
// events of a document one at a time in commit order.
func TestWaitingListOnPostgres(t *testing.T) {
	t.Parallel()
	const concurrency, docs, events = 5, 12, 60
	runs := newDocRuns(t)
	release := make(chan struct{})
	var mu sync.Mutex
	ran := map[int64]int{}
	b := &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		runs.begin(ev)
		defer runs.end(ev)
		mu.Lock()
		ran[ev.Seq]++
		mu.Unlock()
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}}
	b.Cfg.OnChange.Concurrency, b.Cfg.OnChange.MaxAttempts, b.Cfg.OnChange.Timeout = concurrency, 3, appcode.DefaultRunTimeout
	var claimed atomic.Int64
	es, _ := goNodes(t, 1, b, func(_ int, st *postgres.Store) store.Store { return commitsClaimed{st, &claimed} })
	ctx := context.Background()
	alice := engine.Actor{User: "alice"}
	for i := range events {
		if _, err := es[0].Put(ctx, alice, "alice/app", "jobs", fmt.Sprint("d", i%docs), []byte(fmt.Sprintf(`{"n":%d}`, i)), appcode.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "events claimed past the slots", func() error {
		if n := claimed.Load(); n <= concurrency {
			return fmt.Errorf("with every run held, %d events claimed; want more than the %d slots", n, concurrency)
		}
		return nil
	})
	// The bound: the slots, as many waiting, and a claim's batch that
	// commits raced.
	if n, most := claimed.Load(), int64(2*concurrency+concurrency); n > most {
		t.Fatalf("with every run held, %d events claimed; want at most %d", n, most)
	}
	close(release)
	eventually(t, "every event run", func() error {
		if n := runs.finished(); n != events {
			return fmt.Errorf("%d of %d runs ended", n, events)
		}
		return nil
	})
	if runs.most != concurrency {
		t.Fatalf("at most %d runs at once, want %d", runs.most, concurrency)
	}
	mu.Lock()
	for seq, n := range ran {
		if n != 1 {
			t.Errorf("seq %d ran %d times", seq, n)
		}
	}
	mu.Unlock()
	eventually(t, "an empty outbox", func() error {
		evs, err := es[0].Events(ctx, alice, "alice/app", false, 0, 100)
		if err != nil {
			return err
		}
		if len(evs) != 0 {
			return fmt.Errorf("%d events left", len(evs))
		}
		return nil
	})
}
