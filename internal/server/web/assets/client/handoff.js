// handoff.js — the browser client of a handoff server (docs/console.md).
//
//   import { connect } from "/client/handoff.js";
//   const hd = connect({ server: "", token: "hnd_..." });
//   const app = hd.app("alice/jobs");
//   await app.db("jobs").put({ kind: "job", status: "pending", attempts: 0, input: "hi" });
//   const stop = app.db("jobs").liveQuery({ field: "status", key: "pending" }, (docs) => render(docs));
//
// liveQuery takes {field, key}, {field, from, to} (a range), {field,
// prefix} or {} (every document); see DB.liveQuery.
//
// Every failure is a HandoffError (an Error) with .code — the API's error
// code, such as "conflict" or "forbidden" — .status, and .forbidden holding
// the access function's reason.
//
// Live data comes from one feed connection per app per tab, shared by all
// changes() and liveQuery() subscribers. The feed needs the Authorization
// header, which EventSource cannot send, so it is read with fetch() and
// parsed here. It reconnects by itself with backoff and resumes after the
// last sequence it saw (Last-Event-ID): nothing is missed or repeated.

/** An error from the server or the network. */
export class HandoffError extends Error {
  constructor(code, message, { status = 0, forbidden } = {}) {
    super(message);
    this.name = "HandoffError";
    this.code = code;
    this.status = status;
    if (forbidden !== undefined) this.forbidden = forbidden;
  }
}

/**
 * connect returns a client for one server and credential.
 * server: the base URL (by default the server this module came from, so
 * an app's page, on its own origin, reaches the API). token: a bearer
 * token. path: the ledger label of this client's writes ("console", "cli",
 * "import"; anything else is recorded as "http").
 */
export function connect({ server = apiOrigin, token = "", path = "" } = {}) {
  return new Client(String(server).replace(/\/+$/, ""), token, path);
}

// apiOrigin is where this module was served from: the API's origin. A
// site imports it through /_handoff/client/, a redirect to the API's
// origin, and a module's URL is the one it was finally fetched from.
const apiOrigin = new URL(import.meta.url).origin;

class Client {
  constructor(server, token, path) {
    this.server = server;
    this.token = token;
    this.path = path;
    this.apps_ = new Map();
  }

  /** request sends one API call and returns its decoded JSON answer. */
  async request(method, url, { body, query } = {}) {
    const headers = { Accept: "application/json" };
    if (this.token) headers.Authorization = "Bearer " + this.token;
    if (this.path) headers["X-Handoff-Path"] = this.path;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let res;
    try {
      res = await fetch(this.server + url + queryString(query), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
      });
    } catch (err) {
      throw (
        (await refusedOrigin(this.server, url)) ||
        new HandoffError("unavailable", `cannot reach the handoff server (${err.message}); check that it is running`)
      );
    }
    if (!res.ok) throw await errorFrom(res);
    return res.json();
  }

  /** whoami: {user, admin} of this client's token. */
  whoami() {
    return this.request("GET", "/v1/whoami");
  }

  /** apps: the apps this user owns or is a member of. */
  async apps() {
    return (await this.request("GET", "/v1/apps")).apps;
  }

  /** app returns the handle of app "owner/name". */
  app(ref) {
    let a = this.apps_.get(ref);
    if (!a) {
      a = new App(this, ref);
      this.apps_.set(ref, a);
    }
    return a;
  }
}

class App {
  constructor(client, ref) {
    const [owner, name, extra] = String(ref).split("/");
    if (!owner || !name || extra !== undefined) {
      throw new HandoffError("invalid", `app "${ref}" is not of the form owner/name`);
    }
    this.client = client;
    this.ref = ref;
    this.base = `/v1/apps/${encodeURIComponent(owner)}/${encodeURIComponent(name)}`;
    this.dbs_ = new Map();
  }

  get feed() {
    return sharedFeed(this);
  }

