package jsvm

import (
	"math"
	"strconv"

	"github.com/dop251/goja"
)

// guardFlat sizes flat and flatMap before they run. flat recurses in Go
// once per level it flattens: `a[0] = a; a.flat(Infinity)` overflowed the
// Go stack, which kills the process, and arrays that share their elements
// (a thousand of a thousand of a thousand) cost little to make but ran
// natively for minutes. flatMap flattens what its callback returns, which
// may be a 4e9-long sparse array.
func (vm *VM) guardFlat(proto *goja.Object) error {
	rt := vm.Runtime
	isArrayFn, ok := goja.AssertFunction(rt.Get("Array").ToObject(rt).Get("isArray"))
	if !ok {
		return nil
	}
	isArray := func(v goja.Value) (*goja.Object, bool) {
		obj, ok := v.(*goja.Object)
		if !ok {
			return nil, false
		}
		switch obj.ClassName() {
		case "Array":
			return obj, true
		case "Object": // a Proxy of an array is an array too
			r, err := isArrayFn(goja.Undefined(), obj)
			if err != nil {
				panic(err)
			}
			return obj, r.ToBoolean()
		}
		return nil, false
	}
	g := vm.heapGuard()
	flat := func(orig goja.Callable) func(goja.FunctionCall) goja.Value {
		return func(c goja.FunctionCall) goja.Value {
			depth := 1.0
			if d := c.Argument(0); !goja.IsUndefined(d) {
				depth = d.ToFloat()
			}
			if obj, ok := c.This.(*goja.Object); ok && depth >= 1 {
				s := flatScan{vm: vm, isArray: isArray, budget: math.Inf(1)}
				if g != nil {
					s.budget = float64(g.vm.heapLimit()) / slotBytes
				}
				s.walk(obj, depth, 0)
				if g != nil && g.over(s.visited*slotBytes) {
					return goja.Undefined()
				}
			}
			return mustCall(orig, c.This, c.Arguments...)
		}
	}
	flatMap := func(orig goja.Callable) func(goja.FunctionCall) goja.Value {
		return func(c goja.FunctionCall) goja.Value {
			fn, ok := goja.AssertFunction(c.Argument(0))
			if !ok {
				return mustCall(orig, c.This, c.Arguments...)
			}
			var total float64
			args := append([]goja.Value{vm.ToValue(func(cb goja.FunctionCall) goja.Value {
				v := mustCall(fn, cb.This, cb.Arguments...)
				if a, ok := isArray(v); ok && g != nil {
					outer := g.pins
					g.pins = nil
					total += g.length(a)
					pins := g.pins
					g.pins = outer
					if g.over(total * slotBytes) {
						return goja.Undefined()
					}
					if len(pins) > 0 {
						// A Proxy of an array: flatMap reads its length
						// again (pins.go).
						_, out := g.pinned(pins, nil, []goja.Value{v})
						return out[0]
					}
				}
				return v
			})}, c.Arguments[1:]...)
			return mustCall(orig, c.This, args...)
		}
	}
	if err := vm.replaceMethod(proto, "flat", flat); err != nil {
		return err
	}
	return vm.replaceMethod(proto, "flatMap", flatMap)
}

// flatScan counts the elements, holes included, that flat visits: each
// is a step of its native loop and may be a slot of its result. It stops
// counting past budget, and refuses nesting deeper than join does.
type flatScan struct {
	vm      *VM
	isArray func(goja.Value) (*goja.Object, bool)
	visited float64
	budget  float64
}

func (s *flatScan) walk(arr *goja.Object, depth float64, level int) {
	n := lengthOf(arr)
	if depth < 1 || s.visited+n > s.budget {
		s.visited += n
		return
	}
	for i := 0; float64(i) < n; i++ {
		s.visited++
		if i%4096 == 4095 {
			s.vm.checkStop()
		}
		el, ok := s.isArray(arr.Get(strconv.Itoa(i)))
		if !ok {
			continue
		}
		if level+1 >= maxJoinDepth {
			s.vm.throw(s.vm.builtins.rangeError, "Array.prototype.flat: arrays nested deeper than "+strconv.Itoa(maxJoinDepth)+" levels")
		}
		s.walk(el, depth-1, level+1)
		if s.visited > s.budget {
			return
		}
	}
}
