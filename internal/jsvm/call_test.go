package jsvm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dop251/goja"
)

const accessModule = `export function jobs(doc, oldDoc, user, ctx) {
  if (!user) throw { forbidden: "sign in" }
  if (doc.kind === "string") throw "plain reason"
  if (doc.status !== "pending") throw { forbidden: "x" }
  return { channels: ["jobs"] }
}

export function broken(doc) {
  return doc.missing.field
}
`

func TestThrownObjectIsExportedToGo(t *testing.T) {
	p := newTestPool(t, "access.js", accessModule, Options{})
	_, err := callJSON(t, p, "jobs", `{"status":"pending"}`, "null", "null", "{}")
	var je *JSError
	if !errors.As(err, &je) {
		t.Fatalf("want *JSError, got %T %v", err, err)
	}
	m, ok := je.Value.(map[string]any)
	if !ok || m["forbidden"] != "sign in" {
		t.Fatalf("Value = %#v, want map with forbidden", je.Value)
	}
	if je.Line != 2 || je.Column != 13 || je.Export != "jobs" || je.Name != "" {
		t.Fatalf("position/name: %+v", je)
	}
	if want := `access.js:2:13: uncaught exception: {"forbidden":"sign in"} (in jobs)`; err.Error() != want {
		t.Fatalf("message:\n got %s\nwant %s", err, want)
	}
}

func TestThrownStringIsExportedToGo(t *testing.T) {
	p := newTestPool(t, "access.js", accessModule, Options{})
	_, err := callJSON(t, p, "jobs", `{"kind":"string"}`, "null", `{"id":"u"}`, "{}")
	var je *JSError
	if !errors.As(err, &je) || je.Value != "plain reason" || je.Line != 3 {
		t.Fatalf("got %#v", err)
	}
}

func TestTypeErrorPointsAtUserLine(t *testing.T) {
	// Blank lines and a comment ahead of the failing line make sure the
	// position comes through the source map, not from the CommonJS text.
	src := "// access rules\n\n\nexport function jobs(doc) {\n  const a = 1\n\n  return doc.missing.field\n}\n"
	p := newTestPool(t, "access.js", src, Options{})
	_, err := callJSON(t, p, "jobs", `{}`)
	var je *JSError
	if !errors.As(err, &je) {
		t.Fatalf("want *JSError, got %v", err)
	}
	if je.Name != "TypeError" || je.Line != 7 {
		t.Fatalf("got %+v", je)
	}
	if !strings.HasPrefix(err.Error(), "access.js:7:") || !strings.Contains(err.Error(), "TypeError") {
		t.Fatalf("message %q", err)
	}
	if !strings.Contains(je.Stack, "access.js:7:") {
		t.Fatalf("stack %q", je.Stack)
	}
}

func TestRejectionCarriesValueAndPosition(t *testing.T) {
	src := `export async function onChange(event) {
  await null
  if (event.kind === "object") throw { code: "conflict" }
  throw new Error("db is down")
}
`
	p := newTestPool(t, "backend.js", src, Options{})
	_, err := callJSON(t, p, "onChange", `{}`)
	var je *JSError
	if !errors.As(err, &je) || !je.Rejected || je.Name != "Error" || je.Message != "db is down" || je.Line != 4 {
		t.Fatalf("got %#v", err)
	}
	if want := "backend.js:4:"; !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("message %q", err)
	}

	_, err = callJSON(t, p, "onChange", `{"kind":"object"}`)
	if !errors.As(err, &je) || !je.Rejected {
		t.Fatalf("got %#v", err)
	}
	if m, _ := je.Value.(map[string]any); m["code"] != "conflict" {
		t.Fatalf("Value = %#v", je.Value)
	}
	if !strings.Contains(err.Error(), `promise rejected with {"code":"conflict"}`) {
		t.Fatalf("message %q", err)
	}
}

func TestMissingExport(t *testing.T) {
	p := newTestPool(t, "access.js", accessModule, Options{})
	_, err := callJSON(t, p, "nope")
	if !errors.Is(err, ErrNoExport) || !strings.Contains(err.Error(), `no export named "nope"`) {
		t.Fatalf("got %v", err)
	}
	p2 := newTestPool(t, "backend.js", `export const config = {}`, Options{})
	if _, err := callJSON(t, p2, "config"); err == nil || !strings.Contains(err.Error(), "not a function") {
		t.Fatalf("calling a non-function export: %v", err)
	}
}

