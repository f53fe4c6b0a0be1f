package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/sqlite"
)

type deliveryEnv struct {
	e     *engine.Engine
	clk   *clock.Virtual
	owner engine.Actor
}

// deployGoApp creates alice and her app alice/app on e, deployed with
// the engine's Go backend.
func deployGoApp(t *testing.T, e *engine.Engine) {
	t.Helper()
	ctx := context.Background()
	tok, _ := e.Bootstrap(ctx, "")
	admin, _ := e.Authenticate(ctx, tok)
	e.AddUser(ctx, admin, "alice")
	e.CreateApp(ctx, admin, "alice/app", false)
	if _, err := e.Deploy(ctx, admin, "alice/app", "", "// go backend"); err != nil {
		t.Fatal(err)
	}
}

func newDeliveryEnv(t *testing.T, b *appcodetest.Backend) *deliveryEnv {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewVirtual(time.Date(2026, 9, 24, 12, 0, 0, 0, time.UTC))
	b.Cfg.OnChange.Concurrency = max(b.Cfg.OnChange.Concurrency, 1)
	b.Cfg.OnChange.MaxAttempts = max(b.Cfg.OnChange.MaxAttempts, 1)
	if b.Cfg.OnChange.Timeout == 0 {
		b.Cfg.OnChange.Timeout = appcode.DefaultRunTimeout
	}
	e := engine.New(st, engine.Options{Clock: clk, Code: appcodetest.Compiler{B: b}})
	deployGoApp(t, e)
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return &deliveryEnv{e: e, clk: clk, owner: engine.Actor{User: "alice"}}
}

