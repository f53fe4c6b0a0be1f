package jsvm

import (
	_ "embed"

	"github.com/dop251/goja"
)

//go:embed web/domexception.js
var domExceptionJS string

var domExceptionProgram = webScript("domexception.js", domExceptionJS)

// installDOMException defines DOMException, which the other families
// throw (AbortError, DataCloneError, InvalidCharacterError, ...).
func installDOMException(vm *VM) error {
	if _, err := runWebScript(vm, domExceptionProgram(), nil); err != nil {
		return err
	}
	vm.web.domException = vm.Get("DOMException")
	return nil
}

// domException makes a DOMException with the original constructor,
// whatever user code did to the global since.
func (vm *VM) domException(name, message string) goja.Value {
	ctor, ok := goja.AssertConstructor(vm.web.domException)
	if !ok {
		return vm.NewTypeError(message)
	}
	obj, err := ctor(nil, vm.ToValue(message), vm.ToValue(name))
	if err != nil {
		panic(err)
	}
	return obj
}
