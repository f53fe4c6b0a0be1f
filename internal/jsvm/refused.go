package jsvm

import (
	"strings"

	"github.com/evanw/esbuild/pkg/api"
)

// BigInt is switched off for app code: 2n ** 10n ** 11n and
// 1n << 10n ** 11n are each one operation that asks for gigabytes at
// once, in one native step that no deadline or memory limit can reach,
// and such a step can end the whole server, with every other app on it.
// A deployed module's BigInt literals are refused when it is compiled
// (refusedFeatures), those of code compiled from strings when it is
// (codegen.go); here the builtins that make BigInts are taken away.

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

// installRefusals takes away the builtins that make BigInts.
func installRefusals(vm *VM) error {
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
