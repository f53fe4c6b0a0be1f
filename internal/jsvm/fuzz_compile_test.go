package jsvm

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzCompileAndLoad: no source, however broken, panics the compile or
// the load of a module; each either works or fails with an error. Seeded
// with the example apps' code and the inputs that once panicked goja.
// Inputs are kept short: a deploy's code is vetted in a child process
// first (package compilechild), since goja's parser recursion can end a
// process on deep nesting, which recover cannot catch.
func FuzzCompileAndLoad(f *testing.F) {
	seeds, _ := filepath.Glob("../../examples/*/*.js")
	for _, p := range seeds {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
	for _, s := range []string{
		`const s = "\uDBFF\uDFFF"; export function f() { return s }`,
		`class A {}; class C extends A { x = eval("() => super.x") }; export default function () { return new C().x }`,
		"export const config = { onChange: { concurrency: 1 } };\nexport async function onChange(e, ctx) { for await (const x of []) {} }",
		"let x = /\\u{10FFFF}/u; export default function () { return x.test(\"\\u{10FFFF}\") }",
		"export default function () { return `${`${`${1}`}`}` }",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		if len(src) > 4<<10 {
			return
		}
		p, err := Compile("backend.js", src)
		if err != nil {
			return
		}
		pool, err := NewPool(p, Options{Size: 1, InitDeadline: 200 * time.Millisecond})
		if err == nil {
			pool.Close()
		}
	})
}
