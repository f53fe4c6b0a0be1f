package jsvm

import "testing"

// semanticsModule runs builtins that the guards wrap, on the inputs where
// a guard once changed the answer: an array-like behind a pinning Proxy
// (holes visited, callbacks seeing the Proxy), RegExp(re) making a copy,
// JSON.parse calling a setter, padStart and repeat converting their
// argument twice, concat converting its operands twice, a typed array's
// constructor, JSON's wrapper and a reviver's definitions on a Proxy.
const semanticsModule = `const t = (f) => { try { return JSON.stringify(f()) } catch (e) { return "throws " + (e && e.name) } };
export function f() {
  return [
    t(() => [1,,3].filter(() => true).length),
    t(() => Array.prototype.filter.call({length: 3, 0: 1, 2: 3}, () => true)),
    t(() => Array.prototype.reduce.call({length: 0}, (a, b) => a)),
    t(() => [].reduce((a, b) => a)),
    t(() => (function () { const a = arguments; return Array.prototype.map.call(a, (x, i, o) => o === a) })(1)),
    t(() => (function () { const a = arguments; let r; Array.prototype.forEach.call(a, (x, i, o) => { r = o === a }); return r })(1)),
    t(() => { const re = /a/; return RegExp(re) === re }),
    t(() => { Object.defineProperty(Object.prototype, "qq", { set() { throw new Error("set") }, configurable: true }); try { return JSON.parse('{"qq":1}', (k, v) => v).qq } finally { delete Object.prototype.qq } }),
    t(() => { let n = 0; const o = { valueOf() { n++; return 5 } }; "a".padStart(o); return n }),
    t(() => { let n = 0; const o = { valueOf() { n++; return 5 } }; "a".padEnd(o); "a".repeat({valueOf(){n++; return 2}}); return n }),
    t(() => { let hit = 0; class C { static get x() { hit++; return 1 } }; Object.keys(C); Object.entries(C); return hit }),
    t(() => Array.prototype.some.call({length: 2, 1: 1}, (x) => x === undefined)),
    t(() => Array.prototype.indexOf.call({length: 3, 2: undefined}, undefined)),
    t(() => Array.prototype.includes.call({length: 3}, undefined)),
    t(() => [3,1,2].sort().join()),
    t(() => Array.prototype.join.call({length: 2, 0: "a"}, "-")),
    t(() => Array.from({length: 2})),
    t(() => Object.keys(new Proxy({a: 1}, {}))),
    t(() => { let gets = 0; const o = { get toString() { gets++; return () => "x" } }; return [gets + 0, "".concat(o, 1, null, undefined), gets] }),
    t(() => [new Float64Array(1).constructor === Float64Array, Uint8Array.prototype.constructor === Uint8Array, new ArrayBuffer(1).constructor === ArrayBuffer,
      Object.getOwnPropertyDescriptor(Int8Array.prototype, "constructor").enumerable, Uint8Array.from([1]).constructor === Uint8Array, new Int32Array(2).slice().constructor === Int32Array]),
    t(() => { const o = { get length() { throw new RangeError("length read") } }; try { [].sort.call(o, null) } catch (e) { return e.name } }),
    t(() => { const d = Object.getOwnPropertyDescriptor(Function, "prototype"); return [d.writable, d.configurable, String(Float64Array[Symbol.hasInstance]).includes("[Symbol.hasInstance]")] }),
    t(() => { let sets = 0; Object.defineProperty(Object.prototype, "", { set() { sets++ }, configurable: true }); try { JSON.parse("1", (k, v) => v); JSON.stringify(1, (k, v) => v); return sets } finally { delete Object.prototype[""] } }),
    t(() => { try { JSON.parse('[0,0]', function (k, v) { if (k === "0") this[1] = new Proxy({ a: null }, { defineProperty() { throw new EvalError("trap") } }); return v }) } catch (e) { return e.name } }),
    t(() => JSON.parse('{"a":1,"b":2}', function (k, v) { if (k === "a") Object.freeze(this); return k === "b" ? undefined : v })),
    t(() => Object.keys(Object.getOwnPropertyDescriptors(Object.getPrototypeOf(Int8Array.prototype))).includes("length")),
    t(() => { const log = []; const p = new Proxy({ a: 1, length: 2 }, { get(t, k) { log.push("get:" + String(k)); return t[k] }, ownKeys(t) { log.push("ownKeys"); return Reflect.ownKeys(t) } }); Object.entries(p); Object.keys(p); Object.values(p); Object.getOwnPropertyNames(p); return log.join("|") }),
  ];
}
`

// TestGuardsKeepTheLanguagesAnswers: a guard may stop a call, never change
// its answer. The want is what Node 20 prints for the same module.
func TestGuardsKeepTheLanguagesAnswers(t *testing.T) {
	p := newTestPool(t, "backend.js", semanticsModule, Options{})
	const node = `["2","[1,3]","throws TypeError","throws TypeError","[true]","true","true","1","1","2","0","false","2","true","\"1,2,3\"","\"a-\"","[null,null]","[\"a\"]","[0,\"x1nullundefined\",1]","[true,true,true,false,true,true]","\"TypeError\"","[false,false,true]","0","\"EvalError\"","{\"a\":1,\"b\":2}","true","\"ownKeys|get:a|get:length|ownKeys|ownKeys|get:a|get:length|ownKeys\""]`
	if got := mustJSON(t, p, "f"); got != node {
		t.Fatalf("got  %s\nNode %s", got, node)
	}
}
