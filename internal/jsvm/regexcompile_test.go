package jsvm

import (
	"testing"
	"time"
)

const regexCompileModule = `
const outcome = (f) => { try { return String(f()) } catch (e) { return e.name + ": " + e.message.split(";")[0] } }
export function deep() {
  const p = "(?=".repeat(4e4) + "a" + ")".repeat(4e4)
  return [outcome(() => new RegExp(p)), outcome(() => RegExp(p)), outcome(() => /x/.compile(p)),
    outcome(() => new RegExp({ toString: () => p })), outcome(() => new RegExp({ [Symbol.match]: true, source: p, flags: "g" }))]
}
export function ordinary() {
  class R extends RegExp {}
  return [new RegExp("(a(b)[(]\\(c)", "g").source, RegExp("x") instanceof RegExp, /a/ instanceof RegExp,
    /a/.constructor === RegExp, new R("a") instanceof RegExp, new RegExp(/a/g, "i").flags, typeof RegExp,
    RegExp.name, String("a-b".split(/-/)), new RegExp("(".repeat(50) + "a" + ")".repeat(50)).test("a"),
    Object.getPrototypeOf(/a/) === RegExp.prototype, "aXa".replace(new RegExp("a", "g"), "b"),
    new RegExp({ [Symbol.match]: true, source: "b", flags: "y" }, "g").flags]
}
`

// TestRegexCompileNesting: 40,000 nested lookaheads compiled natively for
// 11 s, past every deadline; a pattern compiled at run time now nests at
// most 1000 groups deep.
func TestRegexCompileNesting(t *testing.T) {
	p := newTestPool(t, "access.js", regexCompileModule, Options{Deadline: 5 * time.Second})
	refused := `"SyntaxError: the regular expression nests its groups 40000 deep, over the 1000 allowed"`
	if got, want := mustJSON(t, p, "deep"), "["+refused+","+refused+","+refused+","+refused+","+refused+"]"; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	want := `["(a(b)[(]\\(c)",true,true,true,true,"i","function","RegExp","a,b",true,true,"bXb","g"]`
	if got := mustJSON(t, p, "ordinary"); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
