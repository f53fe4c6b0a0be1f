package jsvm

import (
	"reflect"

	"github.com/dop251/goja"
)

// A guard sizes a builtin's work by an array-like's length before the
// builtin runs, and the builtin then reads that length again. A length
// getter, or a Proxy's get trap, can answer 0 to the guard and 4e9 to the
// builtin: Math.max.apply(null, o) then asked Go for 64 GB at once, which
// ends the process, and Array.prototype.map.call(o, f) ran natively for
// minutes. So an array-like that is not an Array or a String (whose
// lengths are data that cannot change while no script runs) reaches the
// builtin behind a Proxy that answers the length the guard read, and
// passes everything else through. A callback of the builtin sees that
// Proxy where it would see the array-like; a builtin that returns its
// `this` returns the array-like itself.

// pin is an array-like and the length its guard read.
type pin struct {
	obj    *goja.Object
	n      float64
	answer goja.Value // what the Proxy answers for length
	proxy  *goja.Object
}

// fixedLength reports whether obj needs no pin: an Array's length and a
// String object's are data properties that cannot be redefined, and an
// ArrayBuffer is read by its byte length, which it holds itself.
func fixedLength(obj *goja.Object) bool {
	switch obj.ClassName() {
	case "Array", "String":
		return true
	}
	return obj.ExportType() == arrayBufferType
}

var (
	arrayBufferType = reflect.TypeOf(goja.ArrayBuffer{})
	proxyType       = reflect.TypeOf(goja.Proxy{})
)

// stableLength reports whether obj's length is data that no script can
// change between the guard's read and the builtin's: a data property with
// a primitive value, on obj or the first object of its prototype chain
// that has one, with no Proxy on the way. Such an array-like (arguments,
// {length: 3}) needs no pin, so the builtin sees the object itself, as
// the standard says: behind a Proxy it visited holes, and its callbacks
// saw the Proxy, not the object.
func (g *allocGuard) stableLength(obj *goja.Object) bool {
	for o := obj; o != nil; o = o.Prototype() {
		if o.ExportType() == proxyType {
			return false
		}
		d, err := g.ownDesc(goja.Undefined(), o, g.vm.ToValue("length"))
		if err != nil {
			return false
		}
		desc, ok := d.(*goja.Object)
		if !ok {
			continue // no own length: look further up
		}
		// Own keys only: a getter on Object.prototype named "value" or
		// "get" must not run here.
		for _, k := range desc.Keys() {
			if k == "get" || k == "set" {
				return false
			}
		}
		_, isObj := desc.Get("value").(*goja.Object)
		return !isObj
	}
	return true
}

// pinned returns this and args with each pinned array-like behind its
// Proxy. args is copied, never changed in place.
func (g *allocGuard) pinned(pins []pin, this goja.Value, args []goja.Value) (goja.Value, []goja.Value) {
	swap := func(v goja.Value) goja.Value {
		obj, ok := v.(*goja.Object)
		if !ok {
			return v
		}
		for i := range pins {
			if pins[i].obj == obj {
				if pins[i].proxy == nil {
					pins[i].proxy = g.vm.pinProxy(pins[i].obj, pins[i].answer)
				}
				return pins[i].proxy
			}
		}
		return v
	}
	out := make([]goja.Value, len(args))
	for i, a := range args {
		out[i] = swap(a)
	}
	if this == nil {
		return nil, out
	}
	return swap(this), out
}

// pinProxy is obj behind a Proxy whose length is length. Its methods are
// called on obj itself: a typed array's values(), which Array.from calls
// through Symbol.iterator, takes no other receiver.
func (vm *VM) pinProxy(obj *goja.Object, length goja.Value) *goja.Object {
	rt := vm.Runtime
	onTarget := func(target *goja.Object, v goja.Value) goja.Value {
		if fn, ok := goja.AssertFunction(v); ok {
			return rt.ToValue(func(c goja.FunctionCall) goja.Value { return mustCall(fn, target, c.Arguments...) })
		}
		return orUndefined(v)
	}
	return rt.ToValue(rt.NewProxy(obj, &goja.ProxyTrapConfig{
		Get: func(target *goja.Object, key string, _ goja.Value) goja.Value {
			switch key {
			case "length":
				return length
			case "constructor": // a species is constructed, not called
				return orUndefined(target.Get(key))
			}
			return onTarget(target, target.Get(key))
		},
		GetSym: func(target *goja.Object, sym *goja.Symbol, _ goja.Value) goja.Value {
			return onTarget(target, target.GetSymbol(sym))
		},
	})).(*goja.Object)
}

// orUndefined is v, or undefined for a property that is not there.
func orUndefined(v goja.Value) goja.Value {
	if v == nil {
		return goja.Undefined()
	}
	return v
}

// unpin gives back the array-like where a builtin returned its Proxy.
func unpin(pins []pin, v goja.Value) goja.Value {
	if obj, ok := v.(*goja.Object); ok {
		for _, p := range pins {
			if p.proxy != nil && p.proxy == obj {
				return p.obj
			}
		}
	}
	return v
}
