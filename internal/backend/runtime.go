package backend

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// Each runtime gets one ctx object, one console and one pair of timer
// functions, made when the runtime is. They hold no per-call data: they
// read the runtime's current call from Go, which user code cannot reach.
// So a handler cannot forge its HandlerContext, a ctx kept from one event
// acts for the event that is running, and a call costs no object building
// beyond its event.

// runtime is the Go-side state of one pooled runtime.
type runtime struct {
	b  *Backend
	vm *jsvm.VM

	// cur is the call the runtime is serving, nil between calls. It is
	// set and cleared by the goroutine that holds the runtime, and read by
	// host functions on that same goroutine; it is atomic because the
	// clear after a failed call happens once the runtime may already be
	// serving the next one (see handlers.go).
	cur atomic.Pointer[call]

	ctx       *goja.Object // the handler's ctx, frozen
	errorCtor goja.Value   // the original Error, whatever user code does to the global
	freeze    goja.Callable

	nextTimer int64        // last setTimeout id; runtime goroutine only
	app       *goja.Object // frozen {owner, name} of appKey
	appKey    [2]string
}

// call is one handler invocation.
type call struct {
	hc      appcode.HandlerContext
	handler appcode.Handler
	db      string // database ctx.db defaults to; "" when it must be named

	mu     sync.Mutex
	timers map[int64]*timer // armed setTimeouts, by id
	ended  bool
}

// group is the app the call runs for, which the JS gate shares cores by.
func (c *call) group() string {
	owner, name := c.hc.App()
	return owner + "/" + name
}

// heapLimit is the app's own memory limit for the call, 0 for the default.
func (c *call) heapLimit() int64 {
	if l, ok := c.hc.(appcode.HeapLimiter); ok {
		return l.HeapLimit()
	}
	return 0
}

// stateKey is the jsvm.VM.Memo key of a runtime's *runtime.
type stateKey struct{}

// setup installs handoff's globals in a new runtime, then the host's.
func (b *Backend) setup(vm *jsvm.VM) error {
	rt := &runtime{b: b, vm: vm}
	rt.errorCtor = vm.Get("Error")
	var ok bool
	if rt.freeze, ok = goja.AssertFunction(vm.Get("Object").ToObject(vm.Runtime).Get("freeze")); !ok {
		return errors.New("backend: Object.freeze is missing")
	}
	if _, err := vm.Memo(stateKey{}, func(vm *jsvm.VM) (goja.Value, error) { return vm.ToValue(rt), nil }); err != nil {
		return err
	}
	var err error
	if rt.ctx, err = rt.newCtx(); err != nil {
		return err
	}
	if err := rt.installConsole(); err != nil {
		return err
	}
	if err := rt.installTimers(); err != nil {
		return err
	}
	// URL, structuredClone, crypto, ... on the timers, under fetch.
	if err := jsvm.InstallWeb(vm, jsvm.WebOptions{Timers: true}); err != nil {
		return err
	}
	if err := rt.installWeb(); err != nil { // web.go: fetch, Response, TextEncoder, ...
		return err
	}
	if b.c.o.Setup != nil {
		return b.c.o.Setup(vm)
	}
	return nil
}

// stateOf returns the runtime state that setup made for vm.
func stateOf(vm *jsvm.VM) (*runtime, error) {
	v, err := vm.Memo(stateKey{}, func(*jsvm.VM) (goja.Value, error) {
		return nil, errors.New("backend: runtime was not set up by this package")
	})
	if err != nil {
		return nil, err
	}
	return v.Export().(*runtime), nil
}

// frozen freezes o, so user code cannot change what the next call sees.
func (rt *runtime) frozen(o *goja.Object) (*goja.Object, error) {
	_, err := rt.freeze(goja.Undefined(), o)
	return o, err
}

// afterFunc arms a timer on the server clock.
func (rt *runtime) afterFunc(d time.Duration, f func()) (stop func() bool) {
	if af := rt.b.c.o.AfterFunc; af != nil {
		return af(d, f)
	}
	return time.AfterFunc(d, f).Stop
}
