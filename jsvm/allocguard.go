package jsvm

import (
	"fmt"
	"math"

	"github.com/dop251/goja"
)

// The heap watchdog samples every few milliseconds, which is too slow for
// one native call that asks for gigabytes at once: "x".repeat(2**30)
// allocates its whole result inside a single goja instruction, and
// new Array(2**32-1).map(f) makes a 64 GiB slice, a fatal error that no
// recover can catch. So the builtins that allocate (or loop natively, out
// of reach of Interrupt) in proportion to a number the script chooses are
// wrapped: each checks the size it is about to produce against
// HeapLimit and stops the call with the heap error before allocating.
// This is not a complete sandbox — string concatenation in a loop is left
// to the watchdog — but it closes the one-line ways to kill the process.

// slotBytes is what goja spends per array element (an interface value).
const slotBytes = 16

// bigAlloc is the size from which a guarded builtin counts as a big
// allocation for the heap watchdog's attribution.
const bigAlloc = 64 << 10

// lengthMethods are the Array.prototype methods whose work or allocation
// grows with this.length, including holes: a sparse new Array(2**32-1)
// costs nothing until one of these walks it.
var lengthMethods = []string{
	"concat", "copyWithin", "every", "fill", "filter", "find", "findIndex",
	"findLast", "findLastIndex", "flat", "flatMap", "forEach", "includes",
	"indexOf", "join", "lastIndexOf", "map", "reduce", "reduceRight",
	"reverse", "shift", "slice", "some", "sort", "splice", "toLocaleString",
	"unshift", "with", "toReversed", "toSorted", "toSpliced",
}

// typedArrays are the constructors that allocate their buffer eagerly.
var typedArrays = map[string]float64{
	"ArrayBuffer": 1, "Int8Array": 1, "Uint8Array": 1, "Uint8ClampedArray": 1,
	"Int16Array": 2, "Uint16Array": 2, "Int32Array": 4, "Uint32Array": 4,
	"Float32Array": 4, "Float64Array": 8, "BigInt64Array": 8, "BigUint64Array": 8,
}

type allocGuard struct {
	vm    *VM
	limit float64
}

func installAllocGuards(vm *VM) error {
	g := &allocGuard{vm: vm, limit: float64(vm.opts.HeapLimit)}
	rt := vm.Runtime

	strProto := rt.Get("String").ToObject(rt).Get("prototype").ToObject(rt)
	if err := g.wrap(strProto, "repeat", func(c goja.FunctionCall) float64 {
		return g.strLen(c.This) * c.Argument(0).ToFloat()
	}); err != nil {
		return err
	}
	for _, name := range []string{"padStart", "padEnd"} {
		if err := g.wrap(strProto, name, func(c goja.FunctionCall) float64 {
			return c.Argument(0).ToFloat()
		}); err != nil {
			return err
		}
	}

	array := rt.Get("Array").ToObject(rt)
	arrProto := array.Get("prototype").ToObject(rt)
	for _, name := range lengthMethods {
		size := func(c goja.FunctionCall) float64 { return g.length(c.This) * slotBytes }
		if name == "concat" {
			size = func(c goja.FunctionCall) float64 {
				n := g.length(c.This)
				for _, a := range c.Arguments {
					n += g.length(a)
				}
				return n * slotBytes
			}
		}
		if err := g.wrap(arrProto, name, size); err != nil {
			return err
		}
	}
	if err := g.wrap(array, "from", func(c goja.FunctionCall) float64 {
		return g.length(c.Argument(0)) * slotBytes
	}); err != nil {
		return err
	}

	for name, unit := range typedArrays {
		if err := g.wrapConstructor(name, unit); err != nil {
			return err
		}
	}
	return nil
}

