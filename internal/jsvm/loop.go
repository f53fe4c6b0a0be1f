package jsvm

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/internal/workers"
)

// goja runs promise jobs when a top-level call returns, so an async export
// whose awaits only touch JS has settled by the time Callable returns.
// What remains pending waits on the host: a ctx.db.put running on another
// goroutine, say. goja values are not goroutine-safe, so that host work
// must hand its result back to the runtime's own goroutine. This file is
// the smallest event loop that allows it: host code Holds the call open,
// does its work anywhere, and resumes with a callback that the waiting call
// runs on its goroutine. The call loops until its promise settles, its
// budget runs out, or nothing is left that could settle it.

// errNeverSettles is the loop's internal verdict; classify words it.
var errNeverSettles = errors.New("promise never settles")

// errStopped ends the loop when a budget stopped the call; classify
// replaces it with the cause's error.
var errStopped = errors.New("call stopped")

// rejection carries a rejected promise's value until userError turns it
// into a *JSError under the call's budgets.
type rejection struct{ value goja.Value }

func (r *rejection) Error() string { return "promise rejected" }

var promiseType = reflect.TypeOf((*goja.Promise)(nil))

// Hold registers host work that will finish later, on any goroutine, and
// returns the function that finishes it. Call resume exactly once with a
// callback; the callback runs on the VM's goroutine while the call waits
// for its promise, and is where the host resolves or rejects (returning
// the error of goja's resolve/reject functions). Hold must be called on
// the VM's goroutine during a call, typically from a host function. If the
// call has ended by the time resume is called, the callback is dropped:
// the runtime may already serve another call.
func (vm *VM) Hold() (resume func(func(vm *VM) error)) {
	vm.mu.Lock()
	g := vm.gen
	live := g != 0 && vm.active.Load() == g
	if live {
		vm.pending++
	}
	vm.mu.Unlock()
	done := false
	return func(fn func(vm *VM) error) {
		vm.mu.Lock()
		if done || !live || vm.active.Load() != g {
			vm.mu.Unlock()
			return
		}
		done = true
		vm.queue = append(vm.queue, fn)
		vm.mu.Unlock()
		vm.signal()
	}
}

// Post runs fn on the VM's goroutine while its current call waits, from
// any goroutine and without a Hold made beforehand: for host work that
// starts elsewhere and needs the runtime, such as a stub that a test
// installed being called by another app's handler. It reports false, and
// drops fn, when no call is running.
func (vm *VM) Post(fn func(vm *VM) error) bool {
	vm.mu.Lock()
	g := vm.gen
	if g == 0 || vm.active.Load() != g {
		vm.mu.Unlock()
		return false
	}
	vm.pending++
	vm.queue = append(vm.queue, fn)
	vm.mu.Unlock()
	vm.signal()
	return true
}

// Settler is a result that Async converts on the VM's goroutine: the
// escape hatch for results that need runtime calls to build.
type Settler func(vm *VM) (goja.Value, error)

// JSValuer is an error that knows its JS shape, e.g. an Error with a
// .code. Async rejects with JSValue(vm) instead of a generic GoError.
type JSValuer interface {
	JSValue(vm *VM) goja.Value
}

// Async runs work on a goroutine of its own (package workers) and returns
// a promise for its result, settled on the VM's goroutine. work gets the
// call's context, cancelled when the call ends. Results convert as
// follows: nil is undefined, json.RawMessage is parsed into plain JS
// values, a Settler runs on the VM, anything else goes through
// vm.ToValue. An error rejects the promise with err.JSValue(vm) if it
// implements JSValuer, else with a GoError whose message is err.Error().
func (vm *VM) Async(work func(ctx context.Context) (any, error)) goja.Value {
	p, resolve, reject := vm.NewPromise()
	resume := vm.Hold()
	ctx := vm.Context()
	busy := vm.opts.Busy
	if busy != nil {
		busy(1)
	}
	workers.Go(func() {
		if busy != nil {
			defer busy(-1) // after resume, which wakes a parked call first
		}
		v, err := work(ctx)
		resume(func(vm *VM) error {
			if err != nil {
				return reject(vm.errorValue(err))
			}
			jv, err := vm.toJS(v)
			if err != nil {
				return reject(vm.errorValue(err))
			}
			return resolve(jv)
		})
	})
	return vm.ToValue(p)
}

