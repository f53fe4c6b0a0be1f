package engine_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
)

// claimedSeqs records the seqs every claim of a node handed out.
type claimedSeqs struct {
	store.Store
	mu   *sync.Mutex
	seqs *[]int64
}

func (c claimedSeqs) ClaimEvents(ctx context.Context, cl store.Claim) ([]store.Event, error) {
	evs, err := c.Store.ClaimEvents(ctx, cl)
	c.mu.Lock()
	for _, ev := range evs {
		*c.seqs = append(*c.seqs, ev.Seq)
	}
	c.mu.Unlock()
	return evs, err
}

// TestNodesCommitHandsEventToItsRunner: on PostgreSQL a write whose app
// has a free slot on its node runs its onChange straight from the commit,
// with no claim in between, while a document's later write still waits
// for its earlier event and goes out through a claim, in order, and a run
// that hangs holds back only its own document.
func TestNodesCommitHandsEventToItsRunner(t *testing.T) {
	t.Parallel()
	started := make(chan appcode.ChangeEvent, 10)
	release := make(chan struct{})
	var slowSeen atomic.Bool
	b := &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		started <- ev
		if ev.DocID == "slow" && slowSeen.CompareAndSwap(false, true) {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return nil
	}}
	b.Cfg.OnChange.Concurrency, b.Cfg.OnChange.MaxAttempts, b.Cfg.OnChange.Timeout = 4, 3, appcode.DefaultRunTimeout
	var mu sync.Mutex
	var claimed []int64
	es, _ := goNodes(t, 2, b, func(i int, st *postgres.Store) store.Store { return claimedSeqs{st, &mu, &claimed} })
	ctx := context.Background()
	alice := engine.Actor{User: "alice"}
	put := func(id string) int64 {
		t.Helper()
		r, err := es[0].Put(ctx, alice, "alice/app", "jobs", id, []byte(`{"n":1}`), appcode.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Seq
	}
	next := func() appcode.ChangeEvent {
		t.Helper()
		return <-started
	}
	wasClaimed := func(seq int64) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(claimed, seq)
	}

	s1 := put("slow")
	if ev := next(); ev.Seq != s1 || ev.Attempt != 1 {
		t.Fatalf("first run: seq %d attempt %d, want seq %d attempt 1", ev.Seq, ev.Attempt, s1)
	}
	// The slow document's next write waits for its first run; another
	// document's goes out at once, straight from its commit.
	s2 := put("slow")
	s3 := put("other")
	if ev := next(); ev.Seq != s3 {
		t.Fatalf("while seq %d runs, seq %d started, want seq %d of another document", s1, ev.Seq, s3)
	}
	select {
	case ev := <-started:
		t.Fatalf("seq %d started while the run of seq %d of its document goes on", ev.Seq, s1)
	default:
	}
	close(release)
	if ev := next(); ev.Seq != s2 || ev.OldDoc == nil {
		t.Fatalf("after seq %d, seq %d started (old doc %v), want seq %d with its old doc", s1, ev.Seq, ev.OldDoc != nil, s2)
	}
	if wasClaimed(s1) || wasClaimed(s3) {
		t.Fatalf("claims handed out %v: the commits of seqs %d and %d should have handed their events over", claimed, s1, s3)
	}
	if !wasClaimed(s2) {
		t.Fatalf("seq %d ran, but no claim handed it out (claims: %v)", s2, claimed)
	}
}
