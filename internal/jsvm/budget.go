package jsvm

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/dop251/goja"
)

// stopCause says which budget stopped a call. It is also the value passed
// to goja's Interrupt, so an InterruptedError names its cause.
type stopCause int

const (
	causeNone stopCause = iota
	causeDeadline
	causeCancel
	causeHeap
	causeRegex
	causeCeiling
)

func (c stopCause) Error() string {
	switch c {
	case causeDeadline:
		return "deadline exceeded"
	case causeCancel:
		return "cancelled"
	case causeHeap:
		return "heap limit exceeded"
	case causeRegex:
		return "regular expression too slow"
	case causeCeiling:
		return "server memory ceiling reached"
	}
	return "not stopped"
}

// run executes fn as one call of export under every budget: a deadline of
// d, ctx's cancellation, the heap guard, and the call-stack limit set on
// the runtime. Everything that can run user code — building arguments,
// the call, waiting for its promise, reading the result, even rendering a
// thrown value — happens inside fn or before end, so no user code ever
// runs unguarded. The returned error is already in the package's terms.
func (vm *VM) run(ctx context.Context, export string, d time.Duration, fn func() error) error {
	// Loading the module (export "") always runs on real time: a top-level
	// loop must not wait for a virtual clock that nobody advances.
	vm.begin(ctx, d, export == "")
	err := vm.protect(fn)
	err = vm.userError(err, export)
	cause := vm.end()
	if cause == causeNone && err != nil && ctx.Err() != nil {
		// The context ended and the call failed, possibly from host work
		// that saw the cancellation before our watcher did: that is a
		// cancellation, not the user's error.
		cause = causeCancel
	}
	return vm.classify(err, cause, ctx, export, d)
}

// begin arms the budgets for a new call generation.
func (vm *VM) begin(ctx context.Context, d time.Duration, realTime bool) {
	vm.mu.Lock()
	vm.gen++
	g := vm.gen
	vm.cause = causeNone
	vm.halted.Store(false)
	vm.active.Store(g)
	vm.mu.Unlock()

	vm.ctx = ctx
	vm.joinDepth = 0
	// A stray Interrupt can only come from a call we already threw away,
	// but clearing costs nothing and keeps a reused runtime honest.
	vm.ClearInterrupt()
	if af := vm.opts.AfterFunc; af != nil && !realTime {
		vm.stopAF = af(d, func() { vm.stop(g, causeDeadline) })
	} else {
		vm.stallMark.Store(stalls.at(mono()))
		// The grace left: at most the deadline again, so a call that
		// itself causes the stalls (a bomb's copies) is not let run long.
		vm.grace.Store(-int64(min(d, maxStallGrace)))
		vm.timer.Reset(d)
	}
	if ctx.Done() != nil {
		vm.stopCtx = context.AfterFunc(ctx, func() { vm.stop(g, causeCancel) })
	}
	if vm.opts.HeapLimit > 0 {
		watchdog.kick()
	}
}

// end disarms the budgets and reports what stopped the call, if anything.
// A VM whose timer or context watcher already fired is marked broken even
// when the call won the race: the stop may still be on its way, and a
// runtime is cheaper to replace than to reason about.
func (vm *VM) end() stopCause {
	clean := true
	realTimer := vm.stopAF == nil
	if !realTimer {
		clean = vm.stopAF()
		vm.stopAF = nil
	}
	if vm.stopCtx != nil {
		if !vm.stopCtx() {
			clean = false
		}
		vm.stopCtx = nil
	}

	vm.mu.Lock()
	vm.active.Store(0)
	// Disarmed under the lock that onDeadline re-arms under, so that it
	// is not armed again once the call has ended.
	if realTimer && !vm.timer.Stop() {
		clean = false
	}
	cause := vm.cause
	clear(vm.queue)
	vm.queue = vm.queue[:0]
	vm.pending = 0
	vm.mu.Unlock()

	if vm.cancelCtx != nil {
		vm.cancelCtx()
		vm.callCtx, vm.cancelCtx = nil, nil
	}
	vm.ctx = nil
	if !clean || cause != causeNone {
		vm.broken = true
	}
	return cause
}

// stop ends call generation g for cause: it interrupts running JS and
// wakes the event loop if the call is waiting on a promise. It is a no-op
// unless g is still the running call, so late timers are harmless.
func (vm *VM) stop(g uint64, cause stopCause) {
	vm.mu.Lock()
	if g == 0 || vm.active.Load() != g || vm.cause != causeNone {
		vm.mu.Unlock()
		return
	}
	vm.cause = cause
	vm.halted.Store(true)
	vm.mu.Unlock()
	vm.Interrupt(cause)
	vm.signal()
}