func (vm *VM) errorValue(err error) goja.Value {
	var jv JSValuer
	if errors.As(err, &jv) {
		return jv.JSValue(vm)
	}
	return vm.NewGoError(err)
}

func (vm *VM) toJS(v any) (goja.Value, error) {
	switch x := v.(type) {
	case nil:
		return goja.Undefined(), nil
	case json.RawMessage:
		return vm.ParseJSON(x)
	case Settler:
		return x(vm)
	case func(vm *VM) (goja.Value, error):
		return x(vm)
	}
	return vm.ToValue(v), nil
}

// signal wakes the waiting loop; a pending wake-up is enough. A call
// parked with Options.Busy told counts as work again from here.
func (vm *VM) signal() {
	if vm.opts.Busy != nil {
		vm.mu.Lock()
		if vm.parked {
			vm.parked = false
			vm.opts.Busy(1)
		}
		vm.mu.Unlock()
	}
	select {
	case vm.wake <- struct{}{}:
	default:
	}
}

// settle waits for v to settle if it is a promise, running host callbacks
// as they arrive, and returns the fulfilled value.
func (vm *VM) settle(v goja.Value) (goja.Value, error) {
	obj, ok := v.(*goja.Object)
	if !ok || obj.ExportType() != promiseType {
		return v, nil
	}
	p := obj.Export().(*goja.Promise)
	for {
		switch p.State() {
		case goja.PromiseStateFulfilled:
			return p.Result(), nil
		case goja.PromiseStateRejected:
			return nil, &rejection{p.Result()}
		}
		fn, err := vm.next()
		if err != nil {
			return nil, err
		}
		if err := fn(vm); err != nil {
			return nil, err
		}
	}
}

// next blocks until a resumed callback is ready, the call is stopped, or
// no Hold is outstanding (then the promise can never settle).
func (vm *VM) next() (func(*VM) error, error) {
	for {
		vm.mu.Lock()
		switch {
		case vm.cause != causeNone:
			vm.mu.Unlock()
			return nil, errStopped
		case len(vm.queue) > 0:
			if !vm.holding && vm.opts.Gate != nil {
				vm.mu.Unlock()
				if !vm.takeSlot() {
					return nil, errStopped
				}
				continue
			}
			fn := vm.queue[0]
			vm.queue[0] = nil
			vm.queue = vm.queue[1:]
			vm.pending--
			vm.mu.Unlock()
			return fn, nil
		case vm.pending == 0:
			vm.mu.Unlock()
			return nil, errNeverSettles
		}
		if vm.opts.Busy != nil && !vm.parked {
			// Nothing to run until the host answers: no work of ours.
			vm.parked = true
			vm.opts.Busy(-1)
		}
		vm.mu.Unlock()
		vm.yieldSlot() // awaiting the host runs no JS
		vm.waiting.Store(true)
		<-vm.wake
		vm.waiting.Store(false)
		if vm.opts.HeapLimit > 0 {
			watchdog.kick() // it may have parked while every call waited
		}
	}
}

// yieldSlot gives the call's slot of the gate back, if it holds one.
func (vm *VM) yieldSlot() {
	if vm.holding {
		vm.holding = false
		vm.opts.Gate.release(vm.group)
	}
}

// takeSlot waits for a slot of the gate so the call can run JS again. It
// reports false when the call was stopped while it waited.
func (vm *VM) takeSlot() bool {
	vm.waiting.Store(true)
	defer vm.waiting.Store(false)
	ok := vm.opts.Gate.acquire(vm.group, vm.wake, func() bool {
		vm.mu.Lock()
		defer vm.mu.Unlock()
		return vm.cause != causeNone
	})
	vm.holding = ok
	if vm.opts.HeapLimit > 0 {
		watchdog.kick()
	}
	return ok
}