func TestModuleLoadErrorsSurfaceAtNewPool(t *testing.T) {
	prog, err := Compile("backend.js", "const x = 1\nthrow new Error('bad config')\nexport const y = x\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewPool(prog, Options{Size: 1})
	var je *JSError
	if !errors.As(err, &je) || je.Line != 2 || je.Export != "" || !strings.Contains(err.Error(), "while loading the module") {
		t.Fatalf("got %#v", err)
	}

	prog, err = Compile("backend.js", "while (true) {}\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = NewPool(prog, Options{Size: 1, InitDeadline: 50 * time.Millisecond})
	if !errors.Is(err, ErrDeadline) || !strings.Contains(err.Error(), "loading the module exceeded its 50ms deadline") {
		t.Fatalf("got %v", err)
	}

	// A literal require is refused by Compile like an import; one that
	// esbuild cannot see fails when it runs.
	if _, err = Compile("backend.js", "const m = require('fs')\n"); err == nil || !strings.Contains(err.Error(), `backend.js:1:19: cannot import "fs"`) {
		t.Fatalf("literal require: %v", err)
	}
	prog, err = Compile("backend.js", "const name = 'fs'\nconst m = require(name)\n")
	if err != nil {
		t.Fatal(err)
	}
	if _, err = NewPool(prog, Options{Size: 1}); err == nil || !strings.Contains(err.Error(), "require(fs) is not available") {
		t.Fatalf("got %v", err)
	}
}

func TestClockAndRandomComeFromOptions(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	src := `export function now() { return [Date.now(), new Date().toISOString(), Math.random()] }`
	p := newTestPool(t, "backend.js", src, Options{Now: func() time.Time { return at }, Rand: func() float64 { return 0.25 }})
	got := mustJSON(t, p, "now")
	want := fmt.Sprintf(`[%d,"2030-01-02T03:04:05.000Z",0.25]`, at.UnixMilli())
	if got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func TestSetupInstallsGlobals(t *testing.T) {
	src := `export function greet(name) { return hostGreeting(name) }`
	p := newTestPool(t, "backend.js", src, Options{Setup: func(vm *VM) error {
		return vm.Set("hostGreeting", func(name string) string { return "hi " + name })
	}})
	if got := mustJSON(t, p, "greet", `"ann"`); got != `"hi ann"` {
		t.Fatalf("got %s", got)
	}
	failing := func(vm *VM) error { return errors.New("no secrets") }
	prog, _ := Compile("backend.js", src)
	if _, err := NewPool(prog, Options{Size: 1, Setup: failing}); err == nil || !strings.Contains(err.Error(), "no secrets") {
		t.Fatalf("Setup error not reported: %v", err)
	}
}

// hostDB is a fake ctx.db for async tests: get resolves on another
// goroutine after delay, like a real database call.
func hostDB(delay time.Duration) func(vm *VM) error {
	return func(vm *VM) error {
		return vm.Set("dbGet", func(id string) goja.Value {
			return vm.Async(func(ctx context.Context) (any, error) {
				select {
				case <-time.After(delay):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				if id == "missing" {
					return nil, errors.New("not_found: " + id)
				}
				return []byte(`{"_id":"` + id + `","n":1}`), nil
			})
		})
	}
}

func TestAsyncExportWaitsForHostWork(t *testing.T) {
	src := `export async function onChange(event) {
  const a = await dbGet("a")
  const [b, c] = await Promise.all([dbGet("b"), dbGet("c")])
  return [a._id, b._id, c._id].join(",")
}
export async function missing() {
  try { await dbGet("missing") } catch (e) { return "caught: " + e.message }
}
`
	p := newTestPool(t, "backend.js", src, Options{Setup: hostDB(2 * time.Millisecond)})
	// []byte results go through vm.ToValue: a Go slice, whose _id is
	// undefined. json.RawMessage would be parsed; see the next test.
	if got := mustJSON(t, p, "onChange", "{}"); got != `",,"` {
		t.Fatalf("got %s", got)
	}
	if got := mustJSON(t, p, "missing"); got != `"caught: not_found: missing"` {
		t.Fatalf("got %s", got)
	}
}

func TestAsyncRawJSONBecomesObjects(t *testing.T) {
	src := `export async function get() { const d = await load(); return { id: d._id, keys: Object.keys(d) } }`
	p := newTestPool(t, "backend.js", src, Options{Setup: func(vm *VM) error {
		return vm.Set("load", func() goja.Value {
			return vm.Async(func(context.Context) (any, error) {
				return jsonRaw(`{"_id":"x","z":1,"a":2}`), nil
			})
		})
	}})
	if got := mustJSON(t, p, "get"); got != `{"id":"x","keys":["_id","z","a"]}` {
		t.Fatalf("got %s", got)
	}
}

type codedError struct{ code string }

func (e codedError) Error() string { return e.code }
func (e codedError) JSValue(vm *VM) goja.Value {
	obj := vm.NewGoError(e)
	_ = obj.Set("code", e.code)
	return obj
}

func TestAsyncErrorsCanCarryJSShape(t *testing.T) {
	src := `export async function put() { try { await save() } catch (e) { return [e.code, e instanceof Error] } }`
	p := newTestPool(t, "backend.js", src, Options{Setup: func(vm *VM) error {
		return vm.Set("save", func() goja.Value {
			return vm.Async(func(context.Context) (any, error) { return nil, codedError{"conflict"} })
		})
	}})
	if got := mustJSON(t, p, "put"); got != `["conflict",true]` {
		t.Fatalf("got %s", got)
	}
}

func TestHoldResumesOnRuntimeGoroutine(t *testing.T) {
	// A host timer built on Hold, the way the engine can offer setTimeout.
	src := `export async function wait() {
  const order = []
  const p = sleep(5).then(() => order.push("slept"))
  order.push("scheduled")
  await p
  return order
}`
	p := newTestPool(t, "backend.js", src, Options{Setup: func(vm *VM) error {
		return vm.Set("sleep", func(ms int) goja.Value {
			promise, resolve, _ := vm.NewPromise()
			resume := vm.Hold()
			time.AfterFunc(time.Duration(ms)*time.Millisecond, func() {
				resume(func(vm *VM) error { return resolve(ms) })
			})
			return vm.ToValue(promise)
		})
	}})
	if got := mustJSON(t, p, "wait"); got != `["scheduled","slept"]` {
		t.Fatalf("got %s", got)
	}
}

func TestPromiseThatCanNeverSettle(t *testing.T) {
	src := `export async function stuck() { await new Promise(() => {}) }`
	p := newTestPool(t, "backend.js", src, Options{})
	start := time.Now()
	err := p.Do(context.Background(), Call{Export: "stuck", Deadline: time.Hour})
	if !errors.Is(err, ErrNeverSettles) || !strings.Contains(err.Error(), "can never settle") {
		t.Fatalf("got %v", err)
	}
	if time.Since(start) > 10*time.Second {
		t.Fatal("should fail at once, not wait for the deadline")
	}
}

func TestDeadlineWhileAwaitingHost(t *testing.T) {
	src := `export async function onChange() { await dbGet("slow"); return "late" }`
	p := newTestPool(t, "backend.js", src, Options{Size: 1, Setup: hostDB(time.Hour)})
	err := p.Do(context.Background(), Call{Export: "onChange", Deadline: 30 * time.Millisecond})
	if !errors.Is(err, ErrDeadline) || !strings.Contains(err.Error(), "onChange exceeded its 30ms deadline") {
		t.Fatalf("got %v", err)
	}
	// The runtime was replaced; the next call runs (and times out) the
	// same way rather than inheriting the first call's state.
	if err := callWithin(p, "onChange", 30*time.Millisecond); !errors.Is(err, ErrDeadline) {
		t.Fatalf("second call: %v", err)
	}
}

func TestPerCallDeadlineOverride(t *testing.T) {
	src := `export async function onChange() { await dbGet("x"); return "done" }`
	// The pool default (20ms, moved on by at most as much again for
	// stalls) is far shorter than the host work (300ms), also on a loaded
	// machine whose timers fire late; the call's own deadline lets it
	// finish.
	p := newTestPool(t, "backend.js", src, Options{Deadline: 20 * time.Millisecond, Setup: hostDB(300 * time.Millisecond)})
	if _, err := callJSON(t, p, "onChange"); !errors.Is(err, ErrDeadline) {
		t.Fatalf("default deadline: %v", err)
	}
	var got string
	err := p.Do(context.Background(), Call{Export: "onChange", Deadline: 5 * time.Second,
		Result: func(vm *VM, v goja.Value) error { got = v.String(); return nil }})
	if err != nil || got != "done" {
		t.Fatalf("override: %v %q", err, got)
	}
}

func TestVirtualDeadlineViaAfterFunc(t *testing.T) {
	// A fake clock: deadlines fire only when the test says so.
	var mu sync.Mutex
	var fire []func()
	af := func(d time.Duration, f func()) func() bool {
		mu.Lock()
		defer mu.Unlock()
		i := len(fire)
		fire = append(fire, f)
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			ok := fire[i] != nil
			fire[i] = nil
			return ok
		}
	}
	src := `export async function onChange() { await dbGet("x") }`
	p := newTestPool(t, "backend.js", src, Options{Size: 1, AfterFunc: af, Setup: hostDB(time.Hour)})
	done := make(chan error, 1)
	go func() { done <- p.Do(context.Background(), Call{Export: "onChange", Deadline: 15 * time.Minute}) }()
	// Advance the fake clock past 15 minutes: fire the call's timer.
	for {
		mu.Lock()
		var f func()
		if n := len(fire); n > 0 {
			f = fire[n-1]
		}
		mu.Unlock()
		if f != nil {
			f()
			break
		}
		time.Sleep(time.Millisecond)
	}
	if err := <-done; !errors.Is(err, ErrDeadline) || !strings.Contains(err.Error(), "15m0s deadline") {
		t.Fatalf("got %v", err)
	}
}

func TestContextCancellation(t *testing.T) {
	src := `export async function onChange() { await dbGet("x") }
export function spin() { while (true) {} }`
	p := newTestPool(t, "backend.js", src, Options{Size: 1, Setup: hostDB(time.Hour)})
	for _, export := range []string{"onChange", "spin"} {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(20*time.Millisecond, cancel)
		err := p.Do(ctx, Call{Export: export, Deadline: time.Hour})
		var ce *CancelError
		if !errors.As(err, &ce) || !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: got %v", export, err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Do(ctx, Call{Export: "spin"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("pre-cancelled: %v", err)
	}
}

func TestLateResumeIsDropped(t *testing.T) {
	// The first call ends (deadline) while its host work is still out;
	// when that work finishes, its callback must not run in the runtime
	// that is now serving someone else.
	var resumes []func(func(*VM) error)
	var mu sync.Mutex
	var ran int
	src := `export async function hold() { await park() }
export function plain(x) { return x * 2 }`
	p := newTestPool(t, "backend.js", src, Options{Size: 1, Setup: func(vm *VM) error {
		return vm.Set("park", func() goja.Value {
			promise, _, _ := vm.NewPromise()
			mu.Lock()
			resumes = append(resumes, vm.Hold())
			mu.Unlock()
			return vm.ToValue(promise)
		})
	}})
	err := p.Do(context.Background(), Call{Export: "hold", Deadline: 10 * time.Millisecond})
	if !errors.Is(err, ErrDeadline) {
		t.Fatalf("got %v", err)
	}
	mu.Lock()
	for _, r := range resumes {
		r(func(*VM) error { ran++; return nil })
	}
	mu.Unlock()
	if got := mustJSON(t, p, "plain", "21"); got != "42" {
		t.Fatalf("got %s", got)
	}
	if ran != 0 {
		t.Fatal("a late resume ran")
	}
}

func TestArgsAndResultErrorsPassThrough(t *testing.T) {
	p := newTestPool(t, "access.js", accessModule, Options{})
	boom := errors.New("boom")
	err := p.Call(context.Background(), "jobs", func(*VM) ([]goja.Value, error) { return nil, boom }, nil)
	if !errors.Is(err, boom) {
		t.Fatalf("args: %v", err)
	}
	err = p.Call(context.Background(), "jobs", jsonArgs(`{"status":"pending"}`, "null", `{"id":"u"}`, "{}"),
		func(*VM, goja.Value) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("result: %v", err)
	}
	// Invalid JSON from the caller is the caller's error, not a JSError.
	_, err = callJSON(t, p, "jobs", `{bad`)
	var je *JSError
	if err == nil || errors.As(err, &je) || !strings.Contains(err.Error(), "invalid JSON") {
		t.Fatalf("bad JSON: %v", err)
	}
}

// TestGoPanicFailsTheCallAndPoolRecovers: a panic that a call reaches (a
// bug of goja's, or of a host function) fails that call with a
// *PanicError, and the runtime is replaced: no app's code may end the
// server.
func TestGoPanicFailsTheCallAndPoolRecovers(t *testing.T) {
	src := `export function f() { return hostPanic() }
export function g() { return 7 }
export function rx() { try { return new RegExp("(?<x>a)|(?<x>b)", "g").test("b") } catch (e) { return e.name } }`
	p := newTestPool(t, "backend.js", src, Options{Size: 1, Setup: func(vm *VM) error {
		return vm.Set("hostPanic", func() { var m map[string]int; m["x"] = 1 })
	}})
	_, err := callJSON(t, p, "f")
	var pe *PanicError
	if !errors.As(err, &pe) || !strings.Contains(pe.Stack, "hostPanic") && !strings.Contains(pe.Value, "nil map") {
		t.Fatalf("f: %v; want a PanicError", err)
	}
	if got := mustJSON(t, p, "g"); got != "7" {
		t.Fatalf("pool after panic: %s", got)
	}
	// goja panics on a pattern that names a group twice; Node 20 throws
	// a SyntaxError.
	if got := mustJSON(t, p, "rx"); got != `"SyntaxError"` {
		t.Fatalf("rx: %s", got)
	}
}

func jsonRaw(s string) any { return jsonRawMessage(s) }
