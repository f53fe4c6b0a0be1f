package jsvm

import (
	"strings"
	"testing"
	"time"
)

const refusedModule = `
const outcome = (f) => { try { return "ran: " + String(f()) } catch (e) { return e.name + ": " + (e.name === "RangeError" ? e.message : e.message.split(":")[0]) } }
export function codeFromStrings() {
  return [
    outcome(() => eval("[".repeat(1e6))),
    outcome(() => eval("(".repeat(2000) + "1" + ")".repeat(2000))),
    outcome(() => new Function("a", "return a" + "+a".repeat(10000))(1)),
    outcome(() => new Function("a", "return a" + "+a".repeat(1e5))(1)),
    outcome(() => eval("1n")),
    outcome(() => new Function("return 2n ** 10n ** 11n")),
    outcome(() => eval("1 //# sourceMappingURL=/etc/passwd")),
    outcome(() => eval("this") === globalThis),
    outcome(() => eval({ not: "a string" }).not),
    outcome(() => new Function("a", "b", "return a * b")(6, 7)),
    outcome(() => eval("function (")),
    outcome(() => (0, eval)("1 + 1")),
    outcome(() => new Function("return 1")()),
    outcome(() => Function("return 1")()),
    outcome(() => (function () {}).constructor("return 1")()),
    outcome(() => Reflect.construct(Function, ["return 1"])()),
    outcome(() => Object.getPrototypeOf(async function () {}).constructor("return 1")),
    outcome(() => Object.getPrototypeOf(function* () {}).constructor("yield 1")),
  ]
}
export function deepest() { return eval("(".repeat(32000) + "1" + ")".repeat(32000)) }
export function functionsStillWork() {
  return [
    (() => 1) instanceof Function, (async () => {}) instanceof Function, typeof Function, Function.name,
    (function () {}).constructor === Function, Object.getPrototypeOf(() => 1) === Function.prototype,
    Function.prototype.call.call((x) => x + 1, null, 1), Math.max.bind(null, 2)(1), typeof eval,
    Function("return this")() === globalThis, new Function("return this")() === globalThis, (0, eval)("this") === globalThis,
  ]
}
`

// TestCodeFromStringsIsGuarded: eval and the function constructors
// compile code as Node does, up to MaxCodeString bytes of it: a million
// brackets given to goja's parser overflowed the Go stack, which ends the
// process. The deepest nesting that fits the limit fails its call on the
// heap guard (goja's compile of it takes more than 64 MiB), never the
// process.
// A BigInt literal is refused (the module does not name BigInt), and a
// source map named in the string is not read from the server's disk.
func TestCodeFromStringsIsGuarded(t *testing.T) {
	p := newTestPool(t, "backend.js", refusedModule, Options{Deadline: 10 * time.Second})
	got := mustJSON(t, p, "codeFromStrings")
	want := "[" + strings.Join([]string{
		`"RangeError: eval was given 1000000 bytes of code; app code compiles at most 65536 bytes from one string at run time (split the code, or write it in the module)"`,
		`"ran: 1"`, `"ran: 10001"`,
		`"RangeError: new Function was given 200009 bytes of code; app code compiles at most 65536 bytes from one string at run time (split the code, or write it in the module)"`,
		`"SyntaxError: eval"`, `"SyntaxError: new Function"`,
		`"ran: 1"`, `"ran: true"`, `"ran: a string"`, `"ran: 42"`, `"SyntaxError: SyntaxError"`,
		`"ran: 2"`, `"ran: 1"`, `"ran: 1"`, `"ran: 1"`, `"ran: 1"`,
		`"ran: async function anonymous(\n) {\nreturn 1\n}"`, `"ran: function* anonymous(\n) {\nyield 1\n}"`,
	}, ",") + "]"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	if _, err := callJSON(t, p, "deepest"); err == nil || !strings.Contains(err.Error(), "MiB of memory") {
		t.Fatalf("the deepest nesting: %v; want the heap guard's error", err)
	}
	if got, want := mustJSON(t, p, "functionsStillWork"), `[true,true,"function","Function",true,true,2,2,"function",true,true,true]`; got != want {
		t.Fatalf("functions: got %s want %s", got, want)
	}
}