// over stops the call if size is beyond the limit. NaN and negative sizes
// pass: the builtin itself rejects them with the right RangeError. Outside
// a call (host code in Setup) there is nothing to stop, so it throws.
func (g *allocGuard) over(size float64) bool {
	if size >= bigAlloc {
		g.vm.bigAllocs.Add(1) // tells the heap watchdog who allocates
		if !(size > g.limit) && !overCeiling(size) {
			return false
		}
	} else if !(size > g.limit) {
		return false
	}
	if g.vm.active.Load() == 0 {
		panic(g.vm.NewGoError(fmt.Errorf("allocating %s would exceed the heap limit of %s", mib(int64(min(size, 1<<62))), mib(int64(g.limit)))))
	}
	if size > g.limit {
		g.vm.stopRunning(causeHeap)
	} else {
		g.vm.stopRunning(causeCeiling)
	}
	return true
}

// wrap replaces obj[name] with a native function that checks size first.
// Assigning keeps the builtin's attributes (non-enumerable).
func (g *allocGuard) wrap(obj *goja.Object, name string, size func(goja.FunctionCall) float64) error {
	origVal := obj.Get(name)
	orig, ok := goja.AssertFunction(origVal)
	if !ok {
		return nil // not in this goja version; nothing to guard
	}
	fn := g.vm.ToValue(func(c goja.FunctionCall) goja.Value {
		if g.over(size(c)) {
			// The interrupt fires at the next instruction; the
			// value returned here is never seen.
			return goja.Undefined()
		}
		v, err := orig(c.This, c.Arguments...)
		if err != nil {
			panic(err) // rethrow the builtin's own exception, or an interrupt
		}
		return v
	}).(*goja.Object)
	copyIdentity(origVal.(*goja.Object), fn)
	return obj.Set(name, fn)
}

// wrapConstructor puts a Proxy with a construct trap in front of a typed
// array constructor: instanceof, static methods and prototype all pass
// through to the original.
func (g *allocGuard) wrapConstructor(name string, unit float64) error {
	rt := g.vm.Runtime
	target, ok := rt.Get(name).(*goja.Object)
	if !ok {
		return nil
	}
	ctor, ok := goja.AssertConstructor(target)
	if !ok {
		return nil
	}
	proxy := rt.NewProxy(target, &goja.ProxyTrapConfig{
		Construct: func(_ *goja.Object, args []goja.Value, newTarget *goja.Object) *goja.Object {
			if len(args) > 0 {
				if _, isObj := args[0].(*goja.Object); !isObj && g.over(args[0].ToFloat()*unit) {
					return rt.NewObject()
				}
			}
			obj, err := ctor(newTarget, args...)
			if err != nil {
				panic(err)
			}
			return obj
		},
	})
	// goja's proxies cannot be the right side of instanceof (they lack
	// OrdinaryHasInstance), so give the constructor its own
	// Symbol.hasInstance that walks the prototype chain itself.
	hasInstance := rt.ToValue(func(c goja.FunctionCall) goja.Value {
		return rt.ToValue(ordinaryHasInstance(rt, c.This, c.Argument(0)))
	})
	if err := target.DefineDataPropertySymbol(goja.SymHasInstance, hasInstance, goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	return rt.Set(name, proxy)
}

// ordinaryHasInstance is the spec's OrdinaryHasInstance(C, O) for an
// object constructor C.
func ordinaryHasInstance(rt *goja.Runtime, c, v goja.Value) bool {
	ctor, ok := c.(*goja.Object)
	if !ok {
		return false
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		return false
	}
	proto, ok := ctor.Get("prototype").(*goja.Object)
	if !ok {
		return false
	}
	for p := obj.Prototype(); p != nil; p = p.Prototype() {
		if p.SameAs(proto) {
			return true
		}
	}
	return false
}

// length reads .length of an array-like; anything else counts as 0.
func (g *allocGuard) length(v goja.Value) float64 {
	obj, ok := v.(*goja.Object)
	if !ok {
		return 0
	}
	l := obj.Get("length")
	if l == nil {
		return 0
	}
	f := l.ToFloat()
	if math.IsNaN(f) {
		return 0
	}
	return f
}

// strLen is the length of this as a string, without copying it to Go.
func (g *allocGuard) strLen(v goja.Value) float64 {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return 0
	}
	if s, ok := v.ToString().(goja.String); ok {
		return float64(s.Length())
	}
	return float64(len(v.String()))
}
