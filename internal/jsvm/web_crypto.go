package jsvm

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	_ "embed"
	"fmt"
	"hash"
	"reflect"

	"github.com/dop251/goja"
)

//go:embed web/crypto.js
var cryptoJS string

var cryptoProgram = webScript("crypto.js", cryptoJS)

// installCrypto defines crypto and CryptoKey; the hashing and randomness
// are Go's.
func installCrypto(vm *VM) error {
	_, err := runWebScript(vm, cryptoProgram(), map[string]any{
		"encode": vm.cryptoEncode, "hmac": vm.cryptoHMAC, "digest": vm.cryptoDigest,
		"equal": vm.cryptoEqual, "random": vm.cryptoRandom, "uuid": vm.cryptoUUID,
	})
	return err
}

var bytesType = reflect.TypeFor[[]byte]()

// bytesArg reads a Uint8Array argument that crypto.js normalised. The
// slice shares the runtime's memory.
func (vm *VM) bytesArg(v goja.Value) []byte {
	if v.ExportType() == bytesType {
		return v.Export().([]byte)
	}
	panic(vm.NewTypeError("expected a Uint8Array"))
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

// hashChunk is how much is hashed between two looks at the stop flag, so
// hashing the largest buffer a call can hold still stops with the call.
const hashChunk = 1 << 20

func (vm *VM) hashInto(h hash.Hash, b []byte) {
	for len(b) > 0 {
		vm.checkStop()
		n := min(len(b), hashChunk)
		h.Write(b[:n])
		b = b[n:]
	}
}

// cryptoEncode(string) → ArrayBuffer of its UTF-8.
func (vm *VM) cryptoEncode(c goja.FunctionCall) goja.Value {
	vm.charge(float64(strLen(c.Argument(0)))*6, "encoding a string this long")
	return vm.ToValue(vm.NewArrayBuffer([]byte(c.Argument(0).String())))
}

// cryptoHMAC(hash, key, data) → ArrayBuffer of the MAC.
func (vm *VM) cryptoHMAC(c goja.FunctionCall) goja.Value {
	h, ok := newHash(c.Argument(0).String())
	if !ok {
		panic(vm.NewTypeError("unsupported hash"))
	}
	m := hmac.New(h, vm.bytesArg(c.Argument(1)))
	vm.hashInto(m, vm.bytesArg(c.Argument(2)))
	return vm.ToValue(vm.NewArrayBuffer(m.Sum(nil)))
}

// cryptoDigest(hash, data) → ArrayBuffer of the digest.
func (vm *VM) cryptoDigest(c goja.FunctionCall) goja.Value {
	h, ok := newHash(c.Argument(0).String())
	if !ok {
		panic(vm.NewTypeError("unsupported hash"))
	}
	d := h()
	vm.hashInto(d, vm.bytesArg(c.Argument(1)))
	return vm.ToValue(vm.NewArrayBuffer(d.Sum(nil)))
}

// cryptoEqual(a, b) compares in time that does not depend on where they
// differ, so a signature check leaks nothing about the right signature.
func (vm *VM) cryptoEqual(c goja.FunctionCall) goja.Value {
	return vm.ToValue(subtle.ConstantTimeCompare(vm.bytesArg(c.Argument(0)), vm.bytesArg(c.Argument(1))) == 1)
}

// cryptoRandom(n) → ArrayBuffer of n random bytes (n ≤ 65536, checked in
// JS and again here).
func (vm *VM) cryptoRandom(c goja.FunctionCall) goja.Value {
	n := c.Argument(0).ToInteger()
	if n < 0 || n > 65536 {
		panic(vm.NewTypeError("bad length"))
	}
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return vm.ToValue(vm.NewArrayBuffer(b))
}

// cryptoUUID() → a random (version 4) UUID.
func (vm *VM) cryptoUUID(goja.FunctionCall) goja.Value {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return vm.ToValue(fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]))
}
