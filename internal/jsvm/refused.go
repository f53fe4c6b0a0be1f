package jsvm

import (
	"fmt"
	"strings"

	"github.com/dop251/goja"
	"github.com/evanw/esbuild/pkg/api"
)

// Two parts of the language are switched off for app code. Each runs
// natively in one step that no deadline or memory limit can reach, and
// such a step can end the whole server, with every other app on it:
//
//   - Code from strings: eval, new Function and the async and generator
//     function constructors. goja's parser recurses once per nesting level,
//     so eval("[".repeat(1e6)) overflows the Go stack, which is fatal.
//     Code compiled at run time would also skip what a deploy checks.
//   - BigInt: 2n ** 10n ** 11n and 1n << 10n ** 11n are each one
//     operation that asks for gigabytes at once.
//
// A deployed module's BigInt literals are refused when it is compiled
// (refusedFeatures); here the builtins that compile strings or make
// BigInts are taken away.

// refusedFeatures are the esbuild features a module may not use. esbuild
// only warns of a BigInt literal it cannot lower (not at all inside a try
// block), so Refusals makes that message an error, with the user's line
// and column.
var refusedFeatures = map[string]bool{"bigint": false}

// Refusals are the esbuild messages that must fail a compile or a bundle.
func Refusals() map[string]api.LogLevel {
	return map[string]api.LogLevel{"bigint": api.LogLevelError}
}

// bigIntHint rewords esbuild's refusal of a BigInt literal.
func bigIntHint(text string) string {
	if strings.HasPrefix(text, "Big integer literals are not available") {
		return "BigInt is not available in app code: one BigInt operation can ask for gigabytes at once; use a number, or a string for integers beyond 2**53"
	}
	return text
}

// installRefusals takes away the builtins that compile strings or make
// BigInts; the constructors that would compile are replaced by ones that
// throw.
func installRefusals(vm *VM) error {
	rt := vm.Runtime
	global := rt.GlobalObject()
	// Taken now: the app's code may replace the global later.
	evalError := rt.Get("EvalError")
	refuseCodegen := func(what string) {
		vm.throw(evalError, fmt.Sprintf("%s is not available in app code: code is compiled once, at deploy, never from strings at run time; write the function in the module instead", what))
	}
	for _, name := range []string{"BigInt", "BigInt64Array", "BigUint64Array"} {
		if err := global.Delete(name); err != nil {
			return err
		}
	}
	dataView := rt.Get("DataView").ToObject(rt).Get("prototype").ToObject(rt)
	for _, name := range []string{"getBigInt64", "getBigUint64", "setBigInt64", "setBigUint64"} {
		if err := dataView.Delete(name); err != nil {
			return err
		}
	}

	// A refused constructor keeps the original's prototype, name and
	// length, so instanceof and Function.prototype work as before.
	// One string is answered, not compiled: Function("return this"), the
	// way lodash and many bundles find the global object.
	returnThis := rt.ToValue(func(goja.FunctionCall) goja.Value { return global }).(*goja.Object)
	refuse := func(orig *goja.Object, what string) (*goja.Object, error) {
		fn := rt.ToValue(func(c goja.ConstructorCall) *goja.Object {
			if what == "new Function" && len(c.Arguments) == 1 && goja.IsString(c.Arguments[0]) && c.Arguments[0].String() == "return this" {
				return returnThis
			}
			refuseCodegen(what)
			return nil
		}).(*goja.Object)
		copyIdentity(orig, fn)
		return fn, fn.Set("prototype", orig.Get("prototype"))
	}
	// A call of the refusing eval is never a direct eval: goja compares
	// the callee with its own eval, so the call reaches this function.
	eval := rt.Get("eval").ToObject(rt)
	noEval := rt.ToValue(func(c goja.FunctionCall) goja.Value {
		if len(c.Arguments) == 1 && goja.IsString(c.Arguments[0]) && c.Arguments[0].String() == "this" {
			return global // eval("this"), the same question
		}
		refuseCodegen("eval")
		return nil
	}).(*goja.Object)
	copyIdentity(eval, noEval)
	if err := global.DefineDataProperty("eval", noEval, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	function := rt.Get("Function").ToObject(rt)
	noFunction, err := refuse(function, "new Function")
	if err != nil {
		return err
	}
	if err := global.DefineDataProperty("Function", noFunction, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	if err := function.Get("prototype").ToObject(rt).DefineDataProperty("constructor", noFunction, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	// The other function constructors are reached only through their
	// prototypes' constructor property.
	for _, kind := range []struct{ src, what string }{
		{"(async function () {})", "the AsyncFunction constructor"},
		{"(function* () {})", "the GeneratorFunction constructor"},
	} {
		fn, err := rt.RunString(kind.src)
		if err != nil {
			return err
		}
		proto := fn.ToObject(rt).Prototype()
		ctor, ok := proto.Get("constructor").(*goja.Object)
		if !ok {
			continue
		}
		no, err := refuse(ctor, kind.what)
		if err != nil {
			return err
		}
		if err := proto.DefineDataProperty("constructor", no, goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return err
		}
	}
	return nil
}
