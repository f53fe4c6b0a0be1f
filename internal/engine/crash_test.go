package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
	"github.com/handoff-run/handoff/store/sqlite"
)

// mortalStore is a store whose process can die: after die, nothing more
// reaches the database, as when the process is killed. Closing an engine
// on it then leaves the outbox as a crash mid-run would: the run started,
// nothing settled it.
type mortalStore struct {
	store.Store
	dead atomic.Bool
}

var errDead = errors.New("the process is dead")

func (m *mortalStore) StartEvent(ctx context.Context, appID, seq int64) error {
	if m.dead.Load() {
		return errDead
	}
	return m.Store.StartEvent(ctx, appID, seq)
}

func (m *mortalStore) SettleEvent(ctx context.Context, appID, seq int64, s store.Settlement) error {
	if m.dead.Load() {
		return errDead
	}
	return m.Store.SettleEvent(ctx, appID, seq, s)
}

// crashRig runs engines, one after another, on one SQLite directory and
// one virtual clock: a server that crashes and is started again.
type crashRig struct {
	t   *testing.T
	dir string
	clk *clock.Virtual
	b   *appcodetest.Backend
	e   *engine.Engine
	st  *mortalStore
}

func newCrashRig(t *testing.T, b *appcodetest.Backend) *crashRig {
	r := &crashRig{t: t, dir: t.TempDir(), clk: clock.NewVirtual(time.Date(2026, 9, 24, 12, 0, 0, 0, time.UTC)), b: b}
	b.Cfg.OnChange.Concurrency = max(b.Cfg.OnChange.Concurrency, 1)
	if b.Cfg.OnChange.Timeout == 0 {
		b.Cfg.OnChange.Timeout = appcode.DefaultRunTimeout
	}
	r.boot(true)
	t.Cleanup(func() {
		if r.e != nil {
			r.e.Close()
			r.st.Close()
		}
	})
	return r
}

// boot starts a server. The poll is an hour: every delivery here is on
// a wake-up or a timer of the virtual clock.
func (r *crashRig) boot(first bool) {
	r.t.Helper()
	st, err := sqlite.Open(r.dir)
	if err != nil {
		r.t.Fatal(err)
	}
	r.st = &mortalStore{Store: st}
	r.e = engine.New(r.st, engine.Options{Clock: r.clk, Code: appcodetest.Compiler{B: r.b}, PollEvery: time.Hour})
	if first {
		deployGoApp(r.t, r.e)
	}
	if err := r.e.Start(context.Background()); err != nil {
		r.t.Fatal(err)
	}
}

// crash kills the server mid-run: its runs stop, and nothing they or
// the engine do reaches the database any more.
func (r *crashRig) crash() {
	r.st.dead.Store(true)
	r.e.Close()
	r.st.Close()
	r.e, r.st = nil, nil
}

// event waits until the app's event seq is listed in the state cond
// wants, and returns it.
func (r *crashRig) event(seq int64, what string, cond func(engine.EventInfo) bool) engine.EventInfo {
	r.t.Helper()
	var got engine.EventInfo
	eventually(r.t, what, func() error {
		for _, dead := range []bool{false, true} {
			evs, err := r.e.Events(context.Background(), engine.Actor{User: "alice"}, "alice/app", dead, 0, 100)
			if err != nil {
				return err
			}
			for _, ev := range evs {
				if ev.Seq == seq {
					got = ev
					if cond(ev) {
						return nil
					}
					return errors.New("not yet")
				}
			}
		}
		return errors.New("event not listed")
	})
	return got
}

// recv waits for the next run.
func recv(t *testing.T, runs <-chan appcode.ChangeEvent) appcode.ChangeEvent {
	t.Helper()
	select {
	case ev := <-runs:
		return ev
	case <-time.After(15 * time.Second):
		t.Fatal("no onChange run")
		return appcode.ChangeEvent{}
	}
}

