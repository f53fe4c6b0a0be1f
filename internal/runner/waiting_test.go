package runner_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
	"github.com/handoff-run/handoff/store"
)

// blockingBackend's onChange tells started which document it runs, then
// waits for a token on release.
func blockingBackend(concurrency int) (b *appcodetest.Backend, started chan string, release chan struct{}) {
	started, release = make(chan string, 64), make(chan struct{}, 64)
	b = &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, _ appcode.HandlerContext) error {
		started <- ev.DocID
		select {
		case <-release:
		case <-ctx.Done():
		}
		return nil
	}}
	b.Cfg.OnChange.Concurrency = concurrency
	return b, started, release
}

func receive(t *testing.T, ch chan string) string {
	t.Helper()
	select {
	case id := <-ch:
		return id
	case <-time.After(time.Minute):
		t.Fatal("no run started")
		return ""
	}
}

// claimlessStore is claimingStore whose outbox claims come back empty, so
// the only runs are those of the commits that reserved slots.
type claimlessStore struct{ claimingStore }

func (s *claimlessStore) ClaimEvents(context.Context, store.Claim) ([]store.Event, error) {
	return nil, nil
}

// TestCommitsClaimPastTheSlots: with every slot taken, a commit still
// claims its event, up to concurrency of them; they wait on the node and
// take the slots of runs that end, oldest first. Once a commit found no
// room, and its event went to the outbox, later commits take free slots
// only until a claim shows the outbox has caught up, so they cannot go
// ahead of it.
func TestCommitsClaimPastTheSlots(t *testing.T) {
	b, started, release := blockingBackend(4)
	var cs *claimlessStore
	g := newRigOn(t, b, func(st store.Store) store.Store { cs = &claimlessStore{claimingStore{Store: st}}; return cs })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.clk.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	// commit writes id as the engine would; start is nil when the commit
	// found no room to claim its event.
	commit := func(id string) (start func()) {
		w := &store.Write{AppID: g.h.app.ID, DB: "jobs", ID: id, Rev: "1-" + id, Body: []byte(`{}`),
			Writer: store.Writer{User: "alice"}, Path: "http", Time: g.clk.Now(), Event: &store.EventSpec{NextAt: g.clk.Now()}}
		slot := g.r.Reserve(g.h.app, w)
		seq, err := g.st.Commit(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		if slot == nil {
			return nil
		}
		return func() { slot.Start(g.h.app, w, nil, seq, g.clk.Now()) }
	}
	for i := range 8 {
		id := fmt.Sprintf("d%d", i)
		start := commit(id)
		if start == nil {
			t.Fatalf("commit %d of 8 found no room; four run and four wait", i+1)
		}
		start()
	}
	running := map[string]bool{}
	for range 4 {
		running[receive(t, started)] = true
	}
	for i := range 4 {
		if id := fmt.Sprintf("d%d", i); !running[id] {
			t.Fatalf("runs %v; want the first four commits' events", running)
		}
	}
	// Nothing else starts before a run ends: the next four wait.
	select {
	case id := <-started:
		t.Fatalf("%s started with every slot taken", id)
	default:
	}
	if commit("d8") != nil {
		t.Fatal("a ninth commit claimed its event; room is concurrency past the slots")
	}
	for i := 4; i < 8; i++ {
		release <- struct{}{}
		if id, want := receive(t, started), fmt.Sprintf("d%d", i); id != want {
			t.Fatalf("a freed slot ran %s; want the oldest waiting event, %s", id, want)
		}
		if i == 4 {
			// A place on the waiting list is free again, but d8 waits in
			// the outbox: a commit now must not claim ahead of it.
			if commit("d9") != nil {
				t.Fatal("a commit claimed its event while an earlier one waited in the outbox")
			}
		}
	}
	for range 4 {
		release <- struct{}{}
	}
	if err := g.clk.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if n := cs.settled.Load(); n != 8 {
		t.Fatalf("%d events settled; want the 8 claimed ones", n)
	}
	// The deliverer's claims came back empty: the outbox has caught up,
	// so a commit claims again.
	if start := commit("d10"); start == nil {
		t.Fatal("no room for a commit once every run ended and a claim came back short")
	} else {
		start()
		if id := receive(t, started); id != "d10" {
			t.Fatalf("ran %s, want d10", id)
		}
		release <- struct{}{}
	}
}

// limitsStore records the Limit of each claim.
type limitsStore struct {
	store.Store
	mu     sync.Mutex
	limits []int
}

func (s *limitsStore) ClaimEvents(ctx context.Context, c store.Claim) ([]store.Event, error) {
	s.mu.Lock()
	s.limits = append(s.limits, c.Limit)
	s.mu.Unlock()
	return s.Store.ClaimEvents(ctx, c)
}

// TestClaimsFillTheWaitingList: with every slot taken, the deliverer
// claims a whole batch for the waiting list rather than one event each
// time a slot frees (on PostgreSQL, a transaction per event). Every
// event runs once.
func TestClaimsFillTheWaitingList(t *testing.T) {
	const concurrency, events = 10, 35
	b, started, release := blockingBackend(concurrency)
	var ls *limitsStore
	g := newRigOn(t, b, func(st store.Store) store.Store { ls = &limitsStore{Store: st}; return ls })
	for i := range events {
		g.commit(fmt.Sprintf("d%02d", i))
	}
	ran := map[string]int{}
	for range concurrency {
		ran[receive(t, started)]++
	}
	for range events - concurrency {
		release <- struct{}{}
		ran[receive(t, started)]++
	}
	for range concurrency {
		release <- struct{}{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.clk.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	if len(ran) != events {
		t.Fatalf("%d documents ran; want %d", len(ran), events)
	}
	for id, n := range ran {
		if n != 1 {
			t.Fatalf("%s ran %d times", id, n)
		}
	}
	g.outbox()
	ls.mu.Lock()
	defer ls.mu.Unlock()
	for _, l := range ls.limits {
		if l != 10 {
			t.Fatalf("claims asked for %v events; want whole batches of 10", ls.limits)
		}
	}
}
