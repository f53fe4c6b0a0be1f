package runner_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
	"github.com/handoff-run/handoff/internal/runner"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/sqlite"
)

// host is a Host with one app, its backend in Go, that keeps the app's
// log lines and the actors its handlers were given.
type host struct {
	app runner.App

	mu     sync.Mutex
	logs   []string
	acting []runner.Acting
}

func (h *host) App(_ context.Context, ref string) (runner.App, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ref != h.app.Ref {
		return runner.App{}, fmt.Errorf("no app %s", ref)
	}
	return h.app, nil
}

// deploy makes the next version of the app's code live.
func (h *host) deploy() runner.App {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.app.Version++
	return h.app
}

func (h *host) HandlerContext(_ runner.App, as runner.Acting) appcode.HandlerContext {
	h.mu.Lock()
	h.acting = append(h.acting, as)
	h.mu.Unlock()
	return nil // these handlers write nothing
}

func (h *host) Log(_ runner.App, source, level, message string, _ json.RawMessage) {
	h.mu.Lock()
	h.logs = append(h.logs, source+" "+level+": "+message)
	h.mu.Unlock()
}

// rig is a runner over a fresh SQLite store on a virtual clock, for one
// app whose backend is b.
type rig struct {
	t   *testing.T
	st  store.Store
	clk *clock.Virtual
	h   *host
	r   *runner.Runner
}

func newRig(t *testing.T, b *appcodetest.Backend) *rig { return newRigOn(t, b, nil) }

