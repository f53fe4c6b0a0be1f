package jsvm

import (
	"strconv"

	"github.com/dop251/goja"
)

// guardProxy checks what a Proxy's ownKeys trap returns before goja reads
// it. goja reads a hole in the list as a nil value and crashes on it (a
// nil pointer, which kills the process: `ownKeys: () => [,]`), and walks
// the list's claimed length natively, so {length: 4e9} ran for minutes.
// The trap's result is copied into a dense array here, holes becoming
// undefined, which goja then rejects with the spec's TypeError. The
// handler the proxy gets reads each trap from the script's when it is
// used and calls it with the script's handler as this, so traps and later
// changes to the handler behave as they would.
func (vm *VM) guardProxy() error {
	rt := vm.Runtime
	target, ok := rt.Get("Proxy").(*goja.Object)
	if !ok {
		return nil
	}
	ctor, ok := goja.AssertConstructor(target)
	if !ok {
		return nil
	}
	g := vm.heapGuard()
	keyList := func(v goja.Value) goja.Value {
		obj, ok := v.(*goja.Object)
		if !ok {
			return v // goja throws the TypeError
		}
		n := lengthOf(obj)
		if g != nil && g.over(n*64) {
			return rt.NewArray()
		}
		keys := make([]any, 0, int(min(n, 1<<16)))
		for i := 0; float64(i) < n; i++ {
			if i%4096 == 4095 {
				vm.checkStop()
			}
			k := obj.Get(strconv.Itoa(i))
			if k == nil {
				k = goja.Undefined()
			}
			keys = append(keys, k)
		}
		return rt.NewArray(keys...)
	}
	handlerFor := func(v goja.Value) goja.Value {
		user, ok := v.(*goja.Object)
		if !ok {
			return v
		}
		h := rt.NewObject()
		if err := h.SetPrototype(user); err != nil {
			panic(err)
		}
		// Every trap is read from the script's handler when goja asks
		// for it, and called with that handler as this, as a Proxy's
		// own would be: only what ownKeys returns is looked at.
		for _, name := range proxyTraps {
			getter := rt.ToValue(func(goja.FunctionCall) goja.Value {
				trap := user.Get(name)
				fn, ok := goja.AssertFunction(trap)
				if !ok {
					return trap // absent, or not a function: goja decides
				}
				return rt.ToValue(func(c goja.FunctionCall) goja.Value {
					v := mustCall(fn, user, c.Arguments...)
					if name == "ownKeys" {
						return keyList(v)
					}
					return v
				})
			})
			if err := h.DefineAccessorProperty(name, getter, nil, goja.FLAG_FALSE, goja.FLAG_TRUE); err != nil {
				panic(err)
			}
		}
		return h
	}
	// withHandler is a constructor's arguments with the handler replaced.
	withHandler := func(args []goja.Value) []goja.Value {
		if len(args) < 2 {
			return args
		}
		return append([]goja.Value{args[0], handlerFor(args[1])}, args[2:]...)
	}
	proxy := rt.NewProxy(target, &goja.ProxyTrapConfig{
		Construct: func(_ *goja.Object, args []goja.Value, newTarget *goja.Object) *goja.Object {
			obj, err := ctor(newTarget, withHandler(args)...)
			if err != nil {
				panic(err)
			}
			return obj
		},
	})
	if err := vm.replaceMethod(target, "revocable", func(revocable goja.Callable) func(goja.FunctionCall) goja.Value {
		return func(c goja.FunctionCall) goja.Value { return mustCall(revocable, c.This, withHandler(c.Arguments)...) }
	}); err != nil {
		return err
	}
	return rt.Set("Proxy", proxy)
}

// proxyTraps are the traps a Proxy handler may have.
var proxyTraps = []string{
	"getPrototypeOf", "setPrototypeOf", "isExtensible", "preventExtensions", "getOwnPropertyDescriptor",
	"defineProperty", "has", "get", "set", "deleteProperty", "ownKeys", "apply", "construct",
}
