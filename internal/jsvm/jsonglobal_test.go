package jsvm

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// jsonCases are expressions whose JSON.parse and JSON.stringify results
// must match goja's own builtins, which follow the spec on all of them.
var jsonCases = []string{
	`JSON.stringify({a: 1, b: [1, "x", null, true, false], c: {d: -0, e: 1.5e300, f: NaN, g: Infinity}})`,
	`JSON.stringify({u: undefined, f() {}, s: Symbol("x"), n: null})`,
	`JSON.stringify([undefined, function () {}, Symbol("y")])`,
	`JSON.stringify({2: "b", 1: "a", z: 1, y: 2, "10": 3})`,
	`JSON.stringify("quote \" backslash \\ \n \t \r \b \f \u0001 \u001f é 😀")`,
	`JSON.stringify("lone \ud800 and \udc00 and pair \ud83d\ude00")`,
	`JSON.stringify({["k\udc00"]: 1, ok: {["\ud800"]: [2]}, "\ufffd": 3})`,
	`JSON.stringify({a: [1, {b: 2}], c: "x"}, null, 2)`,
	`JSON.stringify({a: [1, {b: 2}], c: [], d: {}}, null, "--")`,
	`JSON.stringify({a: 1}, null, "0123456789abc")`,
	`JSON.stringify({a: [1]}, null, 20)`,
	`JSON.stringify({a: [1]}, null, new Number(3))`,
	`JSON.stringify({a: [1]}, null, new String("\t"))`,
	`JSON.stringify({a: 1, b: 2, c: {a: 3, d: 4}}, ["a", "c", 1, new String("c")])`,
	`JSON.stringify({a: 1, b: "x", c: [1, 2]}, function (k, v) { return typeof v === "number" ? v * 10 : v })`,
	`JSON.stringify({a: 1, b: 2}, function (k, v) { return k === "a" ? undefined : v })`,
	`JSON.stringify({d: new Date(0), t: {toJSON(k) { return "key:" + k }}})`,
	`JSON.stringify([new Number(1), new String("s"), new Boolean(false), Object(true)])`,
	`JSON.stringify(undefined)`,
	`JSON.stringify(function () {})`,
	`JSON.stringify(null)`,
	`JSON.stringify(7)`,
	`JSON.stringify(Object.create({inherited: 1}, {own: {value: 2, enumerable: true}, hidden: {value: 3}}))`,
	`JSON.stringify(new Map([[1, 2]]))`,
	`JSON.stringify([,1,,])`,
	`JSON.stringify({a: {b: {c: {}}}}, null, 1)`,
	`JSON.stringify(new Proxy({a: 1, b: [2]}, {}))`,
	`JSON.stringify(new Proxy([1, 2], {}))`,
	`(() => { try { const a = {}; a.self = a; JSON.stringify(a) } catch (e) { return e.name } })()`,
	`(() => { const x = {}; return JSON.stringify([x, x, {y: x}]) })()`,
	`JSON.stringify(JSON.parse('{"a":[1,2,{"b":null}],"c":"\\u00e9\\ud83d\\ude00","d":1e2,"e":-0,"__proto__":1}'))`,
	`JSON.stringify(JSON.parse('[1, 2, {"a": [3]}]', function (k, v) { return typeof v === "number" ? v + 1 : v }))`,
	`JSON.stringify(JSON.parse('{"a": 1, "b": 2}', function (k, v) { return k === "a" ? undefined : v }))`,
	`JSON.stringify(JSON.parse('{"a": [1, 2]}', function (k, v) { return Array.isArray(v) ? v.length : v }))`,
	`JSON.parse('"x"', function (k, v) { return typeof this + ":" + k + ":" + v })`,
	`(() => { try { JSON.parse("{bad") } catch (e) { return e.name } })()`,
	`(() => { try { JSON.parse("") } catch (e) { return e.name } })()`,
	`JSON.stringify.name + JSON.stringify.length + JSON.parse.name + JSON.parse.length`,
	`(() => { try { JSON.parse(Symbol()) } catch (e) { return e.name } })()`,
	`JSON.stringify(JSON.parse("[1, 2]", function (k, v) { if (k === "0") Object.defineProperty(this, "1", { value: 7, configurable: false }); return k === "1" ? 8 : v }))`,
	`Object.keys(JSON).length`,
}

