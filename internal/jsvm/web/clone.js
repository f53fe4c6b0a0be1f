// structuredClone(value) by the HTML standard's structured clone, as Node
// 20 answers: primitives, plain objects and arrays (holes and extra
// properties kept), Boolean/Number/String objects, Date, RegExp, Map,
// Set, ArrayBuffer, typed arrays, DataView and errors; shared references
// and cycles come out shared. Functions, symbols, promises, weak
// collections and proxies throw a DataCloneError. Other objects, class
// instances too, come out as plain objects of their own enumerable
// properties. It walks with a stack of its own, not recursion, so depth
// costs heap (watched) rather than the call stack.
(function (host) {
  "use strict";
  const DOMException = globalThis.DOMException;
  const { getPrototypeOf } = Object;
  const hasOwn = Object.hasOwn;
  // keys lists own enumerable string keys, in Object.keys's order. for-in
  // walks the keys that exist: Object.keys is sized by a length property
  // ({length: 4e9}, a sparse array) and would stop the call.
  function keys(v) {
    const out = [];
    for (const k in v) if (hasOwn(v, k)) out.push(k);
    return out;
  }
  const call = Function.prototype.call.bind(Function.prototype.call);
  const getter = (proto, name) => Object.getOwnPropertyDescriptor(proto, name).get;
  const TypedArray = getPrototypeOf(Uint8Array);
  const typedTag = getter(TypedArray.prototype, Symbol.toStringTag);
  const typedBuffer = getter(TypedArray.prototype, "buffer");
  const typedOffset = getter(TypedArray.prototype, "byteOffset");
  const typedLength = getter(TypedArray.prototype, "length");
  const bufferLength = getter(ArrayBuffer.prototype, "byteLength");
  const bufferSlice = ArrayBuffer.prototype.slice;
  const viewBuffer = getter(DataView.prototype, "buffer");
  const viewOffset = getter(DataView.prototype, "byteOffset");
  const viewLength = getter(DataView.prototype, "byteLength");
  const mapSize = getter(Map.prototype, "size");
  const setSize = getter(Set.prototype, "size");
  const mapEntries = Map.prototype.entries;
  const setValues = Set.prototype.values;
  const mapSet = Map.prototype.set;
  const setAdd = Set.prototype.add;
  const weakMapHas = WeakMap.prototype.has;
  const weakSetHas = WeakSet.prototype.has;
  const getTime = Date.prototype.getTime;
  const regexSource = getter(RegExp.prototype, "source");
  const regexFlags = getter(RegExp.prototype, "flags");
  const boolValue = Boolean.prototype.valueOf;
  const numValue = Number.prototype.valueOf;
  const strValue = String.prototype.valueOf;
  const symValue = Symbol.prototype.valueOf;
  const fnToString = Function.prototype.toString;
  const symToString = Symbol.prototype.toString;
  const ERRORS = { Error, EvalError, RangeError, ReferenceError, SyntaxError, TypeError, URIError };
  const CTORS = { Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array, Float32Array, Float64Array };
  const MapCtor = Map, SetCtor = Set, ArrayCtor = Array, DateCtor = Date, RegExpCtor = RegExp, DataViewCtor = DataView;

  function cannot(what) {
    return new DOMException(`${what} could not be cloned.`, "DataCloneError");
  }

  // is runs a brand check: the builtin throws for anything else.
  function is(fn, v, ...args) {
    try {
      call(fn, v, ...args);
      return true;
    } catch {
      return false;
    }
  }

  function structuredClone(value, options) {
    if (arguments.length === 0) {
      const e = new TypeError("The value argument must be specified");
      e.code = "ERR_MISSING_ARGS";
      throw e;
    }
    if (options !== undefined && options !== null) {
      if (typeof options !== "object") throw new TypeError('The "options" argument must be of type object.');
      const t = options.transfer;
      if (t !== undefined && [...t].length > 0) throw new DOMException("structuredClone cannot transfer values in app code", "DataCloneError");
    }
    const memory = new MapCtor();
    const stack = []; // [source, copy, keys, next index]

    // shallow copies v, or returns it when it is a primitive. Objects
    // whose members still need copying go on the stack.
    function shallow(v) {
      if (typeof v === "symbol") throw cannot(call(symToString, v));
      if (typeof v === "function") throw cannot(call(fnToString, v));
      if (v === null || typeof v !== "object") return v;
      const seen = memory.get(v);
      if (seen !== undefined) return seen;
      const special = host.kind(v);
      if (special === "proxy") throw cannot("#<Object>");
      if (special === "promise") throw cannot("#<Promise>");
      let copy;
      let walk = true;
      if (special === "array") {
        copy = new ArrayCtor(v.length);
      } else if (special === "error") {
        const name = v.name;
        const Ctor = typeof name === "string" && Object.hasOwn(ERRORS, name) ? ERRORS[name] : Error;
        copy = Object.create(Ctor.prototype);
        const msg = Object.getOwnPropertyDescriptor(v, "message");
        if (msg && "value" in msg) Object.defineProperty(copy, "message", { value: String(msg.value), writable: true, configurable: true });
        const trace = v.stack;
        if (typeof trace === "string") Object.defineProperty(copy, "stack", { value: trace, writable: true, configurable: true });
        memory.set(v, copy);
        if (Object.hasOwn(v, "cause")) {
          stack_push(v, copy, ["cause"], true);
        }
        return copy;
      } else if (is(getTime, v)) {
        copy = new DateCtor(call(getTime, v));
        walk = false;
      } else if (is(regexSource, v) && v !== RegExp.prototype) {
        copy = new RegExpCtor(call(regexSource, v), call(regexFlags, v));
        walk = false;
      } else if (is(bufferLength, v)) {
        copy = call(bufferSlice, v, 0);
        walk = false;
      } else if (call(typedTag, v) !== undefined) {
        const buf = shallow(call(typedBuffer, v));
        copy = new CTORS[call(typedTag, v)](buf, call(typedOffset, v), call(typedLength, v));
        walk = false;
      } else if (is(viewLength, v)) {
        copy = new DataViewCtor(shallow(call(viewBuffer, v)), call(viewOffset, v), call(viewLength, v));
        walk = false;
      } else if (is(mapSize, v)) {
        copy = new MapCtor();
        memory.set(v, copy);
        stack.push({ map: [...call(mapEntries, v)], copy, i: 0 });
        return copy;
      } else if (is(setSize, v)) {
        copy = new SetCtor();
        memory.set(v, copy);
        stack.push({ set: [...call(setValues, v)], copy, i: 0 });
        return copy;
      } else if (is(weakMapHas, v, {})) {
        throw cannot("#<WeakMap>");
      } else if (is(weakSetHas, v, {})) {
        throw cannot("#<WeakSet>");
      } else if (is(boolValue, v)) {
        copy = Object(call(boolValue, v));
        walk = false;
      } else if (is(numValue, v)) {
        copy = Object(call(numValue, v));
        walk = false;
      } else if (is(strValue, v)) {
        copy = Object(call(strValue, v));
        walk = false;
      } else if (is(symValue, v)) {
        throw cannot("Symbol()");
      } else {
        copy = {};
      }
      memory.set(v, copy);
      if (walk) stack_push(v, copy, keys(v), false);
      return copy;
    }

    function stack_push(source, copy, names, own) {
      stack.push({ source, copy, names, i: 0, own });
    }

    const root = shallow(value);
    while (stack.length > 0) {
      const top = stack[stack.length - 1];
      if (top.map) {
        if (top.i >= top.map.length) {
          stack.pop();
          continue;
        }
        const [k, v] = top.map[top.i++];
        const kc = shallow(k);
        call(mapSet, top.copy, kc, shallow(v));
        continue;
      }
      if (top.set) {
        if (top.i >= top.set.length) {
          stack.pop();
          continue;
        }
        call(setAdd, top.copy, shallow(top.set[top.i++]));
        continue;
      }
      if (top.i >= top.names.length) {
        stack.pop();
        continue;
      }
      const name = top.names[top.i++];
      if (!hasOwn(top.source, name)) continue; // deleted by a getter
      const v = shallow(top.source[name]);
      Object.defineProperty(top.copy, name, { value: v, writable: true, enumerable: !top.own, configurable: true });
    }
    return root;
  }

  Object.defineProperty(globalThis, "structuredClone", { value: structuredClone, writable: true, enumerable: false, configurable: true });
});
