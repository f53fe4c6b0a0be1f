// The test API of `handoff test`, installed before each test file runs.
// Go provides the natives (api.go); this file gives them their JS shape:
// promises that reject with real Errors whose stack is the test's line,
// and the assertions.
(function (native) {
  "use strict";

  // show renders a value for a failure message.
  function show(v) {
    if (typeof v === "string") return JSON.stringify(v);
    if (v === undefined) return "undefined";
    if (typeof v === "function") return "[function " + (v.name || "anonymous") + "]";
    if (typeof v === "bigint") return v + "n";
    if (v instanceof RegExp) return String(v);
    if (v instanceof Error) return v.name + ": " + v.message;
    try {
      const s = JSON.stringify(v, (k, x) => (x instanceof RegExp ? String(x) : x));
      if (s === undefined) return String(v);
      return s.length > 300 ? s.slice(0, 300) + "…" : s;
    } catch (e) {
      return String(v);
    }
  }

  // fail makes the Error an assertion throws. It is made here, but its
  // stack also holds the test's own line, which is what the runner shows.
  function fail(message) {
    const e = new Error(message);
    e.name = "AssertionError";
    return e;
  }

  function isPlain(v) {
    return v !== null && typeof v === "object" && !Array.isArray(v);
  }

  function equal(a, b) {
    if (Object.is(a, b)) return true;
    if (Array.isArray(a) || Array.isArray(b)) {
      if (!Array.isArray(a) || !Array.isArray(b) || a.length !== b.length) return false;
      return a.every((x, i) => equal(x, b[i]));
    }
    if (isPlain(a) && isPlain(b)) {
      if (a instanceof Date || b instanceof Date) return a instanceof Date && b instanceof Date && a.getTime() === b.getTime();
      const ka = Object.keys(a).filter((k) => a[k] !== undefined);
      const kb = Object.keys(b).filter((k) => b[k] !== undefined);
      if (ka.length !== kb.length) return false;
      return ka.every((k) => Object.prototype.hasOwnProperty.call(b, k) && equal(a[k], b[k]));
    }
    return false;
  }

  // contains: every field of pattern is in v with an equal value, nested
  // objects compared the same way (arrays compare whole).
  function contains(v, pattern) {
    if (pattern instanceof RegExp) return typeof v === "string" && pattern.test(v);
    if (!isPlain(pattern) || !isPlain(v)) return equal(v, pattern);
    return Object.keys(pattern).every((k) => contains(v[k], pattern[k]));
  }

  function matches(actual, pattern) {
    if (pattern instanceof RegExp) return typeof actual === "string" && pattern.test(actual);
    if (typeof pattern === "string") return typeof actual === "string" && actual.includes(pattern);
    if (isPlain(pattern)) return contains(actual, pattern);
    throw new TypeError("toMatch takes a RegExp, a string or an object pattern, not " + show(pattern));
  }

  function expect(actual) {
    const checks = (negate) => {
      const check = (ok, what) => {
        if (ok === negate) throw fail("expected " + show(actual) + (negate ? " not " : " ") + what);
      };
      return {
        toBe: (expected) => check(Object.is(actual, expected), "to be " + show(expected)),
        toEqual: (expected) => check(equal(actual, expected), "to equal " + show(expected)),
        toMatch: (pattern) => check(matches(actual, pattern), "to match " + show(pattern)),
        toContain: (item) =>
          check(
            (typeof actual === "string" && actual.includes(item)) ||
              (Array.isArray(actual) && actual.some((x) => equal(x, item))),
            "to contain " + show(item),
          ),
        toBeTruthy: () => check(!!actual, "to be truthy"),
        toBeNull: () => check(actual === null, "to be null"),
        toBeDefined: () => check(actual !== undefined, "to be defined"),
        toBeGreaterThan: (n) => check(actual > n, "to be greater than " + show(n)),
        toBeLessThan: (n) => check(actual < n, "to be less than " + show(n)),
        toHaveLength: (n) => check(actual != null && actual.length === n, "to have length " + n),
      };
    };
    const m = checks(false);
    m.not = checks(true);
    return m;
  }

  // handoffError turns a native rejection into the Error a handler's
  // ctx.db call would reject with: .code, .forbidden, .message, and a
  // stack that starts at the test's call.
  function rejecting(site, p) {
    return p.then(undefined, (e) => {
      if (e && e.handoff) {
        site.message = e.message;
        site.code = e.code;
        if (e.forbidden !== undefined) site.forbidden = e.forbidden;
        throw site;
      }
      throw e;
    });
  }

  function actorView(actor) {
    const db = (name) => {
      if (typeof name !== "string" || name === "") throw new TypeError('db needs a database name, e.g. t.db("jobs")');
      return Object.freeze({
        put: (doc, opts) => rejecting(new Error(), native.put(actor, name, doc, opts)),
        get: (id) => rejecting(new Error(), native.get(actor, name, id)),
        del: (id, opts) => rejecting(new Error(), native.del(actor, name, id, opts)),
        query: (q) => rejecting(new Error(), native.query(actor, name, q)),
      });
    };
    const fetch = (input, init) => rejecting(new Error(), native.fetch(actor, input, init)).then(response);
    return { db, fetch };
  }

  function response(r) {
    return Object.freeze({
      status: r.status,
      ok: r.status >= 200 && r.status < 300,
      headers: r.headers,
      body: r.body,
      text: () => r.body,
      json: () => JSON.parse(r.body),
    });
  }

  // A test's expectations that take a promise: when one is not awaited,
  // the runner still waits for it before the test passes.
  function expectRejection(pending, code, promise, reason) {
    const site = fail("");
    const p = Promise.resolve(promise).then(
      (v) => {
        site.message = "expected the call to be refused with " + code + ", but it succeeded" + (v && v.rev ? " (rev " + v.rev + ")" : "");
        throw site;
      },
      (e) => {
        if (!e || e.code !== code) {
          site.message = "expected " + code + ", got " + (e && e.code ? e.code + ": " + e.message : show(e));
          throw site;
        }
        if (reason !== undefined && !matches(e.forbidden, reason)) {
          site.message = "expected the reason to match " + show(reason) + ", got " + show(e.forbidden);
          throw site;
        }
        return e;
      },
    );
    pending.push(p);
    return p;
  }

  function makeT(pending) {
    const anon = actorView({});
    const t = {
      db: anon.db,
      fetch: anon.fetch,
      as(user, opts) {
        if (typeof user !== "string" || user === "") throw new TypeError('t.as needs a user name, e.g. t.as("sam", {roles: ["worker"]})');
        const roles = (opts && opts.roles) || [];
        if (!Array.isArray(roles) || !roles.every((r) => typeof r === "string" && r !== ""))
          throw new TypeError('t.as: roles must be a list of names, e.g. {roles: ["worker"]}');
        return actorView({ user, roles });
      },
      handler(name) {
        if (typeof name !== "string" || name === "") throw new TypeError('t.handler needs a handler name, e.g. t.handler("scheduled")');
        return actorView({ handler: name });
      },
      advance: (d) => rejecting(new Error(), native.advance(d)),
      settle: () => rejecting(new Error(), native.settle()),
      history: (db, id) => rejecting(new Error(), native.history(db, id)),
      logs: () => rejecting(new Error(), native.logs()),
      events: (opts) => rejecting(new Error(), native.events(!!(opts && opts.dead))),
      stubFetch: (handler) => native.stubFetch(handler),
      expect,
      expectForbidden: (promise, reason) => expectRejection(pending, "forbidden", promise, reason),
      expectConflict: (promise) => expectRejection(pending, "conflict", promise),
    };
    t.owner = actorView({ user: native.owner });
    t.backend = actorView({ handler: "onChange" });
    return Object.freeze(t);
  }

  globalThis.test = function test(name, fn) {
    if (typeof name !== "string" || name === "") throw new TypeError('test needs a name first, e.g. test("a job is done", async (t) => { ... })');
    if (typeof fn !== "function") throw new TypeError('test "' + name + '" needs a function second, e.g. test("' + name + '", async (t) => { ... })');
    native.register(name, async function () {
      const pending = [];
      await fn(makeT(pending));
      await Promise.all(pending);
    });
  };

  const lines = (level) => (...args) => native.log(level, args.map((a) => (typeof a === "string" ? a : show(a))).join(" "));
  globalThis.console = Object.freeze({ log: lines("info"), info: lines("info"), warn: lines("warn"), error: lines("error"), debug: lines("debug") });
})
