package runner_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
	"github.com/handoff-run/handoff/internal/runner"
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

// reserveCommit writes id as the engine would, its event claimed at
// commit if the runner has room for it; start then runs or queues it, and
// is nil when there was no room. With claimed false the store is taken
// to have declined the claim (an earlier event of the document is live):
// the slot is cancelled and the deliverer poked.
func reserveCommit(t *testing.T, g *rig, app runner.App, id string, claimed bool) (start func()) {
	t.Helper()
	w := &store.Write{AppID: app.ID, DB: "jobs", ID: id, Rev: "1-" + id, Body: []byte(`{}`),
		Writer: store.Writer{User: "alice"}, Path: "http", Time: g.clk.Now(), Event: &store.EventSpec{NextAt: g.clk.Now()}}
	slot := g.r.Reserve(app, w)
	seq, err := g.st.Commit(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	if slot == nil || !claimed {
		slot.Cancel()
		g.r.Poke(app)
		return nil
	}
	return func() { slot.Start(app, w, nil, seq, g.clk.Now()) }
}

// commitQuietly writes id with an event and tells the runner nothing: the
// deliverer finds it at its next look.
func commitQuietly(t *testing.T, g *rig, id string) {
	t.Helper()
	w := &store.Write{AppID: g.h.app.ID, DB: "jobs", ID: id, Rev: "1-" + id, Body: []byte(`{}`),
		Writer: store.Writer{User: "alice"}, Path: "http", Time: g.clk.Now(), Event: &store.EventSpec{NextAt: g.clk.Now()}}
	if _, err := g.st.Commit(context.Background(), w); err != nil {
		t.Fatal(err)
	}
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
	commit := func(id string) (start func()) { return reserveCommit(t, g, g.h.app, id, true) }
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

// gate is an onChange whose run of each document tells started and then
// waits until the test lets that document go. A stubborn gate's runs do
// not stop when their context is cancelled, as a handler slow to stop.
type gate struct {
	started  chan string
	stubborn bool

	mu   sync.Mutex
	open map[string]chan struct{}
}

func (gt *gate) ch(id string) chan struct{} {
	gt.mu.Lock()
	defer gt.mu.Unlock()
	if gt.open == nil {
		gt.open = map[string]chan struct{}{}
	}
	if gt.open[id] == nil {
		gt.open[id] = make(chan struct{})
	}
	return gt.open[id]
}

func (gt *gate) let(id string) {
	ch := gt.ch(id)
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// letAll lets every document go, for a test that failed midway.
func (gt *gate) letAll() {
	gt.mu.Lock()
	ids := make([]string, 0, len(gt.open))
	for id := range gt.open {
		ids = append(ids, id)
	}
	gt.mu.Unlock()
	for _, id := range ids {
		gt.let(id)
	}
}

func (gt *gate) backend(concurrency int) *appcodetest.Backend {
	gt.started = make(chan string, 64)
	b := &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, _ appcode.HandlerContext) error {
		gt.started <- ev.DocID
		done := ctx.Done()
		if gt.stubborn {
			done = nil
		}
		select {
		case <-gt.ch(ev.DocID):
			return nil
		case <-done:
			return ctx.Err()
		}
	}}
	b.Cfg.OnChange.Concurrency = concurrency
	return b
}

// settlements records what each settlement was, and tells claimed how
// many events each claim took.
type settlements struct {
	store.Store
	claimed  chan int
	mu       sync.Mutex
	gaveBack []int64
	acked    []int64
}

func (s *settlements) ClaimEvents(ctx context.Context, c store.Claim) ([]store.Event, error) {
	evs, err := s.Store.ClaimEvents(ctx, c)
	if s.claimed != nil && len(evs) > 0 {
		s.claimed <- len(evs)
	}
	return evs, err
}

func (s *settlements) SettleEvent(ctx context.Context, appID, seq int64, st store.Settlement) error {
	s.mu.Lock()
	if st.Ack {
		s.acked = append(s.acked, seq)
	} else {
		s.gaveBack = append(s.gaveBack, seq)
	}
	s.mu.Unlock()
	return s.Store.SettleEvent(ctx, appID, seq, st)
}

// gatedRig is a rig whose onChange is a gate, over SQLite with its
// settlements and claims recorded.
func gatedRig(t *testing.T, concurrency int, stubborn bool) (*gate, *settlements, *rig) {
	gt := &gate{stubborn: stubborn}
	b := gt.backend(concurrency)
	var ss *settlements
	g := newRigOn(t, b, func(st store.Store) store.Store {
		ss = &settlements{Store: st, claimed: make(chan int, 64)}
		return ss
	})
	t.Cleanup(gt.letAll)
	return gt, ss, g
}

// TestWaitingRunsOutliveADeploy: events claimed for the code deployed
// while the runs of the code before are still stopping wait for those
// runs' slots, and run with the new code there: they are not given back
// to be claimed again.
func TestWaitingRunsOutliveADeploy(t *testing.T) {
	const concurrency = 10
	gt, ss, g := gatedRig(t, concurrency, true)
	for i := range concurrency {
		g.commit(fmt.Sprintf("old%d", i))
	}
	for range concurrency {
		receive(t, gt.started)
	}
	for claimed := 0; claimed < concurrency; {
		claimed += <-ss.claimed
	}
	// Committed with no wake-up, so the deploy's is the first look at
	// them: one claim for the waiting list, with every slot held by an
	// old run that does not stop.
	for i := range concurrency {
		commitQuietly(t, g, fmt.Sprintf("new%d", i))
	}
	g.r.Reload(g.h.deploy())
	for waiting := 0; waiting < concurrency; {
		select {
		case n := <-ss.claimed:
			waiting += n
		case <-time.After(time.Minute):
			t.Fatal("the new events were never claimed")
		}
	}
	for i := range concurrency {
		gt.let(fmt.Sprintf("old%d", i))
	}
	ran := map[string]bool{}
	for range concurrency {
		id := receive(t, gt.started)
		ran[id] = true
		gt.let(id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.clk.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ran) != concurrency || len(ss.gaveBack) != 0 || len(ss.acked) != 2*concurrency {
		t.Fatalf("new events run %v, %d given back, %d acked; want all %d run in the old runs' slots, none given back",
			ran, len(ss.gaveBack), len(ss.acked), concurrency)
	}
}

// TestCloseGivesBackWaitingEvents: Close stops the runs and gives back
// the events waiting for their slots, unrun; it returns once all that is
// done.
func TestCloseGivesBackWaitingEvents(t *testing.T) {
	gt := &gate{}
	b := gt.backend(4)
	var ss *settlements
	g := newRigOn(t, b, func(st store.Store) store.Store {
		ss = &settlements{Store: &claimlessStore{claimingStore{Store: st}}}
		return ss
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.clk.WaitIdle(ctx); err != nil {
		t.Fatal(err)
	}
	for i := range 6 {
		if start := reserveCommit(t, g, g.h.app, fmt.Sprintf("d%d", i), true); start != nil {
			start()
		} else {
			t.Fatalf("no room for commit %d of 6", i+1)
		}
	}
	for range 4 {
		receive(t, gt.started)
	}
	g.r.Close()
	select {
	case id := <-gt.started:
		t.Fatalf("%s ran after Close", id)
	default:
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.gaveBack) != 6 || len(ss.acked) != 0 {
		t.Fatalf("%d given back, %d acked at Close; want all 6 given back", len(ss.gaveBack), len(ss.acked))
	}
}

// TestSmallConcurrencyRefillsTheWaitingList: with concurrency under a
// batch, the waiting list never has room for one; once it has room for
// as many as the slots, the deliverer claims them while every slot is
// still taken, rather than waiting for a slot to free.
func TestSmallConcurrencyRefillsTheWaitingList(t *testing.T) {
	const concurrency = 4
	gt, ss, g := gatedRig(t, concurrency, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.clk.WaitIdle(ctx); err != nil { // the deliverer's first look is over
		t.Fatal(err)
	}
	for i := range 3 * concurrency {
		commitQuietly(t, g, fmt.Sprintf("d%02d", i))
	}
	g.r.Poke(g.h.app)
	if n := <-ss.claimed; n != 2*concurrency {
		t.Fatalf("the first claim took %d events; want %d, the slots and as many waiting", n, 2*concurrency)
	}
	for range concurrency {
		gt.let(receive(t, gt.started))
	}
	// Four runs ended and four waiting events took their slots: the list
	// has room for four, and every slot is taken.
	select {
	case n := <-ss.claimed:
		if n != concurrency {
			t.Fatalf("the refill took %d events, want %d", n, concurrency)
		}
	case <-time.After(time.Minute):
		t.Fatal("no claim while every slot was taken and the waiting list had room for as many")
	}
}