func TestOnChangeSeesEveryCommitInOrder(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []appcode.ChangeEvent
	done := make(chan struct{}, 100)
	env := newDeliveryEnv(t, &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		mu.Lock()
		seen = append(seen, ev)
		mu.Unlock()
		done <- struct{}{}
		return nil
	}})
	ctx := context.Background()
	r1, err := env.e.Put(ctx, env.owner, "alice/app", "jobs", "j1", []byte(`{"status":"pending"}`), appcode.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.e.Put(ctx, env.owner, "alice/app", "jobs", "j1", []byte(`{"status":"running"}`), appcode.PutOptions{IfRev: r1.Rev})
	env.e.Delete(ctx, env.owner, "alice/app", "jobs", "j1", "")
	for range 3 {
		<-done
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 3 || seen[0].Seq != 1 || seen[1].Seq != 2 || seen[2].Seq != 3 {
		t.Fatalf("events: %+v", seen)
	}
	if seen[0].OldDoc != nil || seen[1].OldDoc == nil || !seen[2].Deleted {
		t.Fatalf("oldDoc/deleted wrong: %+v", seen)
	}
	var doc map[string]any
	json.Unmarshal(seen[1].Doc, &doc)
	if doc["status"] != "running" || doc["_rev"] == "" {
		t.Fatalf("doc: %s", seen[1].Doc)
	}
}

func TestFailedEventIsRedeliveredAfterBackoffThenDead(t *testing.T) {
	t.Parallel()
	attempts := make(chan appcode.ChangeEvent, 10)
	env := newDeliveryEnv(t, &appcodetest.Backend{
		Cfg: func() appcode.BackendConfig {
			var c appcode.BackendConfig
			c.OnChange.MaxAttempts = 3
			return c
		}(),
		OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
			attempts <- ev
			return errors.New("boom")
		}})
	ctx := context.Background()
	env.e.Put(ctx, env.owner, "alice/app", "jobs", "j1", []byte(`{"status":"pending"}`), appcode.PutOptions{})
	first := <-attempts
	second, waited := nextAttempt(t, env.clk, attempts)
	if second.Attempt != 2 || string(second.Doc) != string(first.Doc) || waited < 9*time.Second || waited > 40*time.Second {
		t.Fatalf("redelivery after %v: %+v vs %+v; want the same event after the first backoff (10 s ± 10%%), not before", waited, second, first)
	}
	third, waited := nextAttempt(t, env.clk, attempts)
	if third.Attempt != 3 || waited < 18*time.Second || waited > 60*time.Second {
		t.Fatalf("third after %v: %+v; want it after the second backoff (20 s ± 10%%), not before", waited, third)
	}
	// Parked as dead: listed, and replayable.
	var dead []engine.EventInfo
	for range 1000 {
		dead, _ = env.e.Events(ctx, engine.Actor{User: "alice"}, "alice/app", true, 0, 0)
		if len(dead) == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if len(dead) != 1 || dead[0].Attempts != 3 || dead[0].LastError != "boom" {
		t.Fatalf("dead: %+v", dead)
	}
	if err := env.e.ReplayEvent(ctx, engine.Actor{User: "alice"}, "alice/app", dead[0].Seq); err != nil {
		t.Fatal(err)
	}
	if again := <-attempts; again.Attempt != 1 || again.Seq != first.Seq {
		t.Fatalf("replay: %+v", again)
	}
}

// nextAttempt moves the virtual clock a second at a time until the next
// run arrives, and says how much virtual time that took. Stepping, not
// jumping to a timer: other timers (lease renewals) are armed too, and
// the retry's may be armed only after the failure is settled.
func nextAttempt(t *testing.T, clk *clock.Virtual, attempts <-chan appcode.ChangeEvent) (appcode.ChangeEvent, time.Duration) {
	t.Helper()
	start := clk.Now()
	for range 600 {
		select {
		case ev := <-attempts:
			return ev, clk.Now().Sub(start)
		case <-time.After(20 * time.Millisecond):
			clk.Advance(time.Second)
		}
	}
	t.Fatal("no new attempt within 10 virtual minutes")
	return appcode.ChangeEvent{}, 0
}

func waitTimer(t *testing.T, clk *clock.Virtual) {
	t.Helper()
	for range 5000 {
		if clk.Pending() > 0 {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatal("no timer was armed")
}

// claimCounter records each ClaimEvents call: the limit asked and the
// number of events it got.
type claimCounter struct {
	*sqlite.Store
	mu    sync.Mutex
	calls [][2]int
}

func (c *claimCounter) ClaimEvents(ctx context.Context, cl store.Claim) ([]store.Event, error) {
	evs, err := c.Store.ClaimEvents(ctx, cl)
	c.mu.Lock()
	c.calls = append(c.calls, [2]int{cl.Limit, len(evs)})
	c.mu.Unlock()
	return evs, err
}

// startWithWaiting starts an engine on st whose app alice/app, with b as
// its backend, has n events waiting in the outbox when delivery starts.
func startWithWaiting(t *testing.T, st store.Store, b *appcodetest.Backend, n int, o engine.Options) *engine.Engine {
	t.Helper()
	ctx := context.Background()
	o.Clock = clock.NewVirtual(time.Date(2026, 9, 24, 12, 0, 0, 0, time.UTC))
	o.Code = appcodetest.Compiler{B: b}
	e := engine.New(st, o)
	deployGoApp(t, e)
	for i := range n {
		if _, err := e.Put(ctx, engine.Actor{User: "alice"}, "alice/app", "jobs", fmt.Sprint("j", i), []byte(`{}`), appcode.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

// TestFreeSlotTakesTheNextEvent: with events of different documents
// waiting, each of the free slots runs one event at once, in seq order.
// The same claim takes as many more as there are slots, up to a batch,
// to wait on the node (runner/waiting.go), and one that got fewer than
// it asked for is not followed by another that would come back empty.
// When a run ends, its slot takes the next event at once, while the
// other runs go on.
func TestFreeSlotTakesTheNextEvent(t *testing.T) {
	t.Parallel()
	sq, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	st := &claimCounter{Store: sq}
	var mu sync.Mutex
	running := map[int64]bool{}
	most := 0
	release := map[int64]chan struct{}{}
	for seq := int64(1); seq <= 25; seq++ {
		release[seq] = make(chan struct{})
	}
	started := make(chan int64, 100)
	b := &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		mu.Lock()
		running[ev.Seq] = true
		most = max(most, len(running))
		mu.Unlock()
		started <- ev.Seq
		<-release[ev.Seq]
		mu.Lock()
		delete(running, ev.Seq)
		mu.Unlock()
		return nil
	}}
	b.Cfg.OnChange.Concurrency, b.Cfg.OnChange.MaxAttempts, b.Cfg.OnChange.Timeout = 5, 1, appcode.DefaultRunTimeout
	e := startWithWaiting(t, st, b, 25, engine.Options{PollEvery: time.Hour})
	var first []int64
	for range 5 {
		first = append(first, <-started)
	}
	slices.Sort(first)
	if !slices.Equal(first, []int64{1, 2, 3, 4, 5}) {
		t.Fatalf("first runs: %v, want seqs 1 to 5 at once", first)
	}
	st.mu.Lock()
	if len(st.calls) != 1 || st.calls[0] != [2]int{10, 10} {
		t.Errorf("claims (limit, got) = %v, want one claim of 10 that got 10: five to run, five to wait", st.calls)
	}
	st.mu.Unlock()
	// The third run ends: its slot takes seq 6; the others still run.
	close(release[3])
	if got := <-started; got != 6 {
		t.Fatalf("after seq 3 ended, seq %d started, want 6", got)
	}
	for seq := int64(1); seq <= 25; seq++ {
		if seq != 3 {
			close(release[seq])
		}
	}
	for range 19 {
		<-started
	}
	e.Close()
	mu.Lock()
	defer mu.Unlock()
	if most != 5 {
		t.Fatalf("at most %d runs at once, want 5 (concurrency)", most)
	}
}

// TestBatchEndWakesAStarvedDeliverer: with one slot and more events than
// one batch, the claim that finds the slot taken leaves the rest to the
// end of the batch, which wakes the deliverer. The poll is set to an hour,
// so without that wake-up the rest would wait.
func TestBatchEndWakesAStarvedDeliverer(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	seen := make(chan int64, 100)
	b := &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		seen <- ev.Seq
		return nil
	}}
	b.Cfg.OnChange.Concurrency, b.Cfg.OnChange.MaxAttempts, b.Cfg.OnChange.Timeout = 1, 1, appcode.DefaultRunTimeout
	startWithWaiting(t, st, b, 25, engine.Options{PollEvery: time.Hour})
	for want := int64(1); want <= 25; want++ {
		select {
		case got := <-seen:
			if got != want {
				t.Fatalf("delivered seq %d, want %d (one slot: commit order)", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("seq %d not delivered: the deliverer was not woken when the slot freed up", want)
		}
	}
}

// TestOnChangeActsAsTheAdmin: onChange reacting to the admin's write acts
// as the admin, so it may write where the admin may (an app without
// access.js lets the admin write), as it acts as any other writer.
func TestOnChangeActsAsTheAdmin(t *testing.T) {
	t.Parallel()
	res := make(chan error, 4)
	env := newDeliveryEnv(t, &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		if ev.DB == "in" {
			_, err := hc.Put(ctx, "out", ev.DocID, []byte(`{"seen":true}`), appcode.PutOptions{})
			res <- err
		}
		return nil
	}})
	admin := engine.Actor{User: engine.AdminUser, Admin: true}
	if _, err := env.e.Put(context.Background(), admin, "alice/app", "in", "a", []byte(`{}`), appcode.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil {
		t.Fatalf("onChange's write for the admin's write: %v", err)
	}
}

// TestLoopGuardCountsPerApp: the writes the loop guard holds back are
// counted for their own app, not for every app of the server.
func TestLoopGuardCountsPerApp(t *testing.T) {
	t.Parallel()
	env := newDeliveryEnv(t, &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		_, err := hc.Put(ctx, ev.DB, ev.DocID, []byte(`{"again":true}`), appcode.PutOptions{})
		return err
	}})
	ctx := context.Background()
	admin := engine.Actor{User: engine.AdminUser, Admin: true}
	if _, err := env.e.CreateApp(ctx, admin, "alice/other", false); err != nil {
		t.Fatal(err)
	}
	if _, err := env.e.Put(ctx, env.owner, "alice/app", "loop", "a", []byte(`{}`), appcode.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the loop guard to stop the chain", func() error {
		info, err := env.e.Schedule(ctx, env.owner, "alice/app")
		if err == nil && info.LoopStopped != 1 {
			err = fmt.Errorf("LoopStopped = %d", info.LoopStopped)
		}
		return err
	})
	if info, err := env.e.Schedule(ctx, env.owner, "alice/other"); err != nil || info.LoopStopped != 0 {
		t.Fatalf("another app's LoopStopped = %d, %v; want 0", info.LoopStopped, err)
	}
}
