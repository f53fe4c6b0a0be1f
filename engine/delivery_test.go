package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/engine"
	"github.com/handoff-run/handoff/store/sqlite"
)

// goBackend is a backend.js stand-in written in Go, so the delivery
// machinery is tested without the JavaScript VM.
type goBackend struct {
	cfg       engine.BackendConfig
	onChange  func(ctx context.Context, ev engine.ChangeEvent, hc engine.HandlerContext) error
	scheduled func(ctx context.Context, ev engine.TickEvent, hc engine.HandlerContext) error
	fetch     func(ctx context.Context, req engine.FetchRequest, hc engine.HandlerContext) (engine.FetchResponse, error)
}

func (b *goBackend) Config() engine.BackendConfig { return b.cfg }
func (b *goBackend) Has(h string) bool {
	return h == "onChange" && b.onChange != nil || h == "scheduled" && b.scheduled != nil || h == "fetch" && b.fetch != nil
}
func (b *goBackend) OnChange(ctx context.Context, ev engine.ChangeEvent, hc engine.HandlerContext) error {
	return b.onChange(ctx, ev, hc)
}
func (b *goBackend) Scheduled(ctx context.Context, ev engine.TickEvent, hc engine.HandlerContext) error {
	return b.scheduled(ctx, ev, hc)
}
func (b *goBackend) Fetch(ctx context.Context, req engine.FetchRequest, hc engine.HandlerContext) (engine.FetchResponse, error) {
	if b.fetch == nil {
		return engine.FetchResponse{}, errors.New("no fetch handler")
	}
	return b.fetch(ctx, req, hc)
}
func (b *goBackend) Close() {}

type goCompiler struct{ b *goBackend }

func (c goCompiler) CompileBackend(string, string) (engine.Backend, error) { return c.b, nil }

type nopRuntime struct{}

func (nopRuntime) CompileAccess(string, string) (engine.AccessFunc, error) {
	return nil, errors.New("no access.js in these tests")
}
func (nopRuntime) CheckBackend(string, string) error { return nil }

type deliveryEnv struct {
	e     *engine.Engine
	clk   *clock.Virtual
	owner engine.Actor
}

func newDeliveryEnv(t *testing.T, b *goBackend) *deliveryEnv {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewVirtual(time.Date(2026, 9, 24, 12, 0, 0, 0, time.UTC))
	b.cfg.OnChange.Concurrency = max(b.cfg.OnChange.Concurrency, 1)
	b.cfg.OnChange.MaxAttempts = max(b.cfg.OnChange.MaxAttempts, 1)
	if b.cfg.OnChange.Timeout == 0 {
		b.cfg.OnChange.Timeout = engine.DefaultRunTimeout
	}
	e := engine.New(st, engine.Options{Clock: clk, Runtime: nopRuntime{}, Backends: goCompiler{b}})
	tok, _ := e.Bootstrap(ctx, "")
	admin, _ := e.Authenticate(ctx, tok)
	e.AddUser(ctx, admin, "alice")
	e.CreateApp(ctx, admin, "alice/app", false)
	if _, err := e.Deploy(ctx, admin, "alice/app", "", "// go backend"); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return &deliveryEnv{e: e, clk: clk, owner: engine.Actor{User: "alice"}}
}

func TestOnChangeSeesEveryCommitInOrder(t *testing.T) {
	var mu sync.Mutex
	var seen []engine.ChangeEvent
	done := make(chan struct{}, 100)
	env := newDeliveryEnv(t, &goBackend{onChange: func(ctx context.Context, ev engine.ChangeEvent, hc engine.HandlerContext) error {
		mu.Lock()
		seen = append(seen, ev)
		mu.Unlock()
		done <- struct{}{}
		return nil
	}})
	ctx := context.Background()
	r1, err := env.e.Put(ctx, env.owner, "alice/app", "jobs", "j1", []byte(`{"status":"pending"}`), engine.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env.e.Put(ctx, env.owner, "alice/app", "jobs", "j1", []byte(`{"status":"running"}`), engine.PutOptions{IfRev: r1.Rev})
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
	attempts := make(chan engine.ChangeEvent, 10)
	env := newDeliveryEnv(t, &goBackend{
		cfg: func() engine.BackendConfig {
			var c engine.BackendConfig
			c.OnChange.MaxAttempts = 3
			return c
		}(),
		onChange: func(ctx context.Context, ev engine.ChangeEvent, hc engine.HandlerContext) error {
			attempts <- ev
			return errors.New("boom")
		}})
	ctx := context.Background()
	env.e.Put(ctx, env.owner, "alice/app", "jobs", "j1", []byte(`{"status":"pending"}`), engine.PutOptions{})
	first := <-attempts
	t0 := env.clk.Now()
	waitTimer(t, env.clk)
	env.clk.Advance(12 * time.Second)
	second := <-attempts
	if second.Attempt != 2 || string(second.Doc) != string(first.Doc) {
		t.Fatalf("redelivery: %+v vs %+v", second, first)
	}
	_ = t0
	waitTimer(t, env.clk)
	env.clk.Advance(25 * time.Second)
	third := <-attempts
	if third.Attempt != 3 {
		t.Fatalf("third: %+v", third)
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
