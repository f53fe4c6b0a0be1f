// Each case is an expression whose answer Node gives as in the comment
// of TestBigIntKeepsNodesAnswers; handoff rewrites the BigInt operators
// in this file into checked calls, and the answers must not move.
const show = (v) => typeof v === "bigint" ? v + "n" : typeof v === "string" ? JSON.stringify(v) : String(v);
const outcome = (f) => { try { return show(f()) } catch (e) { return e.name } };
class Base { get x() { return this._x } set x(v) { this._x = v } }
class Sub extends Base {
  #p = 3n;
  constructor() { super(); this._x = 5n }
  grow(k) { super.x *= k; this.#p **= k; this.#p <<= 1n; return [this._x, this.#p] }
}
export function cases() {
  const log = [];
  const obj = (name, v) => ({ valueOf() { log.push(name); return v }, toString() { log.push(name + ".s"); return String(v) } });
  const target = { get k() { log.push("get"); return 6n }, set k(v) { log.push("set " + v) } };
  const key = () => { log.push("key"); return "k" };
  const rhs = () => { log.push("rhs"); return 7n };
  let id = 3n;
  const out = [
    outcome(() => 1n + 2n), outcome(() => 6n * 7n), outcome(() => 2n ** 64n), outcome(() => -(2n ** 63n)),
    outcome(() => 5n / 2n), outcome(() => -5n % 2n), outcome(() => 1n << 3n), outcome(() => -8n >> 1n),
    outcome(() => 5n >> 1000n), outcome(() => -5n >> 1000n), outcome(() => 5n << -1000n), outcome(() => 0n << 5n),
    outcome(() => 3 * 4), outcome(() => 2 ** 10), outcome(() => (-2) ** 0.5), outcome(() => 1 << 31), outcome(() => -8 >> 1),
    outcome(() => 0 * -1), outcome(() => "3" * "4"), outcome(() => [2] * [3]), outcome(() => null * 5),
    outcome(() => 1n * 1), outcome(() => 2n ** -1n), outcome(() => 1n << 1), outcome(() => Symbol() * 1),
    outcome(() => 1n < 2), outcome(() => 2 > 1n), outcome(() => "10" == 10n), outcome(() => 10n == "10"), outcome(() => "x" < 1n),
    outcome(() => 1n <= "1"), outcome(() => NaN < 1), outcome(() => NaN >= NaN), outcome(() => null == undefined),
    outcome(() => null >= 0), outcome(() => ({}) == "[object Object]"), outcome(() => [1] == 1), outcome(() => [1n] == 1n),
    outcome(() => "\uD800" < "\uFFFF"), outcome(() => "\uFFFF" < "\uD800\uDC00"), outcome(() => "a" < "b"), outcome(() => "b" <= "a"),
    outcome(() => new Date(5) < new Date(6)), outcome(() => new Date(5) == 5), outcome(() => new Date(5) == new Date(5).toString()),
    outcome(() => obj("a", 2n) * obj("b", 3n)), outcome(() => obj("c", 2n) < obj("d", "3")), outcome(() => obj("e", 1n) == "1"),
    outcome(() => { target[key()] *= rhs(); return "done" }),
    outcome(() => { id **= 3n; return id }), outcome(() => { id <<= 2n; return id }), outcome(() => { id >>= 1n; return id }),
    outcome(() => { let s = 10; s *= 2; s **= 2; s <<= 1; return s }),
    outcome(() => { const o = { v: 2n }; o.v **= 10n; o["v"] *= 3n; return o.v }),
    outcome(() => { const o = Object.freeze({ v: 2n }); o.v *= 2n; return o.v }),
    outcome(() => { const o = null; o.v *= 2n }),
    outcome(() => new Sub().grow(2n).map(show).join()),
    outcome(() => BigInt(10)), outcome(() => BigInt("0x1f")), outcome(() => BigInt(" 12 ")), outcome(() => BigInt("1.5")),
    outcome(() => BigInt(1.5)), outcome(() => new BigInt(1)), outcome(() => BigInt(true)), outcome(() => BigInt()),
    outcome(() => BigInt.asIntN(64, 2n ** 63n)), outcome(() => BigInt.asUintN(64, -1n)), outcome(() => BigInt.asUintN(2 ** 40, 5n)),
    outcome(() => BigInt.asIntN(2 ** 40, -5n)), outcome(() => BigInt.asUintN(-1, 5n)), outcome(() => BigInt.asIntN(8, 255)),
    outcome(() => [BigInt.name, BigInt.length, BigInt.asIntN.name, BigInt.asUintN.length].join()),
    outcome(() => BigInt.prototype.constructor === BigInt), outcome(() => Object(1n) instanceof BigInt), outcome(() => typeof 1n),
    outcome(() => { const a = new BigInt64Array(2); a[0] = -5n; a[1] = 2n ** 63n; return a.join() }),
    outcome(() => { const d = new DataView(new ArrayBuffer(8)); d.setBigUint64(0, 2n ** 64n - 1n); return d.getBigInt64(0) }),
    outcome(() => (2n ** 100n).toString(36)), outcome(() => JSON.stringify({ a: 1n })), outcome(() => `${12n}`),
    outcome(() => eval("3n * 4n")), outcome(() => new Function("a", "b", "return a ** b")(3n, 4n)),
  ];
  return [...out, log.join(" ")];
}
export function more() {
  const g = eval, log = [];
  const d = (o, k) => { const x = Object.getOwnPropertyDescriptor(o, k); return [x.writable, x.enumerable, x.configurable].join() };
  try { Symbol() * { valueOf() { log.push("rhs"); return 1 } } } catch (e) { log.push(e.name) }
  return [
    g("const k = 1; k"), g("const k = 2; k"), (g("var v = 1"), Object.getOwnPropertyDescriptor(globalThis, "v").configurable),
    d(globalThis, "BigInt"), d(BigInt, "asIntN"), d(BigInt.asUintN, "length"), d(BigInt.prototype, "constructor"),
    log.join(),
    (() => { let r; Object.defineProperty(Number.prototype, "v", { get() { return 1 }, set(x) { r = typeof this }, configurable: true }); const n = 5, k = 3; n.v *= k; delete Number.prototype.v; return r })(),
    (() => { Number.prototype.w = 2; const n = 1, k = 3; try { n.w *= k; return "no error" } catch (e) { return e.name } finally { delete Number.prototype.w } })(),
    g("var fo = Object.freeze({ v: 2n }); var kk = 3n; fo.v *= kk; fo.v"),
    new Function("'use strict'; const o = Object.freeze({ v: 2n }); const k = 3n; try { o.v *= k; return 'no error' } catch (e) { return e.name }")(),
    g("const kk2 = 2 * Number(globalThis.k1 || 1); kk2"), g("const kk2 = 3 * 2; kk2 < 7"), g("'use strict'; var vs = 2 * 3; vs"), typeof globalThis.vs,
    g("let q2 = 3; let r2 = q2 * q2; r2"), g("let q2 = 4; q2 * q2"),
    (() => { Object.defineProperty(BigInt.prototype, "toJSON", { get() { "use strict"; return () => typeof this }, configurable: true }); try { return JSON.stringify([1n]) } finally { delete BigInt.prototype.toJSON } })(),
  ].map(String);
}
