package jsvm

import (
	"reflect"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// TestExportIsBounded: Export gives what goja's Export gives for ordinary
// values, and stays within its bounds for sparse arrays, cycles, deep
// nesting and wide objects.
func TestExportIsBounded(t *testing.T) {
	t.Parallel()
	r := goja.New()
	run := func(src string) goja.Value {
		t.Helper()
		v, err := r.RunString(src)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, src := range []string{
		`({ a: 1, b: "x", c: [true, null, 2.5], d: { e: [] } })`,
		`["a", ["b", { c: -1 }]]`,
		`"plain"`, `42`, `undefined`, `null`, `false`,
		`new Date(0)`, `/re/g`,
		`[undefined, , 3]`, `Promise.resolve(1)`, `new Uint8Array([1, 2])`, `new Float64Array(2)`,
		`new (class P { constructor() { this.x = 1 } })()`, `Object.assign(new Error("e"), { code: "c" })`,
		`(function () { return arguments })(1, "a")`, `new Proxy({ a: 1 }, {})`,
	} {
		v := run("(" + src + ")")
		if got, want := Export(v), v.Export(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Export = %#v, goja's = %#v", src, got, want)
		}
	}
	if got, ok := Export(run(`new Date(0)`)).(time.Time); !ok || !got.Equal(time.UnixMilli(0)) {
		t.Errorf("a Date exports as %v", got)
	}

	for _, src := range []string{`new Set([1])`, `new Map([[1, 2]])`} {
		if got := Export(run("(" + src + ")")); got != nil {
			t.Errorf("%s exports as %#v; a Set or Map is not walked", src, got)
		}
	}
	reason := Export(run(`({ list: new Array(20000).fill(0), forbidden: "no", more: { deep: new Array(20000).fill(1) } })`)).(map[string]any)
	if reason["forbidden"] != "no" || len(reason["list"].([]any)) == 0 {
		t.Errorf("a reason beside long lists exports as forbidden=%v, list of %d", reason["forbidden"], len(reason["list"].([]any)))
	}
	sparse := Export(run(`(() => { const a = ["x"]; a.length = 4e9; return a })()`)).([]any)
	if len(sparse) != maxExportItems || sparse[0] != "x" || sparse[1] != nil {
		t.Errorf("a sparse array of length 4e9 exports %d items, starting %v", len(sparse), sparse[:2])
	}
	cycle := Export(run(`(() => { const o = { name: "o" }; o.self = o; o.list = [o]; return o })()`)).(map[string]any)
	if cycle["name"] != "o" || cycle["self"] != nil || cycle["list"].([]any)[0] != nil {
		t.Errorf("a cycle exports as %#v", cycle)
	}
	shared := Export(run(`(() => { const s = { v: 1 }; return [s, s] })()`)).([]any)
	if !reflect.DeepEqual(shared[0], shared[1]) || shared[0] == nil {
		t.Errorf("an object met twice, not in a cycle, exports as %#v", shared)
	}
	deep := Export(run(`(() => { let a = []; for (let i = 0; i < 1e5; i++) a = [a]; return a })()`))
	depth := 0
	for l, ok := deep.([]any); ok && len(l) > 0; l, ok = l[0].([]any) {
		depth++
	}
	if depth != maxExportDepth {
		t.Errorf("1e5 nested arrays export %d deep, want %d", depth, maxExportDepth)
	}
	wide := Export(run(`(() => { const o = {}; for (let i = 0; i < 3e4; i++) o["k" + i] = [i]; return o })()`)).(map[string]any)
	if n := len(wide); n == 0 || n > maxExportItems {
		t.Errorf("an object of 3e4 arrays exports %d keys", n)
	}
}

func TestBoolReadsOnlyBooleans(t *testing.T) {
	t.Parallel()
	r := goja.New()
	for src, want := range map[string][2]bool{
		`true`: {true, true}, `false`: {false, true}, `new Boolean(true)`: {true, true},
		`1`: {false, false}, `"true"`: {false, false}, `undefined`: {false, false},
		`(() => { const a = []; a.length = 4e9; return a })()`: {false, false},
	} {
		v, err := r.RunString("(" + src + ")")
		if err != nil {
			t.Fatal(err)
		}
		if b, ok := Bool(v); b != want[0] || ok != want[1] {
			t.Errorf("Bool(%s) = %v, %v; want %v, %v", src, b, ok, want[0], want[1])
		}
	}
}

// CompileScriptForTest compiles a script as a runtime whose module names
// BigInt compiles its code: parsed by goja, with its BigInt operators
// rewritten into checked calls when it uses BigInt, then compiled by
// goja. It is for test262_test.go, which runs the suite's scripts on
// handoff's runtimes.
func CompileScriptForTest(name, src string, strict bool) (*goja.Program, error) {
	tree, err := goja.Parse(name, src)
	if err != nil {
		return nil, err
	}
	if mayUseBigInt(src) && usesBigInt(tree) {
		if _, err := rewriteBigInt(tree, strict); err != nil {
			return nil, err
		}
	}
	return goja.CompileAST(tree, strict)
}