// TestPoisonEventBacksOffAcrossCrashes: an onChange run in flight when
// the server dies counts as a failed attempt. After each restart the
// event is not run at once: it waits out the backoff (10 s, then 20 s,
// with jitter) and is parked as dead after maxAttempts crashes, while
// the other events of the app are delivered as usual.
func TestPoisonEventBacksOffAcrossCrashes(t *testing.T) {
	t.Parallel()
	runs := make(chan appcode.ChangeEvent, 10)
	b := &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		runs <- ev
		if ev.DocID == "poison" {
			<-ctx.Done() // in flight until the server dies
			return ctx.Err()
		}
		return nil
	}}
	b.Cfg.OnChange.MaxAttempts = 3
	r := newCrashRig(t, b)
	ctx := context.Background()
	alice := engine.Actor{User: "alice"}
	res, err := r.e.Put(ctx, alice, "alice/app", "jobs", "poison", []byte(`{}`), appcode.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, runs); ev.Seq != res.Seq || ev.Attempt != 1 {
		t.Fatalf("first run: %+v", ev)
	}
	for attempt := 2; attempt <= 3; attempt++ {
		r.crash()
		restart := r.clk.Now()
		r.boot(false)
		ev := r.event(res.Seq, "the interrupted run settled as a failure", func(ev engine.EventInfo) bool {
			return ev.Attempts == attempt-1 && ev.NextAt.After(restart)
		})
		if !strings.Contains(ev.LastError, "the server stopped while this run was in flight") {
			t.Fatalf("interrupted run's error: %q", ev.LastError)
		}
		select {
		case got := <-runs:
			t.Fatalf("run %+v right after the restart", got)
		default:
		}
		first := 10 * time.Second << (attempt - 2)
		if wait := ev.NextAt.Sub(restart); wait < first*9/10 || wait > first*11/10 {
			t.Fatalf("after crash %d the event waits %v, want the backoff of %v ± 10%%", attempt-1, wait, first)
		}
		// Other events go out meanwhile.
		other, err := r.e.Put(ctx, alice, "alice/app", "jobs", "fine", []byte(`{}`), appcode.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := recv(t, runs); got.Seq != other.Seq {
			t.Fatalf("delivered %+v, want the new event %d", got, other.Seq)
		}
		waitTimer(t, r.clk)
		r.clk.Advance(ev.NextAt.Sub(r.clk.Now()))
		if got := recv(t, runs); got.Seq != res.Seq || got.Attempt != attempt {
			t.Fatalf("after the backoff: %+v, want seq %d attempt %d", got, res.Seq, attempt)
		}
	}
	r.crash()
	r.boot(false)
	ev := r.event(res.Seq, "the event parked as dead", func(ev engine.EventInfo) bool { return ev.Dead })
	if ev.Attempts != 3 || !strings.Contains(ev.LastError, "the server stopped") {
		t.Fatalf("dead event: %+v", ev)
	}
	select {
	case got := <-runs:
		t.Fatalf("run %+v of an event out of attempts", got)
	default:
	}
	other, err := r.e.Put(ctx, alice, "alice/app", "jobs", "after", []byte(`{}`), appcode.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := recv(t, runs); got.Seq != other.Seq {
		t.Fatalf("delivered %+v, want the new event %d", got, other.Seq)
	}
}

// TestStoppedRunCostsNoAttempt: a server that stops on purpose (Close)
// gives its runs back: after the restart the event runs at once, as the
// same attempt.
func TestStoppedRunCostsNoAttempt(t *testing.T) {
	t.Parallel()
	runs := make(chan appcode.ChangeEvent, 10)
	b := &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		runs <- ev
		<-ctx.Done()
		return ctx.Err()
	}}
	b.Cfg.OnChange.MaxAttempts = 1
	r := newCrashRig(t, b)
	res, err := r.e.Put(context.Background(), engine.Actor{User: "alice"}, "alice/app", "jobs", "j", []byte(`{}`), appcode.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	recv(t, runs)
	r.e.Close()
	r.st.Close()
	r.boot(false)
	if got := recv(t, runs); got.Seq != res.Seq || got.Attempt != 1 {
		t.Fatalf("after a clean stop: %+v, want seq %d attempt 1 at once", got, res.Seq)
	}
}

