// The web globals of backend.js: Headers, Request, Response, fetch,
// TextEncoder and TextDecoder (the rest of the web API, crypto included,
// is package jsvm's, shared with access.js). They follow the WHATWG and W3C
// shapes closely enough that ordinary handler code runs unchanged; bodies
// are whole byte arrays rather than streams.
//
// This file is one function expression. web.go runs it once per runtime
// with `host`, the Go functions that do the work (UTF-8, hashing, HTTP),
// and keeps what it returns: the helpers Go uses to build a request and
// read a response. Nothing here is reachable from user code except the
// globals it installs, and those keep their state in private fields, so
// a handler cannot forge a request or read a key it did not import.
(function (host) {
  "use strict";

  const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

  function normalizeName(name) {
    name = String(name);
    if (!TOKEN.test(name)) throw new TypeError(`invalid header name: ${JSON.stringify(name)}`);
    return name.toLowerCase();
  }

  function normalizeValue(value) {
    value = String(value).replace(/^[\t\n\r ]+|[\t\n\r ]+$/g, "");
    if (/[\0\r\n]/.test(value)) throw new TypeError("a header value may not contain NUL, CR or LF");
    return value;
  }

  class Headers {
    #list = []; // [name, value] pairs, names lowercase, in insertion order

    constructor(init) {
      if (init === undefined || init === null) return;
      if (init instanceof Headers) {
        for (const [k, v] of init.#list) this.#list.push([k, v]);
      } else if (typeof init === "object" && typeof init[Symbol.iterator] === "function") {
        for (const pair of init) {
          const p = [...pair];
          if (p.length !== 2) throw new TypeError("each header must be a [name, value] pair");
          this.append(p[0], p[1]);
        }
      } else if (typeof init === "object") {
        for (const k of Object.keys(init)) this.append(k, init[k]);
      } else {
        throw new TypeError("Headers takes an object, an array of [name, value] pairs or Headers");
      }
    }
    append(name, value) {
      this.#list.push([normalizeName(name), normalizeValue(value)]);
    }
    set(name, value) {
      const n = normalizeName(name);
      const v = normalizeValue(value);
      const i = this.#list.findIndex(([k]) => k === n);
      if (i < 0) {
        this.#list.push([n, v]);
        return;
      }
      this.#list[i] = [n, v];
      this.#list = this.#list.filter(([k], j) => k !== n || j === i);
    }
    get(name) {
      const n = normalizeName(name);
      const vs = this.#list.filter(([k]) => k === n).map(([, v]) => v);
      if (vs.length === 0) return null;
      return vs.join(", ");
    }
    getSetCookie() {
      return this.#list.filter(([k]) => k === "set-cookie").map(([, v]) => v);
    }
    has(name) {
      const n = normalizeName(name);
      return this.#list.some(([k]) => k === n);
    }
    delete(name) {
      const n = normalizeName(name);
      this.#list = this.#list.filter(([k]) => k !== n);
    }
    forEach(fn, thisArg) {
      for (const [k, v] of this.entries()) fn.call(thisArg, v, k, this);
    }
    *entries() {
      // Sorted and combined, as the standard iterates.
      const names = [...new Set(this.#list.map(([k]) => k))].sort();
      for (const n of names) yield [n, this.get(n)];
    }
    *keys() {
      for (const [k] of this.entries()) yield k;
    }
    *values() {
      for (const [, v] of this.entries()) yield v;
    }
    [Symbol.iterator]() {
      return this.entries();
    }
    get [Symbol.toStringTag]() {
      return "Headers";
    }
    static pairs(h) {
      return h.#list.map(([k, v]) => [k, v]);
    }
  }
  const headerPairs = Headers.pairs;
  delete Headers.pairs;

  // bytes turns a BufferSource into a Uint8Array over the same memory.
  function bytes(x) {
    if (x instanceof Uint8Array) return x;
    if (x instanceof ArrayBuffer) return new Uint8Array(x);
    if (ArrayBuffer.isView(x)) return new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
    return null;
  }

  function isPlainObject(x) {
    if (x === null || typeof x !== "object") return false;
    const p = Object.getPrototypeOf(x);
    return p === Object.prototype || p === null || Array.isArray(x);
  }

  // bodyOf reads a body init: a string, bytes, or (handoff's shortcut) a
  // plain object or array sent as JSON. It returns the bytes (a copy) and
  // the content type the body implies, if any.
  function bodyOf(init, what) {
    if (init === undefined || init === null) return [null, null];
    if (typeof init === "string") return [new Uint8Array(host.encode(init)), "text/plain;charset=UTF-8"];
    const b = bytes(init);
    if (b) return [b.slice(), null];
    if (isPlainObject(init)) return [new Uint8Array(host.encode(JSON.stringify(init))), "application/json"];
    throw new TypeError(`${what}: a body must be a string, an ArrayBuffer, a typed array or a plain object (sent as JSON), not ${Object.prototype.toString.call(init)}`);
  }

  // Body is what Request and Response share: one read of the bytes.
  class Body {
    #bytes;
    #used = false;
    constructor(b) {
      this.#bytes = b;
    }
    get bodyUsed() {
      return this.#used;
    }
    #take() {
      if (this.#used) return Promise.reject(new TypeError("the body was already read; read it once, e.g. const text = await request.text()"));
      this.#used = true;
      return Promise.resolve(this.#bytes || new Uint8Array(0));
    }
    arrayBuffer() {
      return this.#take().then((b) => b.slice().buffer);
    }
    bytes() {
      return this.#take().then((b) => b.slice());
    }
    text() {
      return this.#take().then((b) => host.decode(b, false));
    }
    json() {
      return this.text().then((t) => JSON.parse(t));
    }
    static peek(body) {
      return body.#bytes;
    }
    static set(body, b) {
      body.#bytes = b;
    }
  }
  const peek = Body.peek;
  const setBody = Body.set;
  delete Body.peek;
  delete Body.set;

  const STATUS_TEXT = {
    200: "OK", 201: "Created", 202: "Accepted", 204: "No Content", 301: "Moved Permanently", 302: "Found",
    303: "See Other", 304: "Not Modified", 307: "Temporary Redirect", 308: "Permanent Redirect",
    400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
    409: "Conflict", 413: "Content Too Large", 415: "Unsupported Media Type", 422: "Unprocessable Content",
    429: "Too Many Requests", 500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
    504: "Gateway Timeout",
  };

  class Response extends Body {
    #status;
    #statusText;
    #headers;
    #url = "";
    #redirected = false;

    constructor(body, init) {
      init = init === undefined || init === null ? {} : init;
      if (typeof init !== "object") throw new TypeError("new Response(body, init): init must be an object such as {status: 200, headers: {...}}");
      const [b, type] = bodyOf(body, "new Response");
      super(b);
      const status = init.status === undefined ? 200 : init.status;
      if (!Number.isInteger(status) || status < 200 || status > 599) {
        throw new RangeError(`new Response: status ${status} is not a whole number from 200 to 599`);
      }
      if ((status === 204 || status === 205 || status === 304) && b !== null && b.length > 0) {
        throw new TypeError(`new Response: a ${status} response has no body`);
      }
      this.#status = status;
      this.#statusText = init.statusText === undefined ? STATUS_TEXT[status] || "" : String(init.statusText);
      this.#headers = new Headers(init.headers);
      if (type && !this.#headers.has("content-type")) this.#headers.set("content-type", type);
    }
    get status() {
      return this.#status;
    }
    get statusText() {
      return this.#statusText;
    }
    get ok() {
      return this.#status >= 200 && this.#status <= 299;
    }
    get headers() {
      return this.#headers;
    }
    get url() {
      return this.#url;
    }
    get redirected() {
      return this.#redirected;
    }
    get type() {
      return "default";
    }
    clone() {
      if (this.bodyUsed) throw new TypeError("cannot clone a response whose body was read");
      const r = new Response(peek(this), { status: this.#status, statusText: this.#statusText, headers: this.#headers });
      r.#url = this.#url;
      r.#redirected = this.#redirected;
      return r;
    }
    get [Symbol.toStringTag]() {
      return "Response";
    }
    static json(data, init) {
      const text = JSON.stringify(data);
      if (text === undefined) throw new TypeError("Response.json: the value has no JSON form");
      const r = new Response(text, init);
      if (!init || !new Headers(init.headers).has("content-type")) r.headers.set("content-type", "application/json");
      return r;
    }
    static redirect(url, status) {
      status = status === undefined ? 302 : status;
      if (![301, 302, 303, 307, 308].includes(status)) throw new RangeError(`Response.redirect: ${status} is not a redirect status`);
      return new Response(null, { status, headers: { location: String(url) } });
    }
    // fromHost builds the response of an outbound fetch.
    static fromHost(raw) {
      // Status 1xx and others outside 200-599 cannot be made by the
      // constructor; the network can still answer them.
      const st = raw.status >= 200 && raw.status <= 599 && !([204, 205, 304].includes(raw.status) && raw.body.byteLength > 0) ? raw.status : 200;
      const r = new Response(raw.body, { status: st, statusText: raw.statusText, headers: raw.headers });
      r.#status = raw.status;
      r.#url = raw.url;
      r.#redirected = raw.redirected;
      return r;
    }
    static wire(r) {
      return { status: r.#status, headers: headerPairs(r.#headers), body: peek(r) };
    }
  }
  const fromHost = Response.fromHost;
  const wireOfResponse = Response.wire;
  delete Response.fromHost;
  delete Response.wire;

  // Query is request.query: the URL's query parameters (handoff's own
  // addition: the runtime has no URL class).
  class Query {
    #pairs;
    constructor(pairs) {
      this.#pairs = pairs;
    }
    get(name) {
      const p = this.#pairs.find(([k]) => k === name);
      return p ? p[1] : null;
    }
    getAll(name) {
      return this.#pairs.filter(([k]) => k === name).map(([, v]) => v);
    }
    has(name) {
      return this.#pairs.some(([k]) => k === name);
    }
    *entries() {
      for (const [k, v] of this.#pairs) yield [k, v];
    }
    [Symbol.iterator]() {
      return this.entries();
    }
    toString() {
      return this.#pairs.map(([k, v]) => encodeURIComponent(k) + "=" + encodeURIComponent(v)).join("&");
    }
  }

  const METHOD = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

  class Request extends Body {
    #method;
    #url;
    #headers;
    #path = "";
    #query = null;
    #redirect = "follow";

    constructor(input, init) {
      init = init === undefined || init === null ? {} : init;
      if (typeof init !== "object") throw new TypeError("new Request(url, init): init must be an object such as {method: \"POST\", headers: {...}, body}");
      let url, method = "GET", headers, body = null, type = null, redirect = "follow";
      if (input instanceof Request) {
        url = input.#url;
        method = input.#method;
        headers = input.#headers;
        body = peek(input);
        redirect = input.#redirect;
      } else {
        url = String(input);
      }
      if (init.method !== undefined) {
        method = String(init.method);
        if (!METHOD.test(method)) throw new TypeError(`invalid method ${JSON.stringify(method)}`);
        if (["CONNECT", "TRACE", "TRACK"].includes(method.toUpperCase())) throw new TypeError(`fetch cannot send ${method} requests`);
        if (["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"].includes(method.toUpperCase())) method = method.toUpperCase();
      }
      if (init.headers !== undefined) headers = init.headers;
      if (init.body !== undefined) [body, type] = bodyOf(init.body, "fetch");
      if (init.redirect !== undefined) {
        if (!["follow", "error", "manual"].includes(init.redirect)) throw new TypeError(`redirect must be "follow", "error" or "manual", not ${JSON.stringify(init.redirect)}`);
        redirect = init.redirect;
      }
      if ((method === "GET" || method === "HEAD") && body !== null) throw new TypeError(`a ${method} request has no body`);
      super(body);
      this.#method = method;
      this.#url = url;
      this.#headers = new Headers(headers);
      if (type && !this.#headers.has("content-type")) this.#headers.set("content-type", type);
      this.#redirect = redirect;
    }
    get method() {
      return this.#method;
    }
    get url() {
      return this.#url;
    }
    get headers() {
      return this.#headers;
    }
    get redirect() {
      return this.#redirect;
    }
    // path is the part of the URL after /api on the app's site, and
    // query its parameters: set on the requests of the app's HTTP lane.
    get path() {
      return this.#path;
    }
    get query() {
      return this.#query || new Query([]);
    }
    get [Symbol.toStringTag]() {
      return "Request";
    }
    static incoming(method, url, path, query, headers, body) {
      const r = new Request(url, { headers });
      r.#method = method;
      r.#path = path;
      r.#query = new Query(query);
      // Set after construction: the constructor refuses a GET with a
      // body, and a client may still send one.
      setBody(r, body === null ? null : new Uint8Array(body));
      return r;
    }
    static out(r) {
      return { method: r.#method, url: r.#url, headers: headerPairs(r.#headers), body: peek(r), redirect: r.#redirect };
    }
  }
  const makeRequest = Request.incoming;
  const outOfRequest = Request.out;
  delete Request.incoming;
  delete Request.out;

  function fetch(input, init) {
    let req;
    try {
      req = new Request(input, init);
    } catch (err) {
      return Promise.reject(err);
    }
    const o = outOfRequest(req);
    return host.fetch(o.url, o.method, o.headers, o.body, o.redirect).then(fromHost);
  }

  // toWire reads what fetch(request, ctx) returned.
  function toWire(v) {
    if (v instanceof Response) return wireOfResponse(v);
    if (v === undefined || v === null) return { status: 204, headers: [], body: null };
    if (typeof v === "string") return wireOfResponse(new Response(v));
    if (isPlainObject(v) && !Array.isArray(v)) {
      const extra = Object.keys(v).filter((k) => !["status", "statusText", "headers", "body"].includes(k));
      if (extra.length > 0) {
        throw new TypeError(`fetch returned an object with ${extra.map((k) => JSON.stringify(k)).join(", ")}; return new Response(body, {status, headers}) or a plain {status, headers, body}`);
      }
      return wireOfResponse(new Response(v.body, { status: v.status, statusText: v.statusText, headers: v.headers }));
    }
    throw new TypeError(`fetch returned ${Object.prototype.toString.call(v)}; return new Response(body, {status, headers}) or a plain {status, headers, body}`);
  }

  class TextEncoder {
    get encoding() {
      return "utf-8";
    }
    encode(s) {
      return new Uint8Array(host.encode(s === undefined ? "" : String(s)));
    }
  }

  class TextDecoder {
    #fatal;
    constructor(label, options) {
      const l = label === undefined ? "utf-8" : String(label).trim().toLowerCase();
      if (l !== "utf-8" && l !== "utf8" && l !== "unicode-1-1-utf-8") throw new RangeError(`TextDecoder: only utf-8 is supported, not ${JSON.stringify(label)}`);
      this.#fatal = !!(options && options.fatal);
    }
    get encoding() {
      return "utf-8";
    }
    get fatal() {
      return this.#fatal;
    }
    decode(input) {
      if (input === undefined) return "";
      const b = bytes(input);
      if (!b) throw new TypeError("TextDecoder.decode takes an ArrayBuffer or a typed array");
      return host.decode(b, this.#fatal);
    }
  }

  const globals = { Headers, Request, Response, fetch, TextEncoder, TextDecoder };
  for (const [name, value] of Object.entries(globals)) {
    Object.defineProperty(globalThis, name, { value, writable: true, enumerable: false, configurable: true });
  }
  return { makeRequest, toWire };
});
