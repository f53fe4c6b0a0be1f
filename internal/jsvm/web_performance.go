package jsvm

import (
	"time"

	"github.com/dop251/goja"
)

// installPerformance defines performance.now() and performance.timeOrigin.
// They read Options.Now, the clock behind Date.now, so a virtual clock
// moves them too; the origin is when the runtime was made.
func installPerformance(vm *VM) error {
	vm.web.perfOrigin = vm.opts.Now()
	p := vm.NewObject()
	origin := float64(vm.web.perfOrigin.UnixNano()) / 1e6
	now := func(goja.FunctionCall) goja.Value { return vm.ToValue(vm.perfNow()) }
	toJSON := func(goja.FunctionCall) goja.Value {
		o := vm.NewObject()
		_ = o.Set("timeOrigin", origin)
		return o
	}
	for _, m := range []struct {
		name string
		fn   func(goja.FunctionCall) goja.Value
	}{{"now", now}, {"toJSON", toJSON}} {
		if err := p.DefineDataProperty(m.name, vm.ToValue(m.fn), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
			return err
		}
	}
	if err := p.DefineDataProperty("timeOrigin", vm.ToValue(origin), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
		return err
	}
	if err := p.DefineDataPropertySymbol(goja.SymToStringTag, vm.ToValue("Performance"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	return defineGlobal(vm, "performance", p)
}

// perfNow is performance.now(): milliseconds since the runtime's origin,
// with the clock's full precision.
func (vm *VM) perfNow() float64 {
	if vm.web.perfOrigin.IsZero() {
		vm.web.perfOrigin = vm.opts.Now()
	}
	return float64(vm.opts.Now().Sub(vm.web.perfOrigin)) / float64(time.Millisecond)
}