func TestJSONMatchesBuiltins(t *testing.T) {
	// Each case is an export of its own: app code cannot eval.
	var mod strings.Builder
	for i, src := range jsonCases {
		fmt.Fprintf(&mod, "export const c%d = () => (%s)\n", i, src)
	}
	p := newTestPool(t, "access.js", mod.String(), Options{Size: 1})
	ref := goja.New()
	for i, src := range jsonCases {
		want, err := ref.RunString(src)
		if err != nil {
			t.Fatalf("reference %s: %v", src, err)
		}
		var got goja.Value
		var gotS string
		err = p.Call(t.Context(), fmt.Sprintf("c%d", i), nil, func(vm *VM, v goja.Value) error {
			got = v
			gotS = v.String()
			return nil
		})
		if err != nil {
			t.Errorf("%s: %v", src, err)
			continue
		}
		if gotS != want.String() || goja.IsUndefined(got) != goja.IsUndefined(want) {
			t.Errorf("%s:\n got %q\nwant %q", src, gotS, want.String())
		}
	}
}

// hostileJSON holds the inputs that crashed or hung the server through
// goja's own JSON functions.
const hostileJSON = `
export function parseDeep() { try { JSON.parse("[".repeat(3e6)) } catch (e) { return e.name + ": " + e.message } }
export function parseDeepObject() { try { JSON.parse('{"a":'.repeat(1e5) + "1" + "}".repeat(1e5)) } catch (e) { return e.name + ": " + e.message } }
export function stringifyDeep() {
  let a = []; for (let i = 0; i < 20000; i++) a = [a]
  try { JSON.stringify(a) } catch (e) { return e.name + ": " + e.message }
}
export function stringifyDeepObject() {
  let o = {}; for (let i = 0; i < 20000; i++) o = {o}
  try { JSON.stringify(o, null, 2) } catch (e) { return e.name + ": " + e.message }
}
export function stringifyDeepList() {
  let a = []; for (let i = 0; i < 20000; i++) a = [a]
  try { JSON.stringify(a, []) } catch (e) { return e.name + ": " + e.message }
}
export function reviverDeepens() {
  let deep = []; for (let i = 0; i < 20000; i++) deep = [deep]
  try { JSON.parse("[1, 2]", function (k, v) { if (k === "0") this[1] = deep; return v }) } catch (e) { return e.name + ": " + e.message }
}
export function resultDeep() { let a = []; for (let i = 0; i < 20000; i++) a = [a]; return a }
export function okAfter() { return JSON.stringify(JSON.parse('{"a":[1,{"b":2}]}')) }
`

func TestHostileJSONFailsItsCallOnly(t *testing.T) {
	p := newTestPool(t, "access.js", hostileJSON, Options{Size: 1})
	for export, want := range map[string]string{
		"parseDeep":           "SyntaxError: invalid JSON at byte 1000: nested deeper than 1000 levels",
		"parseDeepObject":     "SyntaxError: invalid JSON at byte 5000: nested deeper than 1000 levels",
		"stringifyDeep":       "RangeError: JSON value nested deeper than 1000 levels",
		"stringifyDeepObject": "RangeError: JSON value nested deeper than 1000 levels",
		"stringifyDeepList":   "RangeError: JSON value nested deeper than 1000 levels",
		"reviverDeepens":      "RangeError: JSON value nested deeper than 1000 levels",
	} {
		if got := mustJSON(t, p, export); got != `"`+want+`"` {
			t.Errorf("%s: got %s, want %q", export, got, want)
		}
	}
	// A result too deep for JSON is the call's error, not a crash.
	_, err := callJSON(t, p, "resultDeep")
	var je *JSError
	if !errors.As(err, &je) || !strings.Contains(err.Error(), "nested deeper than 1000") {
		t.Errorf("resultDeep: got %v, want the nesting error", err)
	}
	if got := mustJSON(t, p, "okAfter"); got != `"{\"a\":[1,{\"b\":2}]}"` {
		t.Errorf("okAfter: %s", got)
	}
}