// newRigOn is newRig on the store that wrap makes of the SQLite store.
func newRigOn(t *testing.T, b *appcodetest.Backend, wrap func(store.Store) store.Store) *rig {
	t.Helper()
	ctx := context.Background()
	lite, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lite.Close() })
	var st store.Store = lite
	if wrap != nil {
		st = wrap(lite)
	}
	clk := clock.NewVirtual(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	if err := st.CreateUser(ctx, store.User{Name: "alice", Created: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	a, err := st.CreateApp(ctx, store.App{Owner: "alice", Name: "jobs", Created: clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	b.Cfg.OnChange.Concurrency = max(b.Cfg.OnChange.Concurrency, 4)
	b.Cfg.OnChange.MaxAttempts = max(b.Cfg.OnChange.MaxAttempts, 3)
	b.Cfg.OnChange.Timeout = time.Minute
	h := &host{app: runner.App{ID: a.ID, Ref: "alice/jobs", Owner: "alice", Version: 1, Backend: b.Code()}}
	r := runner.Start(ctx, runner.Options{Store: st, Clock: clk, Host: h, Node: "n1", PollEvery: time.Hour}, []runner.App{h.app})
	t.Cleanup(r.Close)
	return &rig{t: t, st: st, clk: clk, h: h, r: r}
}

// commit writes jobs/id with an onChange event, as the engine would, and
// tells the runner.
func (g *rig) commit(id string) int64 {
	g.t.Helper()
	w := &store.Write{AppID: g.h.app.ID, DB: "jobs", ID: id, Rev: "1-" + id, Body: []byte(`{}`),
		Writer: store.Writer{User: "alice"}, Path: "http", Time: g.clk.Now(), Event: &store.EventSpec{NextAt: g.clk.Now()}}
	seq, err := g.st.Commit(context.Background(), w)
	if err != nil {
		g.t.Fatal(err)
	}
	g.r.Poke(g.h.app)
	return seq
}

// advance moves the clock by d once the runner is idle: a run that has
// failed arms its backoff when it settles, which may come after the
// outbox shows the event.
func (g *rig) advance(d time.Duration) {
	g.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.clk.WaitIdle(ctx); err != nil {
		g.t.Fatalf("the runner never went idle: %v", err)
	}
	g.clk.Advance(d)
}

// outbox waits until the app's live events are want (by seq).
func (g *rig) outbox(want ...int64) {
	g.t.Helper()
	for range 2000 {
		evs, err := g.st.ListEvents(context.Background(), g.h.app.ID, false, 0, 100)
		if err != nil {
			g.t.Fatal(err)
		}
		if len(evs) == len(want) {
			ok := true
			for i := range evs {
				ok = ok && evs[i].Seq == want[i]
			}
			if ok {
				return
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.t.Fatalf("the outbox never came to hold seqs %v", want)
}

// TestRunnerDeliversAndSettles: the runner, given only a store, a clock
// and a host, runs onChange for each committed event as its revision's
// writer, acks what succeeds, and backs off from a failure on the clock.
func TestRunnerDeliversAndSettles(t *testing.T) {
	runs := make(chan appcode.ChangeEvent, 10)
	b := &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		runs <- ev
		if ev.DocID == "bad" && ev.Attempt == 1 {
			return errors.New("boom")
		}
		return nil
	}}
	g := newRig(t, b)
	s1 := g.commit("good")
	if ev := <-runs; ev.Seq != s1 || ev.Attempt != 1 || string(ev.Doc) != `{"_id":"good","_rev":"1-good"}` {
		t.Fatalf("first run: %+v (doc %s)", ev, ev.Doc)
	}
	g.outbox()
	s2 := g.commit("bad")
	if ev := <-runs; ev.Seq != s2 {
		t.Fatalf("second run: seq %d, want %d", ev.Seq, s2)
	}
	g.outbox(s2)
	// The retry falls due after the first backoff (10 s, ± 10%).
	g.advance(12 * time.Second)
	if ev := <-runs; ev.Seq != s2 || ev.Attempt != 2 {
		t.Fatalf("after the backoff: seq %d attempt %d, want seq %d attempt 2", ev.Seq, ev.Attempt, s2)
	}
	g.outbox()
	g.h.mu.Lock()
	defer g.h.mu.Unlock()
	if len(g.h.logs) != 1 || len(g.h.acting) != 3 {
		t.Fatalf("log %q and %d handler contexts; want one warning and three", g.h.logs, len(g.h.acting))
	}
	if a := g.h.acting[0]; a.Handler != appcode.OnChange || a.Writer.User != "alice" || a.Depth != 1 || a.Origin != s1 {
		t.Fatalf("onChange acted as %+v; want alice's revision's writer at depth 1, in the chain of seq %d", a, s1)
	}
}

// TestRunnerTicksOnTheClock: the scheduled handler runs once per
// interval on the clock, as the app's owner, and each tick is recorded.
func TestRunnerTicksOnTheClock(t *testing.T) {
	ticks := make(chan int64, 10)
	b := &appcodetest.Backend{Scheduled: func(ctx context.Context, ev appcode.TickEvent, hc appcode.HandlerContext) error {
		ticks <- ev.ScheduledTime
		return nil
	}}
	b.Cfg.Scheduled.Interval, b.Cfg.Scheduled.Timeout = 5*time.Second, time.Minute
	g := newRig(t, b)
	for range 2 {
		g.advance(5 * time.Second)
		at := <-ticks
		if at%5000 != 0 {
			t.Fatalf("tick planned at %d ms, not on the interval", at)
		}
	}
	for {
		last, err := g.st.LastTick(context.Background(), g.h.app.ID)
		if err != nil {
			t.Fatal(err)
		}
		if last != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	g.h.mu.Lock()
	defer g.h.mu.Unlock()
	if a := g.h.acting[0]; a.Handler != appcode.Scheduled || a.Writer.User != "alice" {
		t.Fatalf("scheduled acted as %+v; want the owner alice", a)
	}
}

// claimingStore says its commits claim their events (as PostgreSQL's
// do), so that writes reserve run slots, and counts settlements.
type claimingStore struct {
	store.Store
	settled atomic.Int64
}

func (s *claimingStore) Capabilities() store.Capabilities {
	c := s.Store.Capabilities()
	c.CommitClaims = true
	return c
}

func (s *claimingStore) SettleEvent(ctx context.Context, appID, seq int64, st store.Settlement) error {
	defer s.settled.Add(1)
	return s.Store.SettleEvent(ctx, appID, seq, st)
}

// TestRunnerStartsNothingAfterClose: a write that reserved a run slot can
// commit after Close began (a handler's ctx.db call still in flight, a
// request). Its event goes back to the outbox before Start returns, and
// no run or goroutine outlives Close.
func TestRunnerStartsNothingAfterClose(t *testing.T) {
	ran := make(chan struct{}, 1)
	b := &appcodetest.Backend{OnChange: func(context.Context, appcode.ChangeEvent, appcode.HandlerContext) error {
		ran <- struct{}{}
		return nil
	}}
	var cs *claimingStore
	g := newRigOn(t, b, func(st store.Store) store.Store { cs = &claimingStore{Store: st}; return cs })
	w := &store.Write{AppID: g.h.app.ID, DB: "jobs", ID: "late", Rev: "1-late", Body: []byte(`{}`),
		Writer: store.Writer{User: "alice"}, Path: "http", Time: g.clk.Now(), Event: &store.EventSpec{NextAt: g.clk.Now()}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := g.clk.WaitIdle(ctx); err != nil { // the deliverer has looked at the app
		t.Fatal(err)
	}
	slot := g.r.Reserve(g.h.app, w)
	if slot == nil {
		t.Fatal("no slot reserved for the write's event")
	}
	seq, err := g.st.Commit(context.Background(), w)
	if err != nil {
		t.Fatal(err)
	}
	g.r.Close()
	slot.Start(g.h.app, w, nil, seq, g.clk.Now())
	if n := cs.settled.Load(); n != 1 {
		t.Fatalf("%d settlements when Start returned after Close; want the event given back (1)", n)
	}
	select {
	case <-ran:
		t.Fatal("onChange ran after Close")
	default:
	}
	g.outbox(seq)
}
