package jsvm

import (
	"errors"
	"strings"
	"testing"
)

// TestCodeThatPanickedGojaDeploys: valid code that once reached a panic
// of goja's parser compiles and runs with Node's answers.
func TestCodeThatPanickedGojaDeploys(t *testing.T) {
	src := `const top = "\uDBFF\uDFFF";
const braces = "\u{10FFFF}";
const re = /\u{10FFFF}/u;
export function f() {
	return [top.length, top.codePointAt(0), braces === top, re.test(top), ` + "`\\u{10FFFF}`" + ` === top].join(",");
}`
	p := newTestPool(t, "backend.js", src, Options{Size: 1})
	if got := mustJSON(t, p, "f"); got != `"2,1114111,true,true,true"` {
		t.Fatalf("f() = %s; Node answers \"2,1114111,true,true,true\"", got)
	}
}

// TestGojaPanicIsACompileError: a panic of goja's compiler, reached with
// code esbuild did not rewrite, is a CompileError naming the file.
func TestGojaPanicIsACompileError(t *testing.T) {
	_, _, err := compileGoja("access.js", `(function () { return "\u{10FFFF}" })`)
	var ce *CompileError
	if !errors.As(err, &ce) || ce.File != "access.js" || !strings.Contains(ce.Message, "failed to compile") {
		t.Fatalf("compileGoja of goja's panic = %v; want a CompileError for access.js", err)
	}
}
