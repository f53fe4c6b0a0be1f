// URL and URLSearchParams by the WHATWG URL standard, with Node's checks
// and messages. Go parses and serialises (host.parse, host.set: the
// nlnwa/whatwg-url parser; host.formParse, host.formEncode: the
// application/x-www-form-urlencoded format); this file keeps the state and
// the links between a URL and its searchParams.
(function (host) {
  "use strict";
  const PARTS = ["href", "origin", "protocol", "username", "password", "host", "hostname", "port", "pathname", "search", "hash"];
  const HREF = 0, SEARCH = 9;

  function missing(...names) {
    const what = names.length === 1 ? `The "${names[0]}" argument must be specified` : `The "${names[0]}" and "${names[1]}" arguments must be specified`;
    const e = new TypeError(what);
    e.code = "ERR_MISSING_ARGS";
    return e;
  }

  function invalidURL(input, base) {
    const e = new TypeError("Invalid URL");
    e.code = "ERR_INVALID_URL";
    e.input = input;
    if (base !== undefined) e.base = base;
    return e;
  }

  // usv converts to a string and makes it well-formed, as WebIDL's
  // USVString does. (Go reads the URL parser's input well-formed anyway.)
  function usv(v) {
    return host.usv(`${v}`);
  }

  function serialize(list) {
    let out = "";
    for (let i = 0; i < list.length; i++) {
      if (i > 0) out += "&";
      out += host.formEncode(list[i][0]) + "=" + host.formEncode(list[i][1]);
    }
    return out;
  }

  const ITERATOR_PROTO = Object.getPrototypeOf(Object.getPrototypeOf([][Symbol.iterator]()));

  class URLSearchParams {
    #list = [];
    #url = null; // the URL whose query this is

    constructor(init) {
      if (init === undefined || init === null) return;
      if (typeof init === "object" || typeof init === "function") {
        const iter = init[Symbol.iterator];
        if (iter !== undefined) {
          if (typeof iter !== "function") throw new TypeError("Query pairs must be iterable");
          for (const pair of init) {
            if ((typeof pair !== "object" && typeof pair !== "function") || pair === null || typeof pair[Symbol.iterator] !== "function") {
              throw tupleError();
            }
            const p = [...pair];
            if (p.length !== 2) throw tupleError();
            this.#list.push([usv(p[0]), usv(p[1])]);
          }
        } else {
          for (const key of Reflect.ownKeys(init)) {
            const d = Reflect.getOwnPropertyDescriptor(init, key);
            if (d === undefined || !d.enumerable) continue;
            this.#list.push([usv(key), usv(init[key])]);
          }
        }
        return;
      }
      let s = usv(init);
      if (s[0] === "?") s = s.slice(1);
      this.#list = host.formParse(s);
    }
    get size() {
      return this.#list.length;
    }
    append(name, value) {
      if (arguments.length < 2) throw missing("name", "value");
      this.#list.push([usv(name), usv(value)]);
      this.#update();
    }
    delete(name, value) {
      if (arguments.length < 1) throw missing("name");
      const n = usv(name);
      if (value !== undefined) {
        const v = usv(value);
        this.#list = this.#list.filter(([k, x]) => k !== n || x !== v);
      } else {
        this.#list = this.#list.filter(([k]) => k !== n);
      }
      this.#update();
    }
    get(name) {
      if (arguments.length < 1) throw missing("name");
      const n = usv(name);
      const p = this.#list.find(([k]) => k === n);
      return p ? p[1] : null;
    }
    getAll(name) {
      if (arguments.length < 1) throw missing("name");
      const n = usv(name);
      return this.#list.filter(([k]) => k === n).map(([, v]) => v);
    }
    has(name, value) {
      if (arguments.length < 1) throw missing("name");
      const n = usv(name);
      if (value !== undefined) {
        const v = usv(value);
        return this.#list.some(([k, x]) => k === n && x === v);
      }
      return this.#list.some(([k]) => k === n);
    }
    set(name, value) {
      if (arguments.length < 2) throw missing("name", "value");
      const n = usv(name);
      const v = usv(value);
      const i = this.#list.findIndex(([k]) => k === n);
      if (i < 0) {
        this.#list.push([n, v]);
      } else {
        this.#list[i] = [n, v];
        this.#list = this.#list.filter(([k], j) => k !== n || j === i);
      }
      this.#update();
    }
    sort() {
      // Stable, by UTF-16 code units, as the standard says.
      const indexed = this.#list.map((p, i) => [p, i]);
      indexed.sort((a, b) => (a[0][0] < b[0][0] ? -1 : a[0][0] > b[0][0] ? 1 : a[1] - b[1]));
      this.#list = indexed.map(([p]) => p);
      this.#update();
    }
    entries() {
      return iterate(this, (p) => [p[0], p[1]]);
    }
    forEach(callback, thisArg) {
      if (typeof callback !== "function") {
        const e = new TypeError('The "callback" argument must be of type function');
        e.code = "ERR_INVALID_ARG_TYPE";
        throw e;
      }
      for (let i = 0; i < this.#list.length; i++) {
        const [k, v] = this.#list[i];
        callback.call(thisArg, v, k, this);
      }
    }
    keys() {
      return iterate(this, (p) => p[0]);
    }
    values() {
      return iterate(this, (p) => p[1]);
    }
    toString() {
      return serialize(this.#list);
    }
    #update() {
      if (this.#url) setQuery(this.#url, serialize(this.#list));
    }
    static list(p) {
      return p.#list;
    }
    static link(p, url, query) {
      p.#url = url;
      p.#list = host.formParse(query);
    }
  }
  const listOf = URLSearchParams.list;
  const link = URLSearchParams.link;
  delete URLSearchParams.list;
  delete URLSearchParams.link;
  Object.defineProperty(URLSearchParams.prototype, Symbol.iterator, { value: URLSearchParams.prototype.entries, writable: true, configurable: true });
  Object.defineProperty(URLSearchParams.prototype, Symbol.toStringTag, { value: "URLSearchParams", configurable: true });

  function tupleError() {
    const e = new TypeError("Each query pair must be an iterable [name, value] tuple");
    e.code = "ERR_INVALID_TUPLE";
    return e;
  }

  // The iterators are live, as the standard's are: they walk the list by
  // index as it is when next is called.
  const PARAMS_ITERATOR = Object.create(ITERATOR_PROTO, {
    [Symbol.toStringTag]: { value: "URLSearchParams Iterator", configurable: true },
  });
  const iterState = new WeakMap();
  Object.defineProperty(PARAMS_ITERATOR, "next", {
    value: function next() {
      const s = iterState.get(this);
      if (!s) throw new TypeError("next method called on an incompatible receiver");
      const list = listOf(s.params);
      if (s.i >= list.length) return { value: undefined, done: true };
      return { value: s.map(list[s.i++]), done: false };
    },
    writable: true,
    configurable: true,
  });
  function iterate(params, map) {
    listOf(params); // a brand check: throws for anything else
    const it = Object.create(PARAMS_ITERATOR);
    iterState.set(it, { params, map, i: 0 });
    return it;
  }

  class URL {
    #h; // the parsed URL, in Go
    #c; // its parts, as PARTS lists them
    #params = null;

    constructor(url, base) {
      if (arguments.length === 0) throw missing("url");
      const input = `${url}`;
      let h;
      if (base !== undefined) {
        const b = `${base}`;
        h = host.parse(input, b);
        if (h === null) throw invalidURL(input, b);
      } else {
        h = host.parse(input);
        if (h === null) throw invalidURL(input);
      }
      this.#h = h;
      this.#c = host.parts(h);
    }
    static canParse(url, base) {
      if (arguments.length === 0) throw missing("url");
      const input = `${url}`;
      return (base === undefined ? host.parse(input) : host.parse(input, `${base}`)) !== null;
    }
    static parse(url, base) {
      if (arguments.length === 0) throw missing("url");
      try {
        return base === undefined ? new URL(url) : new URL(url, base);
      } catch {
        return null;
      }
    }
    toString() {
      return this.#c[HREF];
    }
    toJSON() {
      return this.#c[HREF];
    }
    get href() {
      return this.#c[HREF];
    }
    set href(value) {
      const input = `${value}`;
      const h = host.parse(input);
      if (h === null) throw invalidURL(input);
      this.#h = h;
      this.#changed(true);
    }
    get searchParams() {
      if (this.#params === null) {
        this.#params = new URLSearchParams();
        link(this.#params, this, this.#c[SEARCH].slice(1));
      }
      return this.#params;
    }
    #set(part, value) {
      host.set(this.#h, part, `${value}`);
      this.#changed(part === "search");
    }
    #changed(query) {
      this.#c = host.parts(this.#h);
      if (query && this.#params !== null) link(this.#params, this, this.#c[SEARCH].slice(1));
    }
    static setQuery(url, query) {
      host.set(url.#h, "search", query);
      url.#c = host.parts(url.#h);
    }
    static setPart(url, part, value) {
      url.#set(part, value);
    }
    static part(url, i) {
      return url.#c[i];
    }
  }
  const setQuery = URL.setQuery;
  const setPart = URL.setPart;
  const part = URL.part;
  delete URL.setQuery;
  delete URL.setPart;
  delete URL.part;
  // The parts are accessors on the prototype, in the standard's order.
  PARTS.forEach((name, i) => {
    if (name === "href") return;
    const d = { get: { [name]() { return part(this, i); } }[name], enumerable: true, configurable: true };
    if (name !== "origin") {
      d.set = { [name](v) { setPart(this, name, v); } }[name];
    }
    Object.defineProperty(URL.prototype, name, d);
  });
  for (const name of ["href", "searchParams", "toString", "toJSON"]) {
    const d = Object.getOwnPropertyDescriptor(URL.prototype, name);
    d.enumerable = true;
    Object.defineProperty(URL.prototype, name, d);
  }
  Object.defineProperty(URL.prototype, Symbol.toStringTag, { value: "URL", configurable: true });

  for (const [name, value] of Object.entries({ URL, URLSearchParams })) {
    Object.defineProperty(globalThis, name, { value, writable: true, enumerable: false, configurable: true });
  }
});
