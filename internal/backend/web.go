package backend

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	_ "embed"
	"errors"
	"fmt"
	"hash"
	"reflect"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/internal/jsvm"
)

// web.js defines the web globals of backend.js (Headers, Request,
// Response, fetch, TextEncoder, TextDecoder, crypto) in JavaScript, on
// top of the few host functions below that need Go: UTF-8, hashing,
// randomness and the network. It is compiled once and run in every new
// runtime.
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
		"hmac": rt.hostHMAC, "digest": rt.hostDigest, "equal": rt.hostEqual,
		"random": rt.hostRandom, "uuid": rt.hostUUID,
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

func newHash(name string) (func() hash.Hash, bool) {
	switch name {
	case "SHA-1":
		return sha1.New, true
	case "SHA-256":
		return sha256.New, true
	case "SHA-384":
		return sha512.New384, true
	case "SHA-512":
		return sha512.New, true
	}
	return nil, false
}

// hostHMAC(hash, key, data) → ArrayBuffer of the MAC.
func (rt *runtime) hostHMAC(fc goja.FunctionCall) goja.Value {
	h, ok := newHash(fc.Argument(0).String())
	if !ok {
		panic(rt.vm.NewTypeError("unsupported hash"))
	}
	m := hmac.New(h, bytesArg(rt.vm, fc.Argument(1)))
	m.Write(bytesArg(rt.vm, fc.Argument(2)))
	return rt.vm.ToValue(rt.vm.NewArrayBuffer(m.Sum(nil)))
}

// hostDigest(hash, data) → ArrayBuffer of the digest.
func (rt *runtime) hostDigest(fc goja.FunctionCall) goja.Value {
	h, ok := newHash(fc.Argument(0).String())
	if !ok {
		panic(rt.vm.NewTypeError("unsupported hash"))
	}
	d := h()
	d.Write(bytesArg(rt.vm, fc.Argument(1)))
	return rt.vm.ToValue(rt.vm.NewArrayBuffer(d.Sum(nil)))
}

// hostEqual(a, b) compares in time that does not depend on where they
// differ, so a signature check leaks nothing about the right signature.
func (rt *runtime) hostEqual(fc goja.FunctionCall) goja.Value {
	return rt.vm.ToValue(subtle.ConstantTimeCompare(bytesArg(rt.vm, fc.Argument(0)), bytesArg(rt.vm, fc.Argument(1))) == 1)
}

// hostRandom(n) → ArrayBuffer of n random bytes (n ≤ 65536, checked in JS).
func (rt *runtime) hostRandom(fc goja.FunctionCall) goja.Value {
	n := fc.Argument(0).ToInteger()
	if n < 0 || n > 65536 {
		panic(rt.vm.NewTypeError("bad length"))
	}
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return rt.vm.ToValue(rt.vm.NewArrayBuffer(b))
}

// hostUUID() → a random (version 4) UUID.
func (rt *runtime) hostUUID(goja.FunctionCall) goja.Value {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return rt.vm.ToValue(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
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
