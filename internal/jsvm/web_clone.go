package jsvm

import (
	_ "embed"

	"github.com/dop251/goja"
)

//go:embed web/clone.js
var cloneJS string

var cloneProgram = webScript("clone.js", cloneJS)

// installStructuredClone defines structuredClone. The walk is JavaScript,
// under the call's deadline and heap watch; Go only tells the kinds that
// JavaScript cannot: a Proxy, a Promise, an Error, an Array.
func installStructuredClone(vm *VM) error {
	_, err := runWebScript(vm, cloneProgram(), map[string]any{"kind": cloneKind})
	return err
}

func cloneKind(v goja.Value) string {
	obj, ok := v.(*goja.Object)
	if !ok {
		return ""
	}
	switch obj.ExportType() {
	case proxyType:
		return "proxy"
	case promiseType:
		return "promise"
	}
	switch obj.ClassName() {
	case "Error":
		return "error"
	case "Array":
		return "array"
	}
	return ""
}