  /** db returns the handle of one database of the app. */
  db(name) {
    let d = this.dbs_.get(name);
    if (!d) {
      d = new DB(this, name);
      this.dbs_.set(name, d);
    }
    return d;
  }

  /** dbs lists the app's databases by name. */
  async dbs() {
    return (await this.client.request("GET", this.base + "/dbs")).dbs;
  }

  /** events lists waiting onChange events, or dead ones with {dead: true}. */
  async events({ dead = false, after, limit } = {}) {
    const q = { dead: dead ? "true" : undefined, after, limit };
    return (await this.client.request("GET", this.base + "/events", { query: q })).events;
  }

  /** replay delivers a dead event again. */
  replay(seq) {
    return this.client.request("POST", `${this.base}/events/${seq}/replay`);
  }

  /** logs returns the handler log lines after line id `after`. */
  async logs({ after, limit } = {}) {
    return (await this.client.request("GET", this.base + "/logs", { query: { after, limit } })).logs;
  }

  /** schedule describes the scheduled handler: interval, last tick and error. */
  schedule() {
    return this.client.request("GET", this.base + "/schedule");
  }

  /** transitions counts the moves of `field` across a database's ledger. */
  async transitions(db, field = "status") {
    const r = await this.client.request("GET", `${this.base}/dbs/${encodeURIComponent(db)}/transitions`, { query: { field } });
    return r.transitions;
  }

  /**
   * head finds the latest sequence this user can see, so a feed can start
   * "now" instead of replaying the app's whole history: a galloping search
   * over the changes API with one-entry pages (about 2·log2(seq) calls).
   */
  async head() {
    const after = async (seq) => {
      const r = await this.client.request("GET", this.base + "/changes", { query: { since: seq, limit: 1 } });
      return r.changes.length ? r.changes[0].seq : 0;
    };
    let lo = await after(0);
    if (!lo) return 0;
    let hi = lo * 2 + 1024;
    for (let s; (s = await after(hi)); ) {
      lo = s;
      hi = s * 2;
    }
    // A change exists after every x < lo and none after hi.
    while (lo < hi) {
      const mid = Math.floor((lo + hi) / 2);
      const s = await after(mid);
      if (s) lo = s;
      else hi = mid;
    }
    return lo;
  }

  /** onStatus reports the live feed's state: {state, error, retryAt}. */
  onStatus(listener) {
    return this.feed.watch(listener);
  }

  /**
   * changes calls onChange(entry) for each change after `since` (default:
   * from now), in commit order, of one database or all. Entries are
   * {seq, id, db, rev, deleted, doc, writer, path, time}. Returns stop().
   */
  changes({ since, db } = {}, onChange, { onError } = {}) {
    return this.subscribe(since, db, { onEntry: onChange }, onError);
  }

  /**
   * liveQuery(db, field, key, callback) calls callback(docs) with the
   * documents of `db` whose `field` equals `key`, sorted by _id: first the
   * current result, then after every batch of changes that enters,
   * changes or leaves it. liveQuery(db, query, callback) takes any query
   * DB.liveQuery takes. Returns stop().
   */
  liveQuery(db, field, key, callback, opts) {
    if (field !== null && typeof field === "object") return this.db(db).liveQuery(field, key, callback);
    return this.db(db).liveQuery({ field, key }, callback, opts);
  }

  /**
   * liveDocs is liveQuery over every document of `db`, with each
   * document's latest ledger entry: callback gets [{id, rev, seq, doc,
   * writer, path, time}] sorted by id. Its first result replays the
   * database's change log, so it knows when each document last changed.
   */
  liveDocs(db, callback, { onError } = {}) {
    return this.live(db, callback, onError, {
      snapshot: async () => {
        const heads = new Map();
        for (let since = 0; ; ) {
          const r = await this.client.request("GET", `${this.base}/dbs/${encodeURIComponent(db)}/changes`, {
            query: { since, limit: 1000 },
          });
          for (const e of r.changes) {
            if (e.deleted) heads.delete(e.id);
            else heads.set(e.id, e);
          }
          if (!r.changes.length || r.last <= since) break;
          since = r.last;
        }
        return [...heads.values()];
      },
      keep: (e) => !e.deleted,
      out: (e) => e,
    });
  }

