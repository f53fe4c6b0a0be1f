package jsvm

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"
)

// VM is one pooled goja runtime with the user's module loaded. It embeds
// the *goja.Runtime, so callbacks build values with vm.NewObject,
// vm.ToValue and friends. A VM runs one call at a time on the goroutine
// that borrowed it; only Hold's resume function and the budget machinery
// touch it from elsewhere, and they go through mu.
type VM struct {
	*goja.Runtime

	prog      *Program
	opts      *Options
	lastUsed  int64 // mono() when it was last given back to its pool
	retired   bool
	exports   *goja.Object             // module.exports after the module ran
	fns       map[string]goja.Callable // exported functions, looked up once
	jsonParse goja.Callable
	alloc     *allocGuard   // the builtins' size checks; nil with no heap limit
	toJSONFn  goja.Callable // toJSONNative, for ToJSON (jsonglobal.go)
	jsonOut   []byte        // the text toJSONNative made
	builtins  jsonBuiltins
	regex     regexOriginals        // regexguard.go
	joinDepth int                   // nesting of Array.prototype.join (nativeguard.go)
	memo      map[any]goja.Value    // see Memo
	keys      map[string]string     // JSON object keys seen before (jsonparse.go)
	strs      map[string]goja.Value // short JSON strings seen before
	web       webOriginals          // web.go

	// Shared with timers, the heap watchdog and host goroutines (budget.go,
	// loop.go). mu orders every stop against begin and end, so a stop
	// aimed at one call can never land on the next.
	mu  sync.Mutex
	gen uint64 // call generation, bumped by begin
	*signals
	// stallMark and grace move a real-time deadline past runtime-wide
	// freezes (stall.go); the timer's goroutine reads and writes them.
	stallMark atomic.Int64
	grace     atomic.Int64
	cause     stopCause         // why the running call was stopped, if it was
	queue     []func(*VM) error // resumed host callbacks, to run on the VM
	pending   int               // Holds not yet resumed and run
	wake      chan struct{}     // capacity 1: "look at the queue or the cause"
	parked    bool              // waiting on the host with Options.Busy told (loop.go)

	// Touched only on the goroutine that holds the VM.
	group   string      // the call's Call.Group
	holding bool        // the call holds a slot of opts.Gate
	timer   *time.Timer // reused deadline timer (no per-call allocation)
	stopAF  func() bool // disarms an Options.AfterFunc deadline
	stopCtx func() bool // disarms the context watcher
	broken  bool        // never reuse: interrupted, overflowed or panicked
	// callLimit is the running call's own heap limit (Call.HeapLimit), 0
	// for the pool's; the heap watchdog reads it at its ticks.
	callLimit atomic.Int64
	ctx       context.Context
	callCtx   context.Context // lazily derived from ctx; cancelled when the call ends
	cancelCtx context.CancelFunc
}

// signals are the VM's state that the heap watchdog reads at every tick.
// They live apart from the VM so the watchdog can hold them strongly and
// read them without reaching the VM through its weak pointer, which costs
// more than the loads themselves, for every runtime at every tick.
type signals struct {
	active  atomic.Uint64 // gen of the running call, 0 when idle
	waiting atomic.Bool   // parked in the event loop, not running JS
	halted  atomic.Bool   // the running call was stopped; native loops look
	// bigAllocs counts large allocations by guarded builtins (allocguard.go),
	// which tells the heap watchdog which call is allocating.
	bigAllocs atomic.Uint64
}

// newVM makes a runtime, installs the guards and the host's globals, and
// evaluates the module once, so a call only has to invoke a function.
func newVM(prog *Program, opts *Options) (*VM, error) {
	rt := goja.New()
	vm := &VM{
		Runtime: rt,
		prog:    prog,
		opts:    opts,
		fns:     make(map[string]goja.Callable),
		wake:    make(chan struct{}, 1),
		signals: &signals{},
	}
	rt.SetMaxCallStackSize(opts.MaxCallStack)
	rt.SetTimeSource(goja.Now(opts.Now))
	if opts.Rand != nil {
		rt.SetRandSource(goja.RandSource(opts.Rand))
	}
	vm.timer = time.AfterFunc(time.Hour, vm.onDeadline)
	vm.timer.Stop()

	json := rt.Get("JSON").ToObject(rt)
	vm.jsonParse, _ = goja.AssertFunction(json.Get("parse"))
	if err := installJSON(vm); err != nil {
		return nil, err
	}
	if err := installRefusals(vm); err != nil {
		return nil, fmt.Errorf("jsvm: taking away refused builtins: %w", err)
	}
	if opts.HeapLimit > 0 {
		vm.alloc = &allocGuard{vm: vm}
	}
	if err := installNativeGuards(vm); err != nil {
		return nil, fmt.Errorf("jsvm: installing native guards: %w", err)
	}

	if opts.HeapLimit > 0 {
		if err := installAllocGuards(vm); err != nil {
			return nil, fmt.Errorf("jsvm: installing allocation guards: %w", err)
		}
	}
	if opts.Setup != nil {
		if err := opts.Setup(vm); err != nil {
			return nil, fmt.Errorf("jsvm: setting up runtime for %s: %w", prog.filename, err)
		}
	}
	if opts.HeapLimit > 0 {
		watchdog.add(vm)
	}
	runtimesLive.Add(1)
	vm.lastUsed = mono()
	if err := vm.safeLoad(); err != nil {
		vm.retire()
		return nil, err
	}
	return vm, nil
}