// startedBy is a mortal node's store that tells which events it started.
type startedBy struct {
	*mortalStore
	node    int
	started chan<- int
}

func (s startedBy) StartEvent(ctx context.Context, appID, seq int64) error {
	err := s.mortalStore.StartEvent(ctx, appID, seq)
	if err == nil {
		s.started <- s.node
	}
	return err
}

// A run may also begin with the claim (Claim.Start) or with the commit
// that claims its event (EventSpec.ClaimUntil).
func (s startedBy) ClaimEvents(ctx context.Context, c store.Claim) ([]store.Event, error) {
	evs, err := s.mortalStore.ClaimEvents(ctx, c)
	for _, ev := range evs {
		if ev.Started {
			s.started <- s.node
		}
	}
	return evs, err
}

func (s startedBy) Commit(ctx context.Context, w *store.Write) (int64, error) {
	seq, err := s.mortalStore.Commit(ctx, w)
	if err == nil && w.Event != nil && w.Event.Claimed {
		s.started <- s.node
	}
	return seq, err
}

// TestNodesCountTheRunOfADeadNode: on a shared database, when the node
// running an event dies, the node that takes the event over once the
// lease has run out counts that run as a failed attempt and backs off
// from there, instead of running the event at once.
func TestNodesCountTheRunOfADeadNode(t *testing.T) {
	t.Parallel()
	runs := make(chan appcode.ChangeEvent, 10)
	b := &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		runs <- ev
		if ev.Attempt == 1 {
			<-ctx.Done()
			return ctx.Err()
		}
		return nil
	}}
	b.Cfg.OnChange.Concurrency, b.Cfg.OnChange.MaxAttempts, b.Cfg.OnChange.Timeout = 4, 3, time.Minute
	started := make(chan int, 10)
	nodes := make([]*mortalStore, 2)
	es, clk := goNodes(t, 2, b, func(i int, st *postgres.Store) store.Store {
		nodes[i] = &mortalStore{Store: st}
		return startedBy{nodes[i], i, started}
	})
	res, err := es[0].Put(context.Background(), engine.Actor{User: "alice"}, "alice/app", "jobs", "j", []byte(`{}`), appcode.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ev := recv(t, runs); ev.Seq != res.Seq || ev.Attempt != 1 {
		t.Fatalf("first run: %+v", ev)
	}
	var died int
	select {
	case died = <-started:
	case <-time.After(15 * time.Second):
		t.Fatal("no node started the run")
	}
	nodes[died].dead.Store(true)
	es[died].Close()
	alive := es[1-died]

	// Past the lease, which the dead node no longer renews.
	leaseEnd := clk.Now().Add(time.Minute)
	clk.Advance(leaseEnd.Sub(clk.Now()))
	var ev engine.EventInfo
	eventually(t, "the surviving node to settle the interrupted run", func() error {
		evs, err := alive.Events(context.Background(), engine.Actor{User: "alice"}, "alice/app", false, 0, 10)
		if err != nil || len(evs) != 1 || evs[0].LastError == "" {
			return fmt.Errorf("events %+v, %v", evs, err)
		}
		ev = evs[0]
		return nil
	})
	if wait := ev.NextAt.Sub(leaseEnd); ev.Attempts != 1 || wait < 9*time.Second || wait > 11*time.Second {
		t.Fatalf("taken over: attempts %d, due %v after the lease; want 1 and the first backoff, 10 s ± 10%%", ev.Attempts, wait)
	}
	select {
	case got := <-runs:
		t.Fatalf("run %+v right after the lease", got)
	default:
	}
	clk.Advance(ev.NextAt.Sub(clk.Now()))
	if got := recv(t, runs); got.Seq != res.Seq || got.Attempt != 2 {
		t.Fatalf("after the backoff: %+v, want seq %d attempt 2", got, res.Seq)
	}
	if n := <-started; n == died {
		t.Fatal("the dead node ran the event")
	}
}