  // live keeps a sorted result current. It notes the feed position and
  // subscribes from there, takes the snapshot while the feed's changes
  // wait in a buffer, then applies them and every later one. A change
  // that raced the snapshot may be in both; the newer revision (by
  // generation) wins, so the result always ends as the database is.
  // order sorts the result's entries (default: by id).
  live(db, callback, onError, { snapshot, keep, out, order = byID }) {
    const current = new Map(); // id -> {id, rev, ...}
    let buffer = [];
    let dirty = false;
    const apply = (e) => {
      const had = current.get(e.id);
      if (had && generation(had.rev) >= generation(e.rev)) return;
      if (keep(e)) current.set(e.id, e);
      else if (had) current.delete(e.id);
      else return;
      dirty = true;
    };
    const emit = () => {
      dirty = false;
      const list = [...current.values()].sort(order);
      callback(list.map(out));
    };
    let stopped = false;
    let unsubscribe = null;
    (async () => {
      const pos = await this.position();
      if (stopped) return;
      unsubscribe = this.feed.add({
        pos,
        db,
        onError,
        onEntry: (e) => (buffer ? buffer.push(e) : apply(e)),
        onFlush: () => !buffer && dirty && emit(),
      });
      const snap = await snapshot();
      if (stopped) return;
      for (const e of snap) current.set(e.id, e);
      const early = buffer;
      buffer = null;
      early.forEach(apply);
      emit();
    })().catch((err) => {
      if (unsubscribe) unsubscribe(); // no snapshot, no live result
      if (!stopped) (onError || console.error)(err);
    });
    return () => {
      stopped = true;
      if (unsubscribe) unsubscribe();
    };
  }

  // position is where a new subscriber starts "from now": the shared
  // feed's position when it runs, else the latest sequence.
  async position() {
    const f = this.feed;
    return f.active ? f.pos : await this.head();
  }

  subscribe(since, db, handlers, onError) {
    let stopped = false;
    let unsubscribe = null;
    (async () => {
      const pos = since == null ? await this.position() : Number(since);
      if (!Number.isInteger(pos) || pos < 0) {
        throw new HandoffError("invalid", `since=${since} is not a sequence number; pass 0 or a seq from an earlier change`);
      }
      if (stopped) return;
      unsubscribe = this.feed.add({ pos, db, onError, ...handlers });
    })().catch((err) => {
      if (!stopped) (onError || console.error)(err);
    });
    return () => {
      stopped = true;
      if (unsubscribe) unsubscribe();
    };
  }
}

class DB {
  constructor(app, name) {
    this.app = app;
    this.name = name;
    this.base = `${app.base}/dbs/${encodeURIComponent(name)}`;
  }

  docURL(id) {
    // "." and ".." would be removed by URL path cleaning.
    const seg = id === "." ? "%2E" : id === ".." ? "%2E%2E" : encodeURIComponent(id);
    return `${this.base}/docs/${seg}`;
  }

  /**
   * put writes doc as the next revision. The id comes from opts.id, then
   * doc._id; without either the server mints one. Returns {ok, id, rev,
   * seq} (and existing: true for an ifAbsent no-op).
   */
  put(doc, { id, ifRev, ifAbsent } = {}) {
    if (ifRev === "") return Promise.reject(emptyIfRev());
    id = id ?? doc?._id;
    const query = { ifRev, ifAbsent: ifAbsent ? "true" : undefined };
    const c = this.app.client;
    if (id == null) return c.request("POST", `${this.base}/docs`, { body: doc, query });
    return c.request("PUT", this.docURL(String(id)), { body: doc, query });
  }

  /** get returns the document, or null when it is absent or deleted. */
  async get(id) {
    try {
      return await this.app.client.request("GET", this.docURL(String(id)));
    } catch (err) {
      if (err.code === "not_found" && err.status === 404) return null;
      throw err;
    }
  }

