package jsvm

import (
	"fmt"
	"sync"
	"time"

	"github.com/dop251/goja"
)

// The common server-side web API (WinterTC's minimum common API, as
// Workers, Deno, Bun and Node share it), for access.js and backend.js
// alike. Each family has its own install function and file:
//
//	DOMException                  web_domexception.go, web/domexception.js
//	Event, EventTarget,
//	AbortController, AbortSignal  web_events.go, web/events.js
//	URL, URLSearchParams          web_url.go, web/url.js
//	structuredClone               web_clone.go, web/clone.js
//	atob, btoa                    web_base64.go
//	queueMicrotask                web_microtask.go
//	performance                   web_performance.go
//	crypto, CryptoKey             web_crypto.go, web/crypto.js
//
// The JavaScript halves run under the call's deadline and heap watch like
// any app code; the Go halves work on one string or buffer at a time and
// size what they allocate first (charge), so no host step is unbounded.

// webOriginals are what the Go halves of the web API use, taken before
// user code runs.
type webOriginals struct {
	domException goja.Value
	perfOrigin   time.Time // performance.timeOrigin
}

// WebOptions choose the parts of the web API that depend on the host.
type WebOptions struct {
	// Timers says the host installed setTimeout and clearTimeout, so
	// AbortSignal.timeout exists and runs on them. access.js has none.
	Timers bool
}

// InstallWeb installs the web API in vm. Hosts call it from
// Options.Setup, before their own globals that build on it (backend.js's
// fetch), and after their timers.
func InstallWeb(vm *VM, o WebOptions) error {
	for _, f := range []struct {
		name    string
		install func() error
	}{
		{"DOMException", func() error { return installDOMException(vm) }},
		{"EventTarget", func() error { return installEvents(vm, o) }},
		{"URL", func() error { return installURL(vm) }},
		{"structuredClone", func() error { return installStructuredClone(vm) }},
		{"atob", func() error { return installBase64(vm) }},
		{"queueMicrotask", func() error { return installMicrotask(vm) }},
		{"performance", func() error { return installPerformance(vm) }},
		{"crypto", func() error { return installCrypto(vm) }},
	} {
		if err := f.install(); err != nil {
			return fmt.Errorf("jsvm: installing %s: %w", f.name, err)
		}
	}
	return nil
}

// webScript compiles an embedded web/*.js file once per process: each is
// one function expression that takes the Go host functions and installs
// its globals.
func webScript(name, src string) func() *goja.Program {
	return sync.OnceValue(func() *goja.Program { return goja.MustCompile("handoff:"+name, src, true) })
}

// runWebScript runs prog's function with host (Go functions by name) and
// returns what it returns.
func runWebScript(vm *VM, prog *goja.Program, host map[string]any) (goja.Value, error) {
	f, err := vm.RunProgram(prog)
	if err != nil {
		return nil, err
	}
	install, ok := goja.AssertFunction(f)
	if !ok {
		return nil, fmt.Errorf("a web script did not evaluate to a function")
	}
	h := vm.NewObject()
	for name, fn := range host {
		if err := h.Set(name, fn); err != nil {
			return nil, err
		}
	}
	return install(goja.Undefined(), h)
}

// defineGlobal adds a global as the web platform's are: writable,
// configurable, not enumerable.
func defineGlobal(vm *VM, name string, v any) error {
	return vm.GlobalObject().DefineDataProperty(name, vm.ToValue(v), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// charge fails the running call before a host function allocates about
// size bytes that the heap limit cannot afford: the allocation guard
// stops the call, and the RangeError keeps this step from going on.
func (vm *VM) charge(size float64, what string) {
	if g := vm.heapGuard(); g != nil && g.over(size) {
		vm.throw(vm.builtins.rangeError, what+" would exceed the heap limit")
	}
}
