package jsvm

import (
	"testing"
	"time"
)

const genericRegexModule = `
export function customized() {
  class R extends RegExp {}
  const own = /a/g; own.note = "mine"
  const counted = /a/g; let n = 0
  counted.exec = function (s) { n++; return RegExp.prototype.exec.call(this, s) }
  const sticky = new R("a", "y")
  return [
    "aXa".replace(new R("a", "g"), "b"), "aa".replace(own, "c"), own.lastIndex,
    "aaa".replace(counted, "b") + n, "aaa".match(own), "aXa".match(new R("a")).index,
    "aab".replace(sticky, "-"), "aXa".replaceAll(new R("a", "g"), (m, i) => i),
    RegExp.prototype[Symbol.replace].call(own, { toString() { return "za" } }, "y"),
    new R("a", "gi").flags, /a/msy.flags, RegExp.prototype.flags, Object.getOwnPropertyDescriptor(RegExp.prototype, "flags").get.name,
    Object.getOwnPropertyDescriptor(RegExp.prototype, "flags").configurable,
  ]
}
export function lyingFlags() { class R extends RegExp { get flags() { return "g" } } return "aaa".replace(new R("a"), "b") }
export function ownFlags() { const re = /a/; Object.defineProperty(re, "flags", { value: "g" }); return "aaa".match(re) }
export function nativeExec() { const re = /a/g; re.exec = Object; return "x".replace(re, "") }
export function protoExec() { RegExp.prototype.exec = Object; return "x".replace(/a/g, "") }
export function protoExecGetter() {
  const exec = RegExp.prototype.exec; let n = 0
  Object.defineProperty(new Proxy(RegExp.prototype, {}), "exec", { get() { return n++ % 2 ? Object : exec }, configurable: true })
  return "aXa".replace(/a/g, "b")
}
export function ownFlagsByReceiver() { const rx = /a/; Reflect.set({}, "flags", "g", rx); return "aaa".replace(rx, "b") }
export function ownFlagsByClassField() { class B { constructor(o) { return o } } class S extends B { flags = "g" } const rx = /a/; new S(rx); return "aaa".match(rx) }
export function execGetterBelowProto() {
  const orig = RegExp.prototype.exec; let n = 0
  Object.setPrototypeOf(RegExp.prototype, { get exec() { return n++ === 0 ? orig : Object } })
  delete RegExp.prototype.exec
  return "aXa".replace(/a/g, "b")
}
export function hugeExecResult() { class R extends RegExp { exec() { return { length: 2 ** 31, 0: "a", index: 0 } } } return "a".replace(new R("a"), "b") }
export function hugeExecResultArray() { class R extends RegExp { exec() { const a = ["a"]; a.length = 2 ** 31; a.index = 0; return a } } return "a".replace(new R("a"), "b") }
export function splitHugeResult() { class R extends RegExp { exec() { this.lastIndex = 1; return { length: 2 ** 36 } } } return "ab".split(new R("a")) }
export function splitNativeExec() { class R extends RegExp { exec() { this.lastIndex = this.lastIndex + 1; return Object("a") } } return "a".repeat(1e6).split(new R("a")).length }
export function customizedSplit() {
  class R extends RegExp {}
  const own = /-/; own.note = 1
  return ["a-b-c".split(new R("-")), "a-b".split(own), "x1y".split(new R("(\\d)")), (() => { class M extends RegExp { exec(s) { return super.exec(s) } } return "a".match(new M("a")) instanceof Array })()]
}
export function redefinedFlags() { Object.defineProperty(RegExp.prototype, "flags", { get() { return "g" } }); return "aaa".replace(/a/, "b") }
export function deletedFlags() { Object.setPrototypeOf(RegExp.prototype, { get flags() { return "g" } }); delete RegExp.prototype.flags; return "aaa".match(/a/) }
export function protoGlobal() { Object.defineProperty(RegExp.prototype, "global", { get() { return true } }); return "aaa".replace(/a/, "b") }
export function ok(doc) { return { channels: ["jobs"], id: doc.id } }
`

// TestRegexGenericPathStops: on the spec's generic path, a regex whose
// flags claim "g" but which is not global, or whose exec never returns
// null, looped inside one native call until the process ran out of
// memory. Each now ends at the deadline or the memory limit, and
// customized regexes that end keep working.
func TestRegexGenericPathStops(t *testing.T) {
	p := newTestPool(t, "access.js", genericRegexModule, Options{Size: 2})
	got := mustJSON(t, p, "customized")
	want := `["bXb","cc",0,"bbb4",["a","a","a"],0,"-ab","0X2","zy","gi","msy","","get flags",true]`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// An exec getter that answers the builtin, then Object: the check
	// must not spend the first answer, or goja's read gets Object and
	// loops for good.
	if got := mustJSON(t, newTestPool(t, "access.js", genericRegexModule, Options{Size: 1}), "protoExecGetter"); got != `"bXb"` {
		t.Fatalf("protoExecGetter: got %s", got)
	}
	// exec deleted, a getter below: read once, by goja, through the Proxy.
	if got := mustJSON(t, newTestPool(t, "access.js", genericRegexModule, Options{Size: 1}), "execGetterBelowProto"); got != `"bXb"` {
		t.Fatalf("execGetterBelowProto: got %s", got)
	}
	if got, want := mustJSON(t, p, "customizedSplit"), `[["a","b","c"],["a","b"],["x","1","y"],true]`; got != want {
		t.Fatalf("customizedSplit: got %s want %s", got, want)
	}
	// A global that lies no longer reaches flags: one replacement.
	if got := mustJSON(t, newTestPool(t, "access.js", genericRegexModule, Options{Size: 1}), "protoGlobal"); got != `"baa"` {
		t.Fatalf("protoGlobal: got %s", got)
	}
	for _, name := range []string{"lyingFlags", "ownFlags", "nativeExec", "protoExec", "ownFlagsByReceiver", "ownFlagsByClassField", "redefinedFlags", "deletedFlags", "hugeExecResult", "hugeExecResultArray", "splitHugeResult", "splitNativeExec"} {
		t.Run(name, func(t *testing.T) {
			p := newTestPool(t, "access.js", genericRegexModule, Options{Size: 2, Deadline: 500 * time.Millisecond})
			start := time.Now()
			out, err := callJSON(t, p, name)
			if err == nil {
				t.Fatalf("returned %.100s, want the call stopped", out)
			}
			t.Logf("stopped after %v: %v", time.Since(start), err)
			assertPoolServes(t, p)
		})
	}
}