// onDeadline is the reusable timer's function. A call that the runtime
// froze (stall.go) has its deadline moved on by the time it was frozen,
// as far as its grace goes: frozen longer than that, it still gets the
// whole grace, not nothing.
//
// It re-arms only while a call runs, under the lock that end disarms under:
// a timer re-armed after the call ended would keep the runtime reachable,
// and a runtime stopped for memory is replaced only once it is collected.
func (vm *VM) onDeadline() {
	now := stalls.at(mono())
	vm.mu.Lock()
	g := vm.active.Load()
	if extra, left := now-vm.stallMark.Load(), -vm.grace.Load(); g != 0 && extra > 0 && left > 0 {
		use := min(extra, left)
		vm.grace.Add(use)
		vm.stallMark.Store(now)
		vm.timer.Reset(time.Duration(use))
		vm.mu.Unlock()
		return
	}
	vm.mu.Unlock()
	vm.stop(g, causeDeadline)
}

// stopRunning is how code on the VM's own goroutine (the allocation
// guards) stops the current call.
func (vm *VM) stopRunning(cause stopCause) { vm.stop(vm.active.Load(), cause) }

// protect runs fn and turns goja's panics into errors. JS exceptions
// raised by Go-side calls (Object.Get on a throwing getter) become
// *goja.Exception; goja's uncatchable errors (interrupts, stack overflow)
// are returned as they are. Any other panic is a bug, goja's or a host
// function's, that the call's code reached (goja panics on a regex with
// two groups of one name): the call fails with a *PanicError and the VM
// is retired, never reused in a state nobody can vouch for, so no app's
// code can end the server.
func (vm *VM) protect(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if e, ok := r.(error); ok && isUncatchable(e) {
				err = e
				return
			}
			vm.broken = true
			err = &PanicError{File: vm.prog.filename, Value: fmt.Sprint(r), Stack: string(debug.Stack())}
		}
	}()
	if ex := vm.Try(func() { err = fn() }); ex != nil {
		err = ex
	}
	return err
}

func isUncatchable(err error) bool {
	_, ie := findErr[*goja.InterruptedError](err)
	_, so := findErr[*goja.StackOverflowError](err)
	return ie || so
}

// findErr is errors.As that does not look inside a *goja.Exception. Its
// Unwrap reads the thrown value's "value" and exports it whole when the
// value claims to be a GoError, which a script can make it do: outside
// the call's budgets that ran the script's getters, and a sparse array
// there asked Go for gigabytes.
func findErr[T error](err error) (T, bool) {
	for err != nil {
		if t, ok := err.(T); ok {
			return t, true
		}
		if _, ok := err.(*goja.Exception); ok {
			break
		}
		u, ok := err.(interface{ Unwrap() error })
		if !ok {
			break
		}
		err = u.Unwrap()
	}
	var zero T
	return zero, false
}

// userError converts exceptions and rejections into *JSError while the
// call's budgets still hold, because reading an Error's name or exporting
// a thrown object can run the user's getters.
func (vm *VM) userError(err error, export string) error {
	if err == nil || isUncatchable(err) {
		return err
	}
	ex, isEx := findErr[*goja.Exception](err)
	rej, isRej := findErr[*rejection](err)
	switch {
	case isEx:
		var je *JSError
		if perr := vm.protect(func() error { je = vm.exceptionError(ex, export); return nil }); perr != nil {
			return perr
		}
		return je
	case isRej:
		var je *JSError
		if perr := vm.protect(func() error { je = vm.valueError(rej.value, export, true); return nil }); perr != nil {
			return perr
		}
		return je
	}
	return err
}

// classify maps what stopped a call to the error the user sees.
func (vm *VM) classify(err error, cause stopCause, ctx context.Context, export string, d time.Duration) error {
	file := vm.prog.filename
	if cause != causeNone && err != nil {
		switch cause {
		case causeDeadline:
			return deadlineError(file, export, d)
		case causeHeap:
			return heapError(file, export, vm.heapLimit())
		case causeRegex:
			return regexError(file, export)
		case causeCeiling:
			return ceilingError(file, export)
		case causeCancel:
			return &CancelError{File: file, Export: export, Err: context.Cause(ctx)}
		}
	}
	if err == nil {
		return nil
	}
	if _, so := findErr[*goja.StackOverflowError](err); so {
		vm.broken = true
		return stackError(file, export, vm.opts.MaxCallStack)
	}
	if ie, ok := findErr[*goja.InterruptedError](err); ok {
		vm.broken = true
		return fmt.Errorf("%s: %s was interrupted (%v); try again", file, what(export), ie.Value())
	}
	if _, isEx := err.(*goja.Exception); !isEx && errors.Is(err, errNeverSettles) {
		return neverSettlesError(file, export)
	}
	return err
}

// stoppedForMemory reports whether the last call was stopped by a heap
// limit or the ceiling. The call has ended, so no stop can race with it.
func (vm *VM) stoppedForMemory() bool {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return vm.cause == causeHeap || vm.cause == causeCeiling
}