  /** del writes a tombstone (compare-and-set with ifRev). */
  del(id, { ifRev } = {}) {
    if (ifRev === "") return Promise.reject(emptyIfRev());
    return this.app.client.request("DELETE", this.docURL(String(id)), { query: { ifRev } });
  }

  /**
   * query returns one page of documents, with a .next cursor: by
   * {field, key} (equal to key, by id), {field, from, to} (a range, from
   * inclusive, to exclusive, either left out for an open end) or {field,
   * prefix} (strings starting with prefix), those two by the field's
   * value, then id. Numbers come before strings in a range.
   */
  async query({ field, key, from, to, prefix, limit, after } = {}) {
    const json = (v) => (v === undefined ? undefined : JSON.stringify(v));
    const r = await this.app.client.request("GET", `${this.base}/query`, {
      query: { field, key: json(key), from: json(from), to: json(to), prefix, limit, after },
    });
    const docs = r.docs;
    docs.next = r.next || "";
    return docs;
  }

  /**
   * liveQuery calls callback(docs) with the documents the query picks,
   * first the current result, then after every batch of changes that
   * enters, changes or leaves it. query is one of
   *
   *   {field, key}       field equals key; sorted by _id
   *   {field, from, to}  field within [from, to); either may be left out
   *   {field, prefix}    field is a string starting with prefix
   *   {}                 every document of the database; sorted by _id
   *
   * Ranges and prefixes are sorted by the field's value, then _id:
   * numbers before strings, strings by code point, as the server does.
   * Returns stop().
   */
  liveQuery(query, callback, { onError } = {}) {
    const q = query || {};
    const pick = picker(q);
    const snapshot = async () => {
      const docs = [];
      let after;
      do {
        const page = q.field === undefined ? await this.scan({ limit: 1000, after }) : await this.query({ ...q, limit: 1000, after });
        docs.push(...page);
        after = page.next;
      } while (after);
      return docs.map((doc) => ({ id: doc._id, rev: doc._rev, doc }));
    };
    const ranged = q.field !== undefined && q.key === undefined;
    return this.app.live(this.name, callback, onError, {
      snapshot,
      keep: (e) => !e.deleted && pick(e.doc),
      out: (e) => e.doc,
      order: ranged ? (a, b) => compareValues(valueAt(a.doc, q.field), valueAt(b.doc, q.field)) || byID(a, b) : byID,
    });
  }

  /** liveDoc calls callback(doc) with the document, or null while it is absent, and again on each change. Returns stop(). */
  liveDoc(id, callback, { onError } = {}) {
    id = String(id);
    return this.app.live(this.name, (docs) => callback(docs[0] || null), onError, {
      snapshot: async () => {
        const doc = await this.get(id);
        return doc ? [{ id, rev: doc._rev, doc }] : [];
      },
      keep: (e) => e.id === id && !e.deleted,
      out: (e) => e.doc,
    });
  }

  /** scan returns one page of every document of the database, by id, with a .next cursor. */
  async scan({ limit, after } = {}) {
    const r = await this.app.client.request("GET", `${this.base}/docs`, { query: { limit, after } });
    const docs = r.docs;
    docs.next = r.next || "";
    return docs;
  }

  /** history returns every revision of the document, oldest first: the ledger. */
  async history(id) {
    return (await this.app.client.request("GET", this.docURL(String(id)) + "/history")).history;
  }
}

// ---- the shared feed -------------------------------------------------------

const feeds = new Map(); // server|token|app -> Feed

function sharedFeed(app) {
  const c = app.client;
  const key = `${c.server}|${c.token}|${app.ref}`;
  let f = feeds.get(key);
  if (!f) {
    f = new Feed(c, app.base + "/feed", () => feeds.delete(key));
    feeds.set(key, f);
  }
  return f;
}

const STALL_MS = 40_000; // the server sends a heartbeat every 15 s
const BACKOFF_MIN_MS = 250;
const BACKOFF_MAX_MS = 10_000;

