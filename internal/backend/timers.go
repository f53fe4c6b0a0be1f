package backend

import (
	"math"
	"time"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/internal/jsvm"
)

// setTimeout runs on the server clock, so under a virtual clock a handler
// that waits 3 s for a lease waits exactly until the test advances the
// clock. Each armed timer holds its call open (jsvm.VM.Hold): the call's
// promise may wait on it, and when nothing else is pending the loop must
// know a timer may still settle it. Timers belong to their call: when the
// call ends, whatever is left is stopped, so no callback ever runs in a
// later call, and a runtime never leaves timers behind on the clock.

// maxTimeout is the longest wait setTimeout accepts, as in browsers
// (2^31-1 ms, about 24.8 days); longer ones are clamped. Any wait past
// the run limit ends the call anyway.
const maxTimeout = math.MaxInt32 * time.Millisecond

// timer is one armed setTimeout.
type timer struct {
	stop   func() bool
	resume func(func(*jsvm.VM) error)
}

func (rt *runtime) installTimers() error {
	if err := rt.vm.Set("setTimeout", rt.setTimeout); err != nil {
		return err
	}
	return rt.vm.Set("clearTimeout", rt.clearTimeout)
}

// setTimeout(fn, ms, ...args) returns a numeric id. An exception thrown
// by fn fails the handler's run, as an uncaught exception would.
func (rt *runtime) setTimeout(fc goja.FunctionCall) goja.Value {
	vm := rt.vm
	fn, ok := goja.AssertFunction(fc.Argument(0))
	if !ok {
		panic(vm.NewTypeError("setTimeout needs a function to call, e.g. setTimeout(() => ..., 1000)"))
	}
	c := rt.cur.Load()
	if c == nil {
		panic(vm.NewTypeError("setTimeout works only while a handler runs, not when the module loads"))
	}
	d := delay(fc.Argument(1))
	var args []goja.Value
	if len(fc.Arguments) > 2 {
		args = append(args, fc.Arguments[2:]...)
	}
	rt.nextTimer++
	id := rt.nextTimer
	t := &timer{resume: vm.Hold()}

	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ended {
		// Unreachable in practice (no JS runs for an ended call), but
		// an ended call must not arm anything.
		t.resume(func(*jsvm.VM) error { return nil })
		return vm.ToValue(id)
	}
	if c.timers == nil {
		c.timers = make(map[int64]*timer)
	}
	c.timers[id] = t
	t.stop = rt.afterFunc(d, func() {
		t.resume(func(*jsvm.VM) error {
			if !c.disarm(id) {
				return nil // cleared after it fired
			}
			_, err := fn(goja.Undefined(), args...)
			return err
		})
	})
	return vm.ToValue(id)
}

// clearTimeout(id) cancels a timer of the running call; other ids, and
// timers that already ran, are ignored as in browsers.
func (rt *runtime) clearTimeout(fc goja.FunctionCall) goja.Value {
	c := rt.cur.Load()
	if c == nil {
		return goja.Undefined()
	}
	id := fc.Argument(0).ToInteger()
	c.mu.Lock()
	t := c.timers[id]
	delete(c.timers, id)
	c.mu.Unlock()
	if t != nil {
		t.stop()
		// Release the hold: the call no longer waits on this timer.
		t.resume(func(*jsvm.VM) error { return nil })
	}
	return goja.Undefined()
}

// disarm removes timer id and reports whether it was still armed.
func (c *call) disarm(id int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.timers[id]
	delete(c.timers, id)
	return ok
}

// stopTimers ends the call's timers; it runs once the call is over.
func (c *call) stopTimers() {
	c.mu.Lock()
	timers := c.timers
	c.timers, c.ended = nil, true
	c.mu.Unlock()
	for _, t := range timers {
		t.stop()
	}
}

// delay reads setTimeout's ms argument as browsers do: missing, negative
// or NaN is 0, fractions are dropped.
func delay(v goja.Value) time.Duration {
	ms := v.ToFloat()
	if math.IsNaN(ms) || ms <= 0 {
		return 0
	}
	if ms >= float64(maxTimeout/time.Millisecond) {
		return maxTimeout
	}
	return time.Duration(ms) * time.Millisecond
}
