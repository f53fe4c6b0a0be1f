package jsvm

import (
	"encoding/base64"
	"strings"
	"unicode/utf16"

	"github.com/dop251/goja"
)

// installBase64 defines atob and btoa, with Node's checks and messages:
// a string whose characters are not all Latin-1 (btoa) or not forgiving
// base64 (atob) throws a DOMException named InvalidCharacterError.
func installBase64(vm *VM) error {
	if err := defineGlobal(vm, "atob", vm.atob); err != nil {
		return err
	}
	return defineGlobal(vm, "btoa", vm.btoa)
}

// base64Units reads a string argument as UTF-16 code units, after
// sizing what the call will allocate for it.
func (vm *VM) base64Units(c goja.FunctionCall, what string) []uint16 {
	if len(c.Arguments) == 0 {
		e := vm.NewTypeError(`The "input" argument must be specified`)
		_ = e.Set("code", "ERR_MISSING_ARGS")
		panic(e)
	}
	s := c.Argument(0).ToString()
	str, ok := s.(goja.String)
	if !ok {
		return utf16.Encode([]rune(s.String()))
	}
	n := str.Length()
	// The units, the result in Go and the result in the runtime.
	vm.charge(float64(n)*6, what)
	units := make([]uint16, n)
	for i := range units {
		units[i] = str.CharAt(i)
	}
	return units
}

func (vm *VM) btoa(c goja.FunctionCall) goja.Value {
	units := vm.base64Units(c, "btoa")
	b := make([]byte, len(units))
	for i, u := range units {
		if u > 0xFF {
			panic(vm.domException("InvalidCharacterError", "Invalid character"))
		}
		b[i] = byte(u)
	}
	return vm.ToValue(base64.StdEncoding.EncodeToString(b))
}

// isBase64Space is the ASCII whitespace forgiving base64 skips.
func isBase64Space(u uint16) bool {
	return u == '\t' || u == '\n' || u == '\f' || u == '\r' || u == ' '
}

func isBase64Char(u uint16) bool {
	return u >= 'A' && u <= 'Z' || u >= 'a' && u <= 'z' || u >= '0' && u <= '9' || u == '+' || u == '/'
}

// atob follows Node 20's checks, which pick the message: "Invalid
// character" for a character outside the alphabet or a misplaced "=",
// "not correctly encoded" for a length that leaves one character over.
func (vm *VM) atob(c goja.FunctionCall) goja.Value {
	units := vm.base64Units(c, "atob")
	invalid := func() { panic(vm.domException("InvalidCharacterError", "Invalid character")) }
	var data strings.Builder
	data.Grow(len(units))
	count, equals := 0, 0
	for _, u := range units {
		switch {
		case isBase64Space(u):
			continue
		case u == '=':
			equals++
			if equals > 2 {
				invalid()
			}
		case isBase64Char(u):
			if equals > 0 {
				invalid()
			}
			data.WriteByte(byte(u))
		default:
			invalid()
		}
		count++
	}
	rem := count % 4
	if rem == 0 {
		rem = (count - equals) % 4
	} else if equals > 0 {
		invalid()
	}
	if rem == 1 {
		panic(vm.domException("InvalidCharacterError", "The string to be decoded is not correctly encoded."))
	}
	b, err := base64.RawStdEncoding.DecodeString(data.String())
	if err != nil {
		panic(vm.domException("InvalidCharacterError", "The string to be decoded is not correctly encoded."))
	}
	out := make([]rune, len(b))
	for i, x := range b {
		out[i] = rune(x) // Latin-1
	}
	return vm.ToValue(string(out))
}
