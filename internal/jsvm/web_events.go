package jsvm

import (
	_ "embed"
	"errors"

	"github.com/dop251/goja"
)

//go:embed web/events.js
var eventsJS string

var eventsProgram = webScript("events.js", eventsJS)

// installEvents defines Event, EventTarget, AbortController and
// AbortSignal. AbortSignal.timeout exists only where the host has timers;
// it takes the host's setTimeout now, before user code could replace it.
func installEvents(vm *VM, o WebOptions) error {
	host := map[string]any{"now": vm.perfNow}
	if o.Timers {
		st := vm.Get("setTimeout")
		if _, ok := goja.AssertFunction(st); !ok {
			return errors.New("WebOptions.Timers is set but setTimeout is not installed")
		}
		host["setTimeout"] = st
	}
	_, err := runWebScript(vm, eventsProgram(), host)
	return err
}
