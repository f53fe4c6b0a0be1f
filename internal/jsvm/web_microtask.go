package jsvm

import (
	"fmt"

	"github.com/dop251/goja"
)

// installMicrotask defines queueMicrotask(callback). The callback runs as
// a promise reaction, in the same queue as awaits and then-callbacks, so
// an exception it throws is reported as an unhandled rejection would be.
func installMicrotask(vm *VM) error {
	proto := vm.Get("Promise").ToObject(vm.Runtime).Get("prototype").ToObject(vm.Runtime)
	then, ok := goja.AssertFunction(proto.Get("then"))
	if !ok {
		return fmt.Errorf("Promise.prototype.then is missing")
	}
	fn := vm.ToValue(func(c goja.FunctionCall) goja.Value {
		cb, ok := goja.AssertFunction(c.Argument(0))
		if !ok {
			e := vm.NewTypeError(fmt.Sprintf(`The "callback" argument must be of type function. Received %s`, received(c.Argument(0))))
			_ = e.Set("code", "ERR_INVALID_ARG_TYPE")
			panic(e)
		}
		p, resolve, _ := vm.NewPromise()
		if err := resolve(goja.Undefined()); err != nil {
			panic(err)
		}
		job := vm.ToValue(func(goja.FunctionCall) goja.Value {
			mustCall(cb, goja.Undefined())
			return goja.Undefined()
		})
		mustCall(then, vm.ToValue(p), job)
		return goja.Undefined()
	}).(*goja.Object)
	for k, v := range map[string]any{"name": "queueMicrotask", "length": 1} {
		if err := fn.DefineDataProperty(k, vm.ToValue(v), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return err
		}
	}
	return defineGlobal(vm, "queueMicrotask", fn)
}

// received describes a wrong argument as Node's ERR_INVALID_ARG_TYPE does.
func received(v goja.Value) string {
	switch t := TypeOf(v); t {
	case "undefined", "null":
		return t
	case "object":
		if _, ok := goja.AssertFunction(v); ok {
			return "function"
		}
		return "an instance of Object"
	case "string":
		s := v.String()
		if len(s) > 25 {
			s = s[:25] + "..."
		}
		return fmt.Sprintf("type string ('%s')", s)
	default:
		return fmt.Sprintf("type %s (%s)", t, v.String())
	}
}
