package jsvm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// testVM is a bare runtime with the module-less defaults, for tests of
// the converters that need no pool.
func testVM(t testing.TB) *VM {
	t.Helper()
	prog, err := Compile("test.js", "")
	if err != nil {
		t.Fatal(err)
	}
	vm, err := newVM(prog, ptr(Options{}.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(vm.retire)
	return vm
}

var validJSON = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `1.5`, `-1.5e-3`, `1E+2`, `1e308`, `123456789012345`,
	`1234567890123456`, `12345678901234567890`, `9007199254740993`, `0.1`, `""`, `"plain"`, `"a\"b\\c\/d"`,
	`"\b\f\n\r\t"`, `"\u0041\u00e9\u4e2d"`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00x"`, `"\ud800\u0041"`, `"\ud800\ud800\udc00"`, `"é中😀"`, `[]`, `{}`, ` [ 1 , 2 ] `, "\t{\n\"a\"\r:1}\n",
	`{"a":1,"a":2}`, `{"__proto__":{"polluted":true},"x":1}`, `{"constructor":1,"toString":2,"hasOwnProperty":3}`,
	`[[[[[]]]]]`, `{"a":{"b":{"c":[1,{"d":null}]}}}`, `{"":"empty key"}`, `{"k\u0041y":"escaped key"}`,
	`"a very long string value that is longer than the cache limit of sixteen bytes"`, `["pending","pending","done"]`,
	string(benchDoc),
}

var invalidJSON = []string{
	``, ` `, `{"a":1,}`, `[1,]`, `01`, `1.`, `.5`, `-`, `+1`, `"\x"`, `"a`, `{"a" 1}`, `{"a":}`, `nul`, `truth`, `[1 2]`,
	"\"\t\"", `1 2`, `{'a':1}`, `NaN`, `Infinity`, `"\u12"`, `"\u12zz"`, `{1:2}`, `[`, `{`, `{"a":1`, `]`, `1e`, `1e+`,
	`-01`, `"abc\`, `[1,,2]`,
}

// TestParseJSONMatchesBuiltin checks the fast parser against goja's own
// JSON.parse: same accepted inputs, same values.
func TestParseJSONMatchesBuiltin(t *testing.T) {
	vm := testVM(t)
	for _, in := range validJSON {
		want, err := vm.builtinParseJSON([]byte(in))
		if err != nil {
			t.Fatalf("builtin rejects %q: %v", in, err)
		}
		got, err := vm.parseJSON([]byte(in))
		if err != nil {
			t.Errorf("ParseJSON(%q): %v", in, err)
			continue
		}
		if g, w := stringify(t, vm, got), stringify(t, vm, want); g != w {
			t.Errorf("ParseJSON(%q) = %s, JSON.parse gives %s", in, g, w)
		}
	}
	for _, in := range invalidJSON {
		if _, err := vm.ParseJSON([]byte(in)); err == nil && in != "" {
			t.Errorf("ParseJSON(%q) accepted invalid JSON", in)
		} else if err != nil && !strings.Contains(err.Error(), "invalid JSON") {
			t.Errorf("ParseJSON(%q) error %q does not say invalid JSON", in, err)
		}
		if _, err := vm.builtinParseJSON([]byte(in)); err == nil {
			t.Errorf("the builtin accepts %q, so should we", in)
		}
	}
}

func stringify(t testing.TB, vm *VM, v goja.Value) string {
	b, err := vm.ToJSON(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseJSONSemantics(t *testing.T) {
	vm := testVM(t)
	check := func(in, expr, want string) {
		t.Helper()
		v, err := vm.ParseJSON([]byte(in))
		if err != nil {
			t.Fatal(err)
		}
		fn, err := vm.RunString("(function (x) { return " + expr + " })")
		if err != nil {
			t.Fatal(err)
		}
		call, _ := goja.AssertFunction(fn)
		got, err := call(goja.Undefined(), v)
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != want {
			t.Errorf("%s with x=%s: got %s, want %s", expr, in, got, want)
		}
	}
	// __proto__ is an own property, not a prototype change.
	check(`{"__proto__":{"polluted":true}}`, `[Object.getPrototypeOf(x) === Object.prototype, x.polluted, Object.keys(x).join()].join()`, "true,,__proto__")
	check(`-0`, `1 / x`, "-Infinity")
	check(`1e400`, `x`, "Infinity")
	check(`{"a":1,"a":2,"b":3}`, `Object.keys(x).join() + x.a`, "a,b2")
	check(`"\ud83d\ude00"`, `x.length + ":" + x.codePointAt(0)`, "2:128512")
	check(`"\ud800\u0041"`, `x.length + ":" + x.charCodeAt(0) + x[1]`, "2:65533A") // unpaired, as goja's JSON.parse
	check(`[1e400, -1e400]`, `x.join()`, "Infinity,-Infinity")                     // the spec's answer
	check(`[1,"a",null]`, `Array.isArray(x) && x.length`, "3")
	// Cached short strings are shared, and must behave as fresh ones.
	check(`["pending","pending"]`, `x[0] === x[1] && typeof x[0]`, "string")
}

func TestParseJSONLimitsDepth(t *testing.T) {
	vm := testVM(t)
	deep := strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1)
	if _, err := vm.ParseJSON([]byte(deep)); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Fatalf("got %v", err)
	}
	ok := strings.Repeat("[", maxJSONDepth) + strings.Repeat("]", maxJSONDepth)
	if _, err := vm.ParseJSON([]byte(ok)); err != nil {
		t.Fatal(err)
	}
}

func TestParseJSONCachesStayBounded(t *testing.T) {
	vm := testVM(t)
	for i := range 3 * maxStringCache {
		doc, _ := json.Marshal(map[string]string{strings.Repeat("k", i%50) + string(rune('a'+i%26)): string(rune('a'+i%26)) + strings.Repeat("v", i%10)})
		if _, err := vm.ParseJSON(doc); err != nil {
			t.Fatal(err)
		}
	}
	if len(vm.keys) > maxStringCache || len(vm.strs) > maxStringCache {
		t.Fatalf("caches grew to %d keys, %d strings", len(vm.keys), len(vm.strs))
	}
}

// FuzzParseJSON holds the fast parser to JSON.parse on arbitrary input:
// it accepts exactly what the builtin accepts (within the depth limit) and
// builds the same value.
//
//	go test -run '^$' -fuzz FuzzParseJSON -fuzztime 30s ./jsvm
func FuzzParseJSON(f *testing.F) {
	for _, s := range append(validJSON, invalidJSON...) {
		f.Add([]byte(s))
	}
	vm := testVM(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) == 0 {
			return
		}
		got, err := vm.ParseJSON(data)
		want, werr := vm.builtinParseJSON(data)
		if werr != nil && strings.Contains(werr.Error(), "cannot unmarshal number") {
			return // goja rejects out-of-range numbers; we give ±Infinity like the spec
		}
		if err != nil {
			if werr == nil && !strings.Contains(err.Error(), "nested deeper") {
				t.Fatalf("ParseJSON rejects %q (%v), JSON.parse accepts it", data, err)
			}
			return
		}
		if werr != nil {
			t.Fatalf("ParseJSON accepts %q, JSON.parse rejects it: %v", data, werr)
		}
		if g, w := stringify(t, vm, got), stringify(t, vm, want); g != w {
			t.Fatalf("ParseJSON(%q) = %s, JSON.parse gives %s", data, g, w)
		}
	})
}