// Feed is one streaming connection to an app's feed, fanned out to its
// subscribers. Each subscriber keeps its own position (the last seq it
// was given or passed over); the connection starts after the lowest, and
// each subscriber takes only what is newer than its own.
class Feed {
  constructor(client, url, forget) {
    this.client = client;
    this.url = url;
    this.forget = forget;
    this.subs = new Set();
    this.listeners = new Set();
    this.gen = 0; // bumped to drop a connection and start another
    this.active = false;
    this.pos = 0; // the connection has delivered every change up to pos
    this.status = { state: "idle" };
  }

  watch(listener) {
    this.listeners.add(listener);
    listener(this.status);
    return () => this.listeners.delete(listener);
  }

  setStatus(s) {
    this.status = s;
    for (const l of this.listeners) l(s);
  }

  add(sub) {
    this.subs.add(sub);
    if (!this.active || sub.pos < this.pos) this.restart();
    return () => {
      this.subs.delete(sub);
      if (this.subs.size === 0) this.close();
    };
  }

  close() {
    this.gen++;
    this.active = false;
    if (this.abort) this.abort.abort();
    this.forget();
    this.setStatus({ state: "idle" });
  }

  restart() {
    this.gen++;
    if (this.abort) this.abort.abort();
    this.active = true;
    this.run(this.gen);
  }

  async run(gen) {
    let failures = 0;
    while (gen === this.gen && this.subs.size) {
      const since = Math.min(...[...this.subs].map((s) => s.pos));
      this.pos = since;
      const abort = new AbortController();
      this.abort = abort;
      let stall;
      let stallMs = STALL_MS;
      const alive = () => {
        clearTimeout(stall);
        stall = setTimeout(() => abort.abort(), stallMs);
      };
      let ended = null; // the error the server gave for closing the stream
      this.setStatus({ state: "connecting" });
      try {
        const headers = { Accept: "text/event-stream", "Last-Event-ID": String(since) };
        if (this.client.token) headers.Authorization = "Bearer " + this.client.token;
        alive();
        let res;
        try {
          res = await fetch(this.client.server + this.url + queryString({ since }), {
            headers,
            signal: abort.signal,
            cache: "no-store",
          });
        } catch (err) {
          // An abort is ours (a stall, a restart), not the server's refusal.
          const refused = err.name === "AbortError" ? null : await refusedOrigin(this.client.server, this.url);
          throw refused || new HandoffError("unavailable", `the live feed cannot reach the server (${err.message})`);
        }
        if (!res.ok) throw await errorFrom(res);
        // The server says how often it sends a heartbeat; three silent
        // intervals mean the connection is dead.
        const beat = Number(res.headers.get("X-Handoff-Heartbeat"));
        if (beat > 0) stallMs = 3 * beat + 1000;
        alive();
        await readEvents(res.body, alive, (ev) => {
          if (gen !== this.gen) return;
          if (ev.event === "error") ended = errorFromBody(ev.data);
          else if (ev.event === "ready") {
            failures = 0;
            this.setStatus({ state: "live" });
          } else if (ev.event === "change") this.deliver(JSON.parse(ev.data));
          else if (ev.comment !== undefined) this.heartbeat(ev.comment);
          else if (ev.flush) this.flush();
        });
        throw ended || new HandoffError("unavailable", "the server closed the live feed");
      } catch (err) {
        if (gen !== this.gen) return;
        const e = err instanceof HandoffError ? err : new HandoffError("unavailable", `the live feed broke off (${err.message})`);
        if (fatal(e)) {
          this.active = false;
          this.setStatus({ state: "failed", error: e });
          for (const s of this.subs) if (s.onError) s.onError(e);
          return;
        }
        const wait = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** failures++) * (0.5 + Math.random() / 2);
        this.setStatus({ state: "retrying", error: e, retryAt: Date.now() + wait });
        await new Promise((r) => setTimeout(r, wait));
      } finally {
        clearTimeout(stall);
      }
    }
  }

  deliver(entry) {
    if (entry.seq <= this.pos) return;
    this.pos = entry.seq;
    for (const s of this.subs) {
      if (entry.seq <= s.pos) continue;
      s.pos = entry.seq;
      if (!s.db || s.db === entry.db) {
        try {
          s.onEntry(entry);
        } catch (err) {
          console.error("handoff: a change handler threw", err);
        }
      }
    }
  }

  // heartbeat: ": heartbeat <last>" says the server has looked at every
  // change up to last and none was for us, so positions move on.
  heartbeat(comment) {
    const m = /^heartbeat (\d+)$/.exec(comment.trim());
    if (!m) return;
    const last = Number(m[1]);
    if (last > this.pos) this.pos = last;
    for (const s of this.subs) if (last > s.pos) s.pos = last;
  }

  flush() {
    for (const s of this.subs) {
      if (s.onFlush) {
        try {
          s.onFlush();
        } catch (err) {
          console.error("handoff: a live callback threw", err);
        }
      }
    }
  }
}

