package jsvm

import "testing"

func TestStructuredClone(t *testing.T) {
	runWebCases(t, []webCase{
		{`structuredClone({a: 1, b: [1, "x", null, true], c: {d: undefined}})`, `{"a":1,"b":[1,"x",null,true],"c":{}}`},
		{`(() => { const o = {n: 1}; o.self = o; const c = structuredClone(o); return [c !== o, c.self === c, c.n] })()`, `[true,true,1]`},
		{`(() => { const s = {v: 1}; const c = structuredClone({a: s, b: s, l: [s]}); return [c.a === c.b, c.l[0] === c.a, c.a !== s] })()`, `[true,true,true]`},
		{`(() => { const a = [1, , 3]; a.x = "y"; const c = structuredClone(a); return [c.length, 1 in c, c.x, Array.isArray(c)] })()`, `[3,false,"y",true]`},
		{`(() => { const d = new Date(86400000); const c = structuredClone(d); return [c instanceof Date, c !== d, c.toISOString()] })()`, `[true,true,"1970-01-02T00:00:00.000Z"]`},
		{`(() => { const r = /a+b/gi; r.lastIndex = 3; const c = structuredClone(r); return [c instanceof RegExp, c.source, c.flags, c.lastIndex] })()`, `[true,"a+b","gi",0]`},
		{`(() => { const k = {k: 1}; const m = new Map([[k, "v"], ["s", k]]); const c = structuredClone(m); const [ck] = c.keys(); return [c instanceof Map, c.size, c.get(ck), c.get("s") === ck] })()`, `[true,2,"v",true]`},
		{`(() => { const c = structuredClone(new Set([1, "a", {b: 2}])); return [c instanceof Set, [...c]] })()`, `[true,[1,"a",{"b":2}]]`},
		{`(() => { const b = new ArrayBuffer(8); const u = new Uint8Array(b, 2, 4); u[0] = 9; const f = new Float64Array(1); f[0] = 1.5; const c = structuredClone({b, u, f, v: new DataView(b, 1, 2)}); return [c.b.byteLength, c.u.buffer === c.b, c.u.byteOffset, c.u.length, c.u[0], c.f[0], c.v.buffer === c.b, c.v.byteOffset, c.v.byteLength, c.b !== b] })()`, `[8,true,2,4,9,1.5,true,1,2,true]`},
		{`(() => { const e = new RangeError("m", {cause: {x: 1}}); e.extra = 1; const c = structuredClone(e); return [c instanceof RangeError, c.name, c.message, c.cause, c.extra, typeof c.stack, Object.keys(c)] })()`, `[true,"RangeError","m",{"x":1},null,"string",[]]`},
		{`(() => { class E extends TypeError { constructor(m) { super(m); this.name = "Custom" } }; const c = structuredClone(new E("q")); return [c.constructor.name, c.name, c.message] })()`, `["Error","Error","q"]`},
		{`(() => { const e = new Error("z"); e.name = "SyntaxError"; const c = structuredClone(e); return [c instanceof SyntaxError, c.name] })()`, `[true,"SyntaxError"]`},
		{`(() => { class P { constructor() { this.x = 1 } get y() { return 2 } }; const c = structuredClone(new P()); return [Object.getPrototypeOf(c) === Object.prototype, c] })()`, `[true,{"x":1}]`},
		{`(() => { const c = structuredClone([new Number(3), new String("s"), new Boolean(false)]); return c.map((x) => [typeof x, x.valueOf()]) })()`, `[["object",3],["object","s"],["object",false]]`},
		{`[structuredClone(1), structuredClone("s"), structuredClone(null), structuredClone(undefined), structuredClone(NaN), structuredClone(-0) === 0]`, `[1,"s",null,null,null,true]`},
		{`(() => { const a = []; a.length = 4e9; a[5] = 1; a.k = 2; const c = structuredClone(a); return [c.length, c[5], Reflect.ownKeys(c)] })()`, `[4000000000,1,["5","length","k"]]`},
		{`structuredClone({length: 4e9, a: 1})`, `{"length":4000000000,"a":1}`},
		{`structuredClone(Object.create({inherited: 1}, {own: {value: 2, enumerable: true}, hidden: {value: 3}}))`, `{"own":2}`},
		{`structuredClone({get g() { return 5 }, [Symbol("s")]: 1})`, `{"g":5}`},
		{`err(() => structuredClone(() => {})).replace(/\s+/g, "")`, `"throwsErrorDataCloneError:()=>{}couldnotbecloned.[25]"`},
		{`err(() => structuredClone({f: function named() {}})).replace(/\s+/g, "")`, `"throwsErrorDataCloneError:functionnamed(){}couldnotbecloned.[25]"`},
		{`err(() => structuredClone(Symbol("x")))`, `"throws Error DataCloneError: Symbol(x) could not be cloned. [25]"`},
		{`err(() => structuredClone(new WeakMap()))`, `"throws Error DataCloneError: #<WeakMap> could not be cloned. [25]"`},
		{`err(() => structuredClone(Promise.resolve()))`, `"throws Error DataCloneError: #<Promise> could not be cloned. [25]"`},
		{`err(() => structuredClone(new Proxy({}, {})))`, `"throws Error DataCloneError: #<Object> could not be cloned. [25]"`},
		{`err(() => structuredClone())`, `"throws Error TypeError: The value argument must be specified [ERR_MISSING_ARGS]"`},
		{`(() => { try { structuredClone(() => {}) } catch (e) { return [e instanceof DOMException, e instanceof Error, e.code, e.name] } })()`, `[true,true,25,"DataCloneError"]`},
		{`structuredClone(new URL("http://a/"))`, `{}`},
		{`(() => { let a = []; const root = a; for (let i = 0; i < 1000; i++) { const b = []; a.push(b); a = b } let c = structuredClone(root), n = 0; while (c.length) { c = c[0]; n++ } return n })()`, `1000`},
	})
}
