package jsvm

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

func TestCompileSyntaxErrorNamesFileLineColumn(t *testing.T) {
	src := "export function jobs(doc) {\n  let a = 1\n  a x\n}\n"
	_, err := Compile("access.js", src)
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("want *CompileError, got %T %v", err, err)
	}
	if want := `access.js:3:5: Expected ";" but found "x"`; err.Error() != want {
		t.Fatalf("message:\n got %s\nwant %s", err, want)
	}
	if ce.Line != 3 || ce.Column != 5 || ce.LineText != "  a x" {
		t.Fatalf("position: %+v", ce)
	}
}

func TestCompileErrorColumnCountsCharacters(t *testing.T) {
	// "é" is two bytes; the column must count it as one character.
	_, err := Compile("access.js", "const s = 'é'; let a = 1 b\n")
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("want *CompileError, got %v", err)
	}
	if ce.Line != 1 || ce.Column != 26 {
		t.Fatalf("want 1:26, got %d:%d (%v)", ce.Line, ce.Column, err)
	}
}

func TestCompileCountsFurtherErrors(t *testing.T) {
	_, err := Compile("backend.js", "export const a = ;\nexport const b = ;\n")
	if err == nil || !strings.HasPrefix(err.Error(), "backend.js:1:") {
		t.Fatalf("got %v", err)
	}
}

func TestCompileRefusesImports(t *testing.T) {
	_, err := Compile("backend.js", "import _ from 'lodash'\nexport function onChange() { return _.x }\n")
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("want *CompileError, got %v", err)
	}
	if ce.Line != 1 || !strings.Contains(err.Error(), `cannot import "lodash"`) || !strings.Contains(err.Error(), "bundle") {
		t.Fatalf("got %v", err)
	}
}

func TestCompileRefusesTopLevelAwait(t *testing.T) {
	_, err := Compile("backend.js", "const x = 1\nawait Promise.resolve(1)\nexport const y = x\n")
	var ce *CompileError
	if !errors.As(err, &ce) || ce.Line != 2 {
		t.Fatalf("want a CompileError on line 2, got %v", err)
	}
}

func TestProgramExports(t *testing.T) {
	prog, err := Compile("backend.js", `
export const config = { scheduled: { interval: "30s" } }
export async function onChange(event, ctx) {}
export function scheduled() {}
export default function () {}
function helper() {}
`)
	if err != nil {
		t.Fatal(err)
	}
	got := prog.Exports()
	slices.Sort(got)
	if want := []string{"config", "default", "onChange", "scheduled"}; !slices.Equal(got, want) {
		t.Fatalf("exports %v, want %v", got, want)
	}
	if !prog.HasExport("onChange") || prog.HasExport("helper") {
		t.Fatal("HasExport disagrees with Exports")
	}
	if prog.Filename() != "backend.js" || !strings.Contains(prog.Code(), "onChange") {
		t.Fatal("Filename/Code")
	}
}

// TestGojaRunsUnloweredSyntax proves, against the goja in go.mod, the
// premise of loweredFeatures: every modern feature we let through to goja
// unchanged really runs there, and the ones we lower really do not. If a
// goja upgrade changes either side, this test says which list to edit.
func TestGojaRunsUnloweredSyntax(t *testing.T) {
	native := map[string]string{
		"class-private-field":    `class A { #x = 1; get(){ return this.#x } }; if (new A().get() !== 1) throw 1`,
		"class-private-method":   `class A { #m(){ return 1 } g(){ return this.#m() } }; new A().g()`,
		"class-private-accessor": `class A { get #x(){ return 1 } g(){ return this.#x } }; new A().g()`,
		"class-private-static":   `class A { static #x = 1; static g(){ return A.#x } }; A.g()`,
		"class-private-brand":    `class A { #x; static has(o){ return #x in o } }; A.has({})`,
		"class-static-blocks":    `class A { static { this.y = 1 } }`,
		"class-field":            `class A { x = 1; static y = 2 }`,
		"logical-assignment":     `let a = null; a ??= 1; a ||= 2; a &&= 3`,
		"nullish-coalescing":     `null ?? 1`,
		"optional-chain":         `let a; a?.b?.(); a?.[0]`,
		"optional-catch-binding": `try {} catch {}`,
		"object-rest-spread":     `const {a, ...r} = {a: 1, b: 2}; ({...r})`,
		"exponent-operator":      `2 ** 3`,
		"regexp-named-groups":    `/(?<y>\d+)/.exec("12").groups.y`,
		"regexp-lookbehind":      `/(?<=a)b/.test("ab")`,
		"regexp-dot-all":         `/./s.test("\n")`,
		"regexp-unicode-prop":    `/\p{L}/u.test("a")`,
		"regexp-sticky":          `/a/y.test("a")`,
		"async-await":            `(async () => { await 1 })()`,
		"generator":              `function* g() { yield 1 }; [...g()]`,
		"hashbang":               "#!/usr/bin/env node\n1",
		"new-target":             `function F() { return new.target }; new F()`,
		"nested-rest-binding":    `const [a, ...[b]] = [1, 2]`,
		"unicode-escapes":        `"\u{1F600}"`,
	}
	for name, src := range native {
		if _, err := goja.New().RunString(src); err != nil {
			t.Errorf("%s: goja no longer runs it natively; add it to loweredFeatures: %v", name, err)
		}
	}
	lowered := map[string]string{
		"async-generator": `async function* g() { yield 1 }`,
		"for-await":       `async function f(a) { for await (const x of a) {} }`,
		"using":           `{ using x = null }`,
	}
	for name, src := range lowered {
		if _, err := goja.New().RunString(src); err == nil {
			t.Errorf("%s: goja now runs it natively; consider removing it from loweredFeatures", name)
		}
		if _, ok := loweredFeatures[name]; !ok {
			t.Errorf("%s: goja cannot run it but loweredFeatures does not lower it", name)
		}
	}
}

// TestCompileDefinesNodeEnv: packages that pick their build by
// process.env.NODE_ENV get the production one, with no process object.
func TestCompileDefinesNodeEnv(t *testing.T) {
	p := newTestPool(t, "backend.js", `export function f() {
	return [process.env.NODE_ENV, typeof process, process.env.NODE_ENV === "production" ? "prod" : "dev"].join(",");
}`, Options{Size: 1})
	if got := mustJSON(t, p, "f"); got != `"production,undefined,prod"` {
		t.Fatalf("f() = %s", got)
	}
}