// fatal errors are ones a retry cannot fix: a bad or revoked credential,
// no access, an unknown app, a malformed request.
function fatal(err) {
  return ["unauthorized", "forbidden", "access_error", "not_found", "invalid"].includes(err.code);
}

// errorFromBody reads the feed's "error" event, {"error": {code, message}}.
function errorFromBody(data) {
  try {
    const e = JSON.parse(data).error;
    if (e && e.code) return new HandoffError(e.code, e.message || e.code, { forbidden: e.reason });
  } catch {
    // not the documented shape
  }
  return new HandoffError("unavailable", "the live feed ended with an error");
}

// readEvents parses a server-sent event stream (the WHATWG format) and
// calls on({event, data, id}) for each event, on({comment}) for each
// comment line and on({flush: true}) after each chunk read from the
// network, so that subscribers can redraw once per batch.
async function readEvents(body, onBytes, on) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let ev = { event: "", data: [], id: undefined };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      onBytes();
      buf += decoder.decode(value, { stream: true });
      let nl;
      while ((nl = buf.indexOf("\n")) >= 0) {
        let line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        if (line.endsWith("\r")) line = line.slice(0, -1);
        if (line === "") {
          if (ev.data.length) on({ event: ev.event || "message", data: ev.data.join("\n"), id: ev.id });
          ev = { event: "", data: [], id: undefined };
          continue;
        }
        if (line.startsWith(":")) {
          on({ comment: line.slice(1) });
          continue;
        }
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "event") ev.event = val;
        else if (field === "data") ev.data.push(val);
        else if (field === "id") ev.id = val;
      }
      on({ flush: true });
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

// ---- helpers ---------------------------------------------------------------

async function errorFrom(res) {
  let body = null;
  try {
    body = await res.json();
  } catch {
    // not JSON: a proxy's page, say
  }
  const e = body && body.error;
  if (e && e.code) return new HandoffError(e.code, e.message || e.code, { status: res.status, forbidden: e.reason });
  const code = { 401: "unauthorized", 403: "forbidden", 404: "not_found", 413: "too_large" }[res.status] ||
    (res.status >= 500 || res.status === 408 || res.status === 429 ? "unavailable" : "invalid");
  return new HandoffError(code, `the server answered ${res.status} ${res.statusText}`, { status: res.status });
}

// refusedOrigin tells a refused origin from an unreachable server. A
// browser hides a refused CORS preflight from the page, which sees only a
// network error; the server's /cors route, which any origin may read,
// says whether this page's origin may call the app, and how to allow it.
// It answers null when that is not why the call failed.
async function refusedOrigin(server, url) {
  const m = /^\/v1\/apps\/([^/?]+)\/([^/?]+)/.exec(url);
  if (!m || typeof location === "undefined") return null;
  let base;
  try {
    base = new URL(server || "/", location.href);
  } catch {
    return null;
  }
  if (base.origin === location.origin) return null; // no CORS on the same origin
  try {
    const res = await fetch(`${base.origin}${base.pathname.replace(/\/+$/, "")}/v1/apps/${m[1]}/${m[2]}/cors`, {
      credentials: "omit",
      cache: "no-store",
    });
    if (!res.ok) return null;
    const a = await res.json();
    if (a.allowed || !a.error || !a.error.code) return null;
    return new HandoffError(a.error.code, a.error.message || a.error.code, { status: 403 });
  } catch {
    return null; // the server is unreachable after all
  }
}

