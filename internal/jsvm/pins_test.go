package jsvm

import (
	"testing"
	"time"
)

const pinsModule = `
const flipping = (big) => { let n = 0; return { 0: 7, get length() { return n++ ? big : 0 } } }
const flippingProxy = (big) => { let n = 0; return new Proxy([7], { get: (t, k) => k === "length" ? (n++ ? big : 0) : t[k] }) }
export function lengthsThatChange() {
  return [
    Math.max.apply(null, flipping(2 ** 32 - 1)),
    Reflect.apply(Math.min, null, flipping(2 ** 32 - 1)),
    Reflect.construct(Array, flipping(2 ** 32 - 1)).length,
    Array.prototype.map.call(flipping(4e9), (x) => x).length,
    Array.prototype.join.call(flippingProxy(4e9), "-"),
    Array.from(flipping(4e9)).length,
    new Float64Array(flipping(4e9)).length,
    Array.prototype.indexOf.call(flipping(4e9), 1),
    [1].flatMap(() => flippingProxy(4e9)).length,
    (() => { let n = 0; return Math.max.apply(null, Object.defineProperty(new Uint8Array([3]), "length", { get: () => (n++ ? 2 ** 32 - 1 : 1) })) })(),
  ]
}
export function arrayLikesStillWork() {
  let reads = 0
  const counted = { 0: 1, 1: 2, get length() { reads++; return 2 } }
  const o = { length: 2 }
  return [
    Array.prototype.map.call({ length: 2, 0: "a", 1: "b" }, (x) => x + x), Array.from({ length: 3 }, (_, i) => i),
    Math.max.apply(null, { length: 2, 0: 1, 1: 5 }), Array.prototype.map.call(counted, (x) => x * 10), reads,
    Array.prototype.fill.call(o, 1) === o, o[1], Array.prototype.join.call(new Proxy([1, 2], {}), "+"),
    Array.prototype.slice.call("abc", 1), new Uint8Array({ length: 2, 0: 9 }).join(), [].concat({ length: 1, 0: "x", [Symbol.isConcatSpreadable]: true }),
    Array.prototype.push.call(o, 5), o.length, [].concat(o)[0] === o, Array.prototype.concat.call(o)[0] === o,
    Array.prototype.map.call(new Uint8Array([1, 2]), (x) => x * 2), Array.prototype.map.call(new Proxy([1, 2], {}), (x) => x + 1),
    Array.prototype.toString.call(new Uint8Array([6, 7])), Array.from(new Int8Array([4, 5])), new Uint8Array(new ArrayBuffer(3)).length,
  ]
}
`

// TestPinnedLengths: a guard and the builtin behind it each read an
// array-like's length; a getter answering 0 to the first and 4e9 to the
// second made Math.max.apply ask Go for 64 GB at once, which ends the
// process, and map run natively for minutes. The builtin now gets what
// the guard read.
func TestPinnedLengths(t *testing.T) {
	p := newTestPool(t, "access.js", pinsModule, Options{Deadline: 5 * time.Second})
	if got, want := mustJSON(t, p, "lengthsThatChange"), `[null,null,0,0,"",0,0,-1,0,3]`; got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	want := `[["aa","bb"],[0,1,2],5,[10,20],1,true,1,"1+2",["b","c"],"9,0",["x"],3,3,true,true,[2,4],[2,3],"6,7",[4,5],3]`
	if got := mustJSON(t, p, "arrayLikesStillWork"); got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}
