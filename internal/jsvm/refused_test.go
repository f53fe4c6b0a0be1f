package jsvm

import (
	"errors"
	"strings"
	"testing"
)

const refusedModule = `
const outcome = (f) => { try { return "ran: " + String(f()) } catch (e) { return e.name + ": " + e.message.split(":")[0] } }
export function codeFromStrings() {
  return [
    outcome(() => eval("[".repeat(1e6))),
    outcome(() => (0, eval)("1 + 1")),
    outcome(() => new Function("return 1")()),
    outcome(() => Function("return 1")()),
    outcome(() => (function () {}).constructor("return 1")()),
    outcome(() => Reflect.construct(Function, ["return 1"])()),
    outcome(() => Object.getPrototypeOf(async function () {}).constructor("return 1")),
    outcome(() => Object.getPrototypeOf(function* () {}).constructor("yield 1")),
  ]
}
export function functionsStillWork() {
  return [
    (() => 1) instanceof Function, (async () => {}) instanceof Function, typeof Function, Function.name,
    (function () {}).constructor === Function, Object.getPrototypeOf(() => 1) === Function.prototype,
    Function.prototype.call.call((x) => x + 1, null, 1), Math.max.bind(null, 2)(1), typeof eval,
    Function("return this")() === globalThis, new Function("return this")() === globalThis, (0, eval)("this") === globalThis,
  ]
}
export function bigIntGone() {
  return [typeof globalThis.BigInt, typeof globalThis.BigInt64Array, typeof globalThis.BigUint64Array,
    typeof DataView.prototype.getBigInt64, typeof DataView.prototype.setBigUint64]
}
`

// TestCodeFromStringsRefused: eval and the function constructors throw an
// EvalError. A million brackets given to goja's parser overflowed the Go
// stack, which ends the process.
func TestCodeFromStringsRefused(t *testing.T) {
	p := newTestPool(t, "backend.js", refusedModule, Options{})
	got := mustJSON(t, p, "codeFromStrings")
	refused := func(what string) string { return `"EvalError: ` + what + ` is not available in app code"` }
	want := "[" + strings.Join([]string{refused("eval"), refused("eval"), refused("new Function"), refused("new Function"),
		refused("new Function"), refused("new Function"), refused("the AsyncFunction constructor"),
		refused("the GeneratorFunction constructor")}, ",") + "]"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if got, want := mustJSON(t, p, "functionsStillWork"), `[true,true,"function","Function",true,true,2,2,"function",true,true,true]`; got != want {
		t.Fatalf("functions: got %s want %s", got, want)
	}
}

// TestBigIntRefused: a BigInt literal is refused at compile time, with its
// position, and no builtin makes one at run time. 2n ** 10n ** 11n asked
// for gigabytes in one step, which ends the process.
func TestBigIntRefused(t *testing.T) {
	_, err := Compile("access.js", "export function f() {\n  return 2n ** 10n ** 11n\n}\n")
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("Compile: got %v, want a *CompileError", err)
	}
	if ce.Line != 2 || ce.Column != 10 || !strings.Contains(ce.Message, "BigInt is not available in app code") || !strings.Contains(ce.Message, "use a number") {
		t.Fatalf("got %s (line %d, column %d)", ce.Message, ce.Line, ce.Column)
	}
	// esbuild itself only warns of one, and not at all in a try block.
	if _, err := Compile("access.js", "export function f() { try { return 1n } catch {} }"); !errors.As(err, &ce) {
		t.Fatalf("Compile of a literal in a try block: got %v, want a *CompileError", err)
	}
	if Unsupported()["bigint"] {
		t.Fatal("Unsupported() lets a bundler pass BigInt literals")
	}
	p := newTestPool(t, "backend.js", refusedModule, Options{})
	if got, want := mustJSON(t, p, "bigIntGone"), `["undefined","undefined","undefined","undefined","undefined"]`; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}
