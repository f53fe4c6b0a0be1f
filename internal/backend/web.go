package backend

import (
	_ "embed"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/internal/jsvm"
)

// web.js defines the web globals of backend.js (Headers, Request,
// Response, fetch, TextEncoder, TextDecoder) in JavaScript, on top of the
// few host functions below that need Go: UTF-8 and the network. The rest
// of the web API (URL, crypto, ...) is jsvm.InstallWeb's. It is compiled
// once and run in every new runtime.
//
//go:embed web.js
var webJS string

// webProgram is compiled on first use, not at start: every CLI command
// starts this binary, and most never run a handler.
var webProgram = sync.OnceValue(func() *goja.Program { return goja.MustCompile("handoff:web.js", webJS, true) })

// webKey is the jsvm.VM.Memo key of a runtime's *web.
type webKey struct{}

// web holds what web.js hands back to Go.
type web struct {
	makeRequest goja.Callable // (method, url, path, query, headers, body) → Request
	toWire      goja.Callable // (handler's return value) → {status, headers, body}
}

// installWeb runs web.js in rt's runtime.
func (rt *runtime) installWeb() error {
	vm := rt.vm
	host := vm.NewObject()
	for name, fn := range map[string]func(goja.FunctionCall) goja.Value{
		"encode": rt.hostEncode, "decode": rt.hostDecode,
		"fetch": rt.hostFetch,
	} {
		if err := host.Set(name, fn); err != nil {
			return err
		}
	}
	f, err := vm.RunProgram(webProgram())
	if err != nil {
		return fmt.Errorf("backend: loading web.js: %w", err)
	}
	install, ok := goja.AssertFunction(f)
	if !ok {
		return errors.New("backend: web.js is not a function")
	}
	res, err := install(goja.Undefined(), host)
	if err != nil {
		return fmt.Errorf("backend: installing web.js: %w", err)
	}
	o := res.ToObject(vm.Runtime)
	w := &web{}
	if w.makeRequest, ok = goja.AssertFunction(o.Get("makeRequest")); !ok {
		return errors.New("backend: web.js has no makeRequest")
	}
	if w.toWire, ok = goja.AssertFunction(o.Get("toWire")); !ok {
		return errors.New("backend: web.js has no toWire")
	}
	_, err = vm.Memo(webKey{}, func(vm *jsvm.VM) (goja.Value, error) { return vm.ToValue(w), nil })
	return err
}

// webOf returns the runtime's web.js helpers.
func webOf(vm *jsvm.VM) (*web, error) {
	v, err := vm.Memo(webKey{}, func(*jsvm.VM) (goja.Value, error) {
		return nil, errors.New("backend: runtime has no web.js")
	})
	if err != nil {
		return nil, err
	}
	return v.Export().(*web), nil
}

// bytesType is what a Uint8Array exports as. Checking it first spares
// exporting anything else, which for an array can ask for any amount of
// memory (jsvm.Export).
var bytesType = reflect.TypeFor[[]byte]()

// bytesArg reads a Uint8Array argument that web.js normalised. The slice
// shares the runtime's memory: copy it before it leaves the call.
func bytesArg(vm *jsvm.VM, v goja.Value) []byte {
	if v.ExportType() == bytesType {
		return v.Export().([]byte)
	}
	panic(vm.NewTypeError("expected a Uint8Array"))
}

// hostEncode(string) → ArrayBuffer of its UTF-8 (lone surrogates become
// U+FFFD, as TextEncoder does).
func (rt *runtime) hostEncode(fc goja.FunctionCall) goja.Value {
	return rt.vm.ToValue(rt.vm.NewArrayBuffer([]byte(fc.Argument(0).String())))
}

// hostDecode(bytes, fatal) → string. Invalid UTF-8 becomes U+FFFD, or a
// TypeError when fatal; a leading byte order mark is dropped.
func (rt *runtime) hostDecode(fc goja.FunctionCall) goja.Value {
	b := bytesArg(rt.vm, fc.Argument(0))
	s := strings.TrimPrefix(string(b), "\uFEFF")
	if !utf8.ValidString(s) {
		if fc.Argument(1).ToBoolean() {
			panic(rt.vm.NewTypeError("the data is not valid UTF-8"))
		}
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	return rt.vm.ToValue(s)
}

// maxHeaders bounds the headers of one request or response, well within
// what jsvm.Export reads of a list.
const maxHeaders = 1000

// pairs reads an array of [name, value] string pairs.
func pairs(v goja.Value) ([][2]string, error) {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return nil, nil
	}
	if obj, ok := v.(*goja.Object); ok && obj.ClassName() == "Array" {
		if n := obj.Get("length").ToInteger(); n > maxHeaders {
			return nil, fmt.Errorf("%d headers; send at most %d", n, maxHeaders)
		}
	}
	list, ok := jsvm.Export(v).([]any)
	if !ok {
		return nil, errors.New("expected an array of [name, value] pairs")
	}
	out := make([][2]string, 0, len(list))
	for _, item := range list {
		p, ok := item.([]any)
		if !ok || len(p) != 2 {
			return nil, errors.New("expected [name, value] pairs")
		}
		k, ok1 := p[0].(string)
		val, ok2 := p[1].(string)
		if !ok1 || !ok2 {
			return nil, errors.New("header names and values must be strings")
		}
		out = append(out, [2]string{k, val})
	}
	return out, nil
}

// pairsValue makes a JS array of [name, value] pairs.
func pairsValue(vm *jsvm.VM, ps [][2]string) goja.Value {
	items := make([]any, len(ps))
	for i, p := range ps {
		items[i] = vm.NewArray(p[0], p[1])
	}
	return vm.NewArray(items...)
}
