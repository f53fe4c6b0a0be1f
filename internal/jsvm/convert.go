package jsvm

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dop251/goja"
)

// Documents arrive as JSON bytes and leave as JSON bytes, so the helpers
// here convert at that boundary. ParseJSON builds ordinary JS objects (own
// key order kept, identity stable, spread and mutation behave as users
// expect), where vm.ToValue of a decoded Go map would give a wrapper with
// random key order and a fresh object on every nested read.
// BenchmarkParseJSON compares the ways of doing it.

// ParseJSON parses data into plain JS values, exactly as JSON.parse would
// but several times faster (jsonparse.go); numbers too large for a float64
// are ±Infinity, as the spec says (goja's JSON.parse rejects them). Invalid JSON is a Go
// error, not a JS exception: the caller supplied it, not the user's code.
// Empty input is null.
func (vm *VM) ParseJSON(data []byte) (goja.Value, error) {
	if len(data) == 0 {
		return goja.Null(), nil
	}
	return vm.parseJSON(data)
}

// builtinParseJSON is goja's own JSON.parse, kept as the reference that
// tests and benchmarks hold ParseJSON to.
func (vm *VM) builtinParseJSON(data []byte) (goja.Value, error) {
	v, err := vm.jsonParse(goja.Undefined(), vm.ToValue(string(data)))
	if err != nil {
		var ex *goja.Exception
		if errors.As(err, &ex) {
			return nil, fmt.Errorf("jsvm: invalid JSON: %s", ex.Value())
		}
		return nil, err
	}
	return v, nil
}

// FromGo converts any JSON-marshalable Go value into plain JS values by
// way of JSON, so structs honour their json tags.
func (vm *VM) FromGo(x any) (goja.Value, error) {
	switch x := x.(type) {
	case nil:
		return goja.Null(), nil
	case json.RawMessage:
		return vm.ParseJSON(x)
	case string, bool, float64, int, int64:
		return vm.ToValue(x), nil
	}
	data, err := json.Marshal(x)
	if err != nil {
		return nil, err
	}
	return vm.ParseJSON(data)
}

// ToJSON serializes v with the runtime's JSON.stringify, so toJSON methods
// and JS semantics (undefined members dropped) apply. A value with no JSON
// form (undefined, a function) gives "null"; cycles are an error.
func (vm *VM) ToJSON(v goja.Value) ([]byte, error) {
	if v == nil {
		return []byte("null"), nil
	}
	ok, err := vm.toJSONFn(goja.Undefined(), v)
	out := vm.jsonOut
	vm.jsonOut = nil
	if err != nil {
		return nil, err
	}
	if !ok.ToBoolean() {
		return []byte("null"), nil
	}
	return out, nil
}

// Decode stores v in the Go value pointed to by dst, by way of JSON, so
// json tags and types are checked the usual way.
func (vm *VM) Decode(v goja.Value, dst any) error {
	data, err := vm.ToJSON(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, dst)
}
