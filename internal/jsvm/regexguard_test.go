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
    (() => { try { Object.defineProperty(RegExp.prototype, "flags", { get() { return "g" } }); return "redefined" } catch (e) { return e.name } })(),
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
	want := `["bXb","cc",0,"bbb4",["a","a","a"],0,"-ab","0X2","zy","gi","msy","","get flags","TypeError"]`
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// An exec getter that answers the builtin, then Object: the check
	// must not spend the first answer, or goja's read gets Object and
	// loops for good.
	if got := mustJSON(t, newTestPool(t, "access.js", genericRegexModule, Options{Size: 1}), "protoExecGetter"); got != `"bXb"` {
		t.Fatalf("protoExecGetter: got %s", got)
	}
	// A global that lies no longer reaches flags: one replacement.
	if got := mustJSON(t, newTestPool(t, "access.js", genericRegexModule, Options{Size: 1}), "protoGlobal"); got != `"baa"` {
		t.Fatalf("protoGlobal: got %s", got)
	}
	for _, name := range []string{"lyingFlags", "ownFlags", "nativeExec", "protoExec"} {
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
