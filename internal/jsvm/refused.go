package jsvm

import (
	"github.com/evanw/esbuild/pkg/api"
)

// BigInt is there only for a runtime whose module names it, with its
// operators and builtins checked (bigint.go); any other runtime has no
// BigInt builtins, so no BigInt can be made there.

// refusedFeatures are the esbuild features a module may not use.
var refusedFeatures = map[string]bool{}

// Refusals are the esbuild messages that must fail a compile or a bundle.
func Refusals() map[string]api.LogLevel { return map[string]api.LogLevel{} }

// installRefusals takes away the builtins that make BigInts, or checks
// them for a module that uses them.
func installRefusals(vm *VM) error {
	if vm.prog.bigint {
		if err := installBigInt(vm); err != nil {
			return err
		}
		return installCodegen(vm)
	}
	rt := vm.Runtime
	global := rt.GlobalObject()
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
	return installCodegen(vm)
}