// safeLoad is load, with a panic of the runtime's turned into an error:
// a module whose loading reaches a bug of goja's fails its deploy (or its
// runtime's creation) with the file's name; it never takes the server.
func (vm *VM) safeLoad() (err error) {
	defer func() {
		if r := recover(); r != nil {
			vm.broken = true
			err = &CompileError{File: vm.prog.filename, Message: fmt.Sprintf(
				"the JavaScript runtime failed while loading this module (%v); rewrite the code its top level runs, or report it", r)}
		}
	}()
	return vm.load()
}

// load runs the wrapped CommonJS module with a fresh exports object.
func (vm *VM) load() error {
	return vm.run(context.Background(), "", vm.opts.InitDeadline, func() error {
		wrapper, err := vm.RunProgram(vm.prog.prog)
		if err != nil {
			return err
		}
		fn, ok := goja.AssertFunction(wrapper)
		if !ok {
			return fmt.Errorf("jsvm: %s: compiled module is not a function", vm.prog.filename)
		}
		module := vm.NewObject()
		exports := vm.NewObject()
		if err := module.Set("exports", exports); err != nil {
			return err
		}
		if _, err := fn(goja.Undefined(), exports, vm.ToValue(vm.require), module); err != nil {
			return err
		}
		obj, ok := module.Get("exports").(*goja.Object)
		if !ok {
			return fmt.Errorf("%s: module.exports must be an object", vm.prog.filename)
		}
		vm.exports = obj
		return nil
	})
}

// require exists only to fail clearly: Compile already refuses imports, so
// this is reached only by a hand-written require() call.
func (vm *VM) require(call goja.FunctionCall) goja.Value {
	panic(vm.NewGoError(fmt.Errorf("require(%s) is not available: a deployed module runs on its own, so inline the code you need", call.Argument(0))))
}

// function returns the exported function name. Exports are looked up once
// per runtime: esbuild's CommonJS exports are getters, and calling a getter
// on every call would cost as much as a small access function. Reassigning
// an exported function after load is therefore not seen (nobody does it).
func (vm *VM) function(name string) (goja.Callable, error) {
	if fn, ok := vm.fns[name]; ok {
		return fn, nil
	}
	v := vm.exports.Get(name)
	if v == nil || goja.IsUndefined(v) {
		return nil, noExportError(vm.prog.filename, name)
	}
	fn, ok := goja.AssertFunction(v)
	if !ok {
		return nil, fmt.Errorf("%s: export %q is a %s, not a function; export a function to handle this", vm.prog.filename, name, TypeOf(v))
	}
	vm.fns[name] = fn
	return fn, nil
}

// export returns the current value of a non-function export (config).
func (vm *VM) export(name string) (goja.Value, error) {
	v := vm.exports.Get(name)
	if v == nil {
		return nil, noExportError(vm.prog.filename, name)
	}
	return v, nil
}

// Program is the module this runtime runs.
func (vm *VM) Program() *Program { return vm.prog }

// Context is the context of the running call. It is cancelled when the
// call ends, whatever ended it, so host work started for the call (vm.Async)
// stops with it. Outside a call it is context.Background().
func (vm *VM) Context() context.Context {
	if vm.ctx == nil {
		return context.Background()
	}
	if vm.callCtx == nil {
		vm.callCtx, vm.cancelCtx = context.WithCancel(vm.ctx)
	}
	return vm.callCtx
}

// retire unhooks a VM that will never run again.
func (vm *VM) retire() {
	if !vm.retired {
		vm.retired = true
		runtimesLive.Add(-1)
	}
	vm.broken = true
	vm.timer.Stop()
	watchdog.remove(vm)
}

// TypeOf is JavaScript's typeof of v, for messages that name a value's kind.
func TypeOf(v goja.Value) string {
	switch {
	case v == nil || goja.IsUndefined(v):
		return "undefined"
	case goja.IsNull(v):
		return "null"
	}
	if _, ok := v.(*goja.Object); ok {
		return "object"
	}
	switch v.ExportType().Kind() {
	case reflect.Int64, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	}
	return "value"
}

// Memo returns the value build made the first time this runtime was asked
// for key, making it now if needed. It lets hot paths reuse argument
// objects (a ctx with its methods, say) instead of rebuilding them on
// every call; such objects should read per-call state from Go rather than
// hold it, since user code sees the same object on every call.
func (vm *VM) Memo(key any, build func(vm *VM) (goja.Value, error)) (goja.Value, error) {
	if v, ok := vm.memo[key]; ok {
		return v, nil
	}
	v, err := build(vm)
	if err != nil {
		return nil, err
	}
	if vm.memo == nil {
		vm.memo = make(map[any]goja.Value)
	}
	vm.memo[key] = v
	return v, nil
}

// heapLimit is the running call's heap limit.
func (vm *VM) heapLimit() int64 {
	if l := vm.callLimit.Load(); l > 0 {
		return l
	}
	return vm.opts.HeapLimit
}

// poolHeapLimit is the limit of the calls running at once in vm's pool:
// never below the running call's own.
func (vm *VM) poolHeapLimit() int64 {
	if vm.opts.PoolHeapLimit <= 0 {
		return vm.opts.PoolHeapLimit
	}
	return max(vm.opts.PoolHeapLimit, vm.heapLimit())
}