// An empty ifRev would be dropped from the query and the write made
// without its check; it is a rev read from the wrong place, so refuse it.
function emptyIfRev() {
  return new HandoffError("invalid", "ifRev is empty; pass the _rev you read, or leave ifRev out to write without a check");
}

function queryString(q) {
  if (!q) return "";
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) if (v !== undefined && v !== null && v !== "") p.set(k, String(v));
  const s = p.toString();
  return s ? "?" + s : "";
}

/** generation is the number before '-' in a _rev. */
export function generation(rev) {
  return parseInt(String(rev || "0"), 10) || 0;
}

// valueAt reads a top-level or dotted field of a document.
function valueAt(doc, field) {
  let v = doc;
  for (const p of String(field).split(".")) {
    if (v === null || typeof v !== "object" || Array.isArray(v) || !(p in v)) return undefined;
    v = v[p];
  }
  return v;
}

// picker turns a liveQuery query into a test of a document, the same
// test the server's query makes.
function picker(q) {
  const { field, key, from, to, prefix } = q;
  const kinds = [key !== undefined, from !== undefined || to !== undefined, prefix !== undefined].filter(Boolean).length;
  if (field === undefined) {
    if (kinds) throw new HandoffError("invalid", "a liveQuery with key, from, to or prefix needs a field; pass {field, ...}, or {} for every document");
    return () => true;
  }
  if (kinds > 1) throw new HandoffError("invalid", "a liveQuery takes key, or from and to, or prefix, not several");
  if (key !== undefined) return (doc) => valueAt(doc, field) !== undefined && sameJSON(valueAt(doc, field), key);
  if (prefix !== undefined) {
    const p = String(prefix);
    return (doc) => typeof valueAt(doc, field) === "string" && valueAt(doc, field).startsWith(p);
  }
  if (!kinds) throw new HandoffError("invalid", "a liveQuery with a field needs key, from and/or to, or prefix");
  for (const b of [from, to]) {
    if (b !== undefined && typeof b !== "number" && typeof b !== "string") {
      throw new HandoffError("invalid", `range bound ${JSON.stringify(b)} is not a number or a string; ranges hold numbers and strings only`);
    }
  }
  return (doc) => {
    const v = valueAt(doc, field);
    if (typeof v !== "number" && typeof v !== "string") return false;
    return (from === undefined || compareValues(v, from) >= 0) && (to === undefined || compareValues(v, to) < 0);
  };
}

function byID(a, b) {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

// compareValues orders numbers before strings, numbers by value and
// strings by code point (UTF-8 byte order), as the server's ranges do.
function compareValues(a, b) {
  const na = typeof a === "number";
  const nb = typeof b === "number";
  if (na !== nb) return na ? -1 : 1;
  if (na) return a < b ? -1 : a > b ? 1 : 0;
  return compareText(String(a), String(b));
}

// compareText compares strings by code point. JavaScript's < compares
// UTF-16 units, where a surrogate (a code point above U+FFFF) sorts below
// U+E000–U+FFFF.
function compareText(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const sx = x >= 0xd800 && x <= 0xdfff;
    const sy = y >= 0xd800 && y <= 0xdfff;
    if (sx !== sy) return sx ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

// sameJSON compares two JSON values the way the server's query does.
function sameJSON(a, b) {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const ka = Object.keys(a);
  const kb = Object.keys(b);
  return ka.length === kb.length && ka.every((k) => Object.hasOwn(b, k) && sameJSON(a[k], b[k]));
}
