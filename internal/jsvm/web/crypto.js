// crypto: getRandomValues, randomUUID, and in crypto.subtle the digests
// and HMAC (importKey "raw", exportKey, sign, verify). Keys live in a
// WeakMap of this closure, so app code can neither forge a CryptoKey nor
// read one it imported unextractable.
(function (host) {
  "use strict";
  const DOMException = globalThis.DOMException;

  // bytes turns a BufferSource into a Uint8Array over the same memory.
  function bytes(x) {
    if (x instanceof Uint8Array) return x;
    if (x instanceof ArrayBuffer) return new Uint8Array(x);
    if (ArrayBuffer.isView(x)) return new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
    return null;
  }

  const HASHES = ["SHA-1", "SHA-256", "SHA-384", "SHA-512"];

  function hashName(h, what) {
    const n = typeof h === "string" ? h : h && h.name;
    const u = String(n).toUpperCase();
    if (!HASHES.includes(u)) throw new DOMException(`${what}: hash ${JSON.stringify(n)} is not supported; use one of ${HASHES.join(", ")}`, "NotSupportedError");
    return u;
  }

  function algName(a) {
    const n = typeof a === "string" ? a : a && a.name;
    return String(n).toUpperCase();
  }

  const keys = new WeakMap();
  function makeKey(raw, hash, extractable, usages) {
    const k = Object.create(CryptoKeyProto);
    keys.set(k, { raw, hash, extractable, usages });
    return Object.freeze(k);
  }
  function keyOf(k, usage, what) {
    const s = keys.get(k);
    if (!s) throw new TypeError(`${what}: the key must be a CryptoKey from crypto.subtle.importKey`);
    if (!s.usages.includes(usage)) throw new DOMException(`${what}: the key was imported without the "${usage}" usage`, "InvalidAccessError");
    return s;
  }
  function CryptoKey() {
    throw new TypeError("CryptoKey is made by crypto.subtle.importKey");
  }
  const CryptoKeyProto = CryptoKey.prototype;
  Object.defineProperties(CryptoKeyProto, {
    type: { get() { return keys.get(this) ? "secret" : undefined; } },
    extractable: { get() { const s = keys.get(this); return s ? s.extractable : undefined; } },
    algorithm: { get() { const s = keys.get(this); return s ? { name: "HMAC", hash: { name: s.hash }, length: s.raw.length * 8 } : undefined; } },
    usages: { get() { const s = keys.get(this); return s ? [...s.usages] : undefined; } },
    [Symbol.toStringTag]: { value: "CryptoKey" },
  });

  function settle(fn) {
    try {
      return Promise.resolve(fn());
    } catch (err) {
      return Promise.reject(err);
    }
  }

  function data(x, what) {
    const b = bytes(x);
    if (b) return b;
    if (typeof x === "string") return new Uint8Array(host.encode(x)); // handoff's shortcut
    throw new TypeError(`${what}: data must be an ArrayBuffer or a typed array (encode text with new TextEncoder().encode(s))`);
  }

  const subtle = Object.freeze({
    importKey(format, keyData, algorithm, extractable, usages) {
      return settle(() => {
        if (format !== "raw") throw new DOMException(`crypto.subtle.importKey: format ${JSON.stringify(format)} is not supported; use "raw"`, "NotSupportedError");
        if (algName(algorithm) !== "HMAC") throw new DOMException(`crypto.subtle.importKey: only HMAC keys are supported, e.g. {name: "HMAC", hash: "SHA-256"}`, "NotSupportedError");
        const hash = hashName(algorithm.hash, "crypto.subtle.importKey");
        const raw = data(keyData, "crypto.subtle.importKey").slice();
        if (raw.length === 0) throw new DOMException("crypto.subtle.importKey: the key is empty", "DataError");
        const us = [...(usages || [])].map(String);
        for (const u of us) if (u !== "sign" && u !== "verify") throw new SyntaxError(`crypto.subtle.importKey: usage ${JSON.stringify(u)} does not apply to HMAC keys; use "sign" and "verify"`);
        if (us.length === 0) throw new SyntaxError(`crypto.subtle.importKey: pass the usages, e.g. ["sign", "verify"]`);
        return makeKey(raw, hash, !!extractable, us);
      });
    },
    exportKey(format, key) {
      return settle(() => {
        const s = keys.get(key);
        if (!s) throw new TypeError("crypto.subtle.exportKey: not a CryptoKey");
        if (format !== "raw") throw new DOMException(`crypto.subtle.exportKey: format ${JSON.stringify(format)} is not supported; use "raw"`, "NotSupportedError");
        if (!s.extractable) throw new DOMException("crypto.subtle.exportKey: the key is not extractable", "InvalidAccessError");
        return s.raw.slice().buffer;
      });
    },
    sign(algorithm, key, msg) {
      return settle(() => {
        if (algName(algorithm) !== "HMAC") throw new DOMException("crypto.subtle.sign: only HMAC is supported", "NotSupportedError");
        const s = keyOf(key, "sign", "crypto.subtle.sign");
        return host.hmac(s.hash, s.raw, data(msg, "crypto.subtle.sign"));
      });
    },
    verify(algorithm, key, signature, msg) {
      return settle(() => {
        if (algName(algorithm) !== "HMAC") throw new DOMException("crypto.subtle.verify: only HMAC is supported", "NotSupportedError");
        const s = keyOf(key, "verify", "crypto.subtle.verify");
        const mac = new Uint8Array(host.hmac(s.hash, s.raw, data(msg, "crypto.subtle.verify")));
        return host.equal(mac, data(signature, "crypto.subtle.verify"));
      });
    },
    digest(algorithm, msg) {
      return settle(() => host.digest(hashName(algorithm, "crypto.subtle.digest"), data(msg, "crypto.subtle.digest")));
    },
  });

  const crypto = Object.freeze({
    subtle,
    getRandomValues(array) {
      if (!ArrayBuffer.isView(array) || array instanceof Float32Array || array instanceof Float64Array || array instanceof DataView) {
        throw new DOMException("The data argument must be an integer-type TypedArray", "TypeMismatchError");
      }
      if (array.byteLength > 65536) throw new DOMException("The requested length exceeds 65,536 bytes", "QuotaExceededError");
      bytes(array).set(new Uint8Array(host.random(array.byteLength)));
      return array;
    },
    randomUUID() {
      return host.uuid();
    },
  });

  for (const [name, value] of Object.entries({ crypto, CryptoKey })) {
    Object.defineProperty(globalThis, name, { value, writable: true, enumerable: false, configurable: true });
  }
});
