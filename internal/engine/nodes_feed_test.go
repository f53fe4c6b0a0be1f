package engine_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

// committed is one acknowledged write: what a follower must see once.
type committed struct {
	seq     int64
	id, rev string
}

// TestNodesFeedMissesNoCommitUnderRacingWriters races writers on two
// nodes of one PostgreSQL database against followers on both: each
// follower, whether it started before the writes or in the middle of
// them, reads every acknowledged write after its start exactly once and
// in seq order, and nothing else. It holds whatever numbering the store
// gives seqs, dense or not: only their order is asked for.
func TestNodesFeedMissesNoCommitUnderRacingWriters(t *testing.T) {
	t.Parallel()
	a, b, admin := twoNodes(t, "alice")
	ctx := context.Background()
	alice := engine.Actor{User: "alice"}
	const app = "alice/race"
	if _, err := a.CreateApp(ctx, admin, app, false); err != nil {
		t.Fatal(err)
	}
	nodes := []*engine.Engine{a, b}
	var until atomic.Int64 // the last acknowledged seq, once the writes end
	follow := func(e *engine.Engine, since int64) *engine.Feed {
		t.Helper()
		f, err := e.Follow(ctx, alice, app, "", since)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(f.Close)
		return f
	}
	// Two followers per node read live from before the first write.
	type result struct {
		node    int
		since   int64
		entries []engine.Entry
		err     error
	}
	results := make(chan result, 6)
	var position atomic.Int64 // how far node 2's first follower has read
	read := func(node int, f *engine.Feed, since int64, report func(int64)) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		var out []engine.Entry
		for f.Since() < until.Load() || until.Load() == 0 {
			c, err := f.Next(rctx, time.Second)
			if err != nil {
				results <- result{node, since, out, err}
				return
			}
			out = append(out, c.Changes...)
			if report != nil {
				report(f.Since())
			}
		}
		results <- result{node, since, out, nil}
	}
	for n, e := range nodes {
		for k := range 2 {
			f := follow(e, 0)
			var report func(int64)
			if n == 1 && k == 0 {
				report = position.Store
			}
			go read(n, f, 0, report)
		}
	}

	const writersPerNode, each = 6, 40
	const total = 2 * writersPerNode * each
	var (
		mu   sync.Mutex
		acks []committed
		wg   sync.WaitGroup
	)
	half := make(chan struct{})
	for n, e := range nodes {
		for w := range writersPerNode {
			wg.Go(func() {
				for i := range each {
					// A few documents shared by every writer, so that
					// writes of one document race across the nodes too.
					id := fmt.Sprintf("doc-%d", (n*writersPerNode+w+i)%10)
					r, err := e.Put(ctx, alice, app, []string{"a", "b"}[i%2], id, fmt.Appendf(nil, `{"n":%d,"w":%d}`, i, w), appcode.PutOptions{})
					if err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					acks = append(acks, committed{r.Seq, id, r.Rev})
					if len(acks) == total/2 {
						close(half)
					}
					mu.Unlock()
				}
			})
		}
	}
	// Halfway through, a follower on each node resumes from a position
	// node 2's feed has given: what a reader that reconnects does.
	<-half
	mid := position.Load()
	for n, e := range nodes {
		go read(n, follow(e, mid), mid, nil)
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	slices.SortFunc(acks, func(x, y committed) int { return cmp.Compare(x.seq, y.seq) })
	until.Store(acks[len(acks)-1].seq)
	for range 6 {
		r := <-results
		if r.err != nil {
			t.Fatalf("a follower on node %d from seq %d: %v", r.node+1, r.since, r.err)
		}
		var want []committed
		for _, c := range acks {
			if c.seq > r.since {
				want = append(want, c)
			}
		}
		seen := make([]committed, len(r.entries))
		for k, e := range r.entries {
			seen[k] = committed{e.Seq, e.ID, e.Rev}
		}
		if !slices.Equal(seen, want) {
			i := firstDiff(seen, want)
			t.Fatalf("a follower on node %d from seq %d read %d changes, want the %d acknowledged after it; they differ at #%d (%v, want %v)",
				r.node+1, r.since, len(seen), len(want), i, at(seen, i), at(want, i))
		}
	}
}

// at is x[i], or nothing past its end.
func at(x []committed, i int) any {
	if i < len(x) {
		return x[i]
	}
	return "nothing"
}

// firstDiff is the index of the first element where x and y differ.
func firstDiff(x, y []committed) int {
	for i := range min(len(x), len(y)) {
		if x[i] != y[i] {
			return i
		}
	}
	return min(len(x), len(y))
}
