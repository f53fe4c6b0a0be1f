package backend_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// The handlers below report what they saw by writing it to the "out"
// database of the fake, so the assertions are about outcomes.

func TestOnChangeReceivesTheEvent(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  await ctx.db.put({ _id: "seen", event }, { db: "out" })
}`)
	hc := newFake()
	doc := json.RawMessage(`{"_id":"j1","_rev":"2-b","status":"pending","n":1}`)
	ev := appcode.ChangeEvent{DB: "jobs", DocID: "j1", Doc: doc, OldDoc: json.RawMessage(`{"_id":"j1","_rev":"1-a"}`), Seq: 42, Attempt: 3}
	if err := b.OnChange(context.Background(), ev, hc); err != nil {
		t.Fatal(err)
	}
	got := asJSON(hc.mustDoc(t, "out", "seen")["event"])
	want := `{"attempt":3,"dbName":"jobs","deleted":false,"doc":{"_id":"j1","_rev":"2-b","n":1,"status":"pending"},"docId":"j1","oldDoc":{"_id":"j1","_rev":"1-a"},"seq":42}`
	if got != want {
		t.Fatalf("event\n got %s\nwant %s", got, want)
	}
	// A delete: doc and oldDoc are null when absent.
	ev = appcode.ChangeEvent{DB: "jobs", DocID: "j2", Seq: 43, Deleted: true, Attempt: 1}
	if err := b.OnChange(context.Background(), ev, hc); err != nil {
		t.Fatal(err)
	}
	got = asJSON(hc.mustDoc(t, "out", "seen")["event"])
	want = `{"attempt":1,"dbName":"jobs","deleted":true,"doc":null,"docId":"j2","oldDoc":null,"seq":43}`
	if got != want {
		t.Fatalf("delete event\n got %s\nwant %s", got, want)
	}
}

// TestOnChangeOldDocIsAnOrdinaryProperty: oldDoc is parsed when first
// read, yet behaves like the other fields: spread, listed, reassigned.
func TestOnChangeOldDocIsAnOrdinaryProperty(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  const keys = Object.keys(event).join(",")
  const spread = { ...event }
  const first = event.oldDoc, again = event.oldDoc
  event.oldDoc = { replaced: true }
  await ctx.db.put({ _id: "seen", keys, spreadRev: spread.oldDoc._rev, same: first === again,
    after: event.oldDoc, d: Object.getOwnPropertyDescriptor(event, "oldDoc").writable }, { db: "out" })
}`)
	hc := newFake()
	ev := appcode.ChangeEvent{DB: "jobs", DocID: "j1", Doc: json.RawMessage(`{"_id":"j1","_rev":"2-b"}`),
		OldDoc: json.RawMessage(`{"_id":"j1","_rev":"1-a","status":"pending"}`), Seq: 7, Attempt: 1}
	if err := b.OnChange(context.Background(), ev, hc); err != nil {
		t.Fatal(err)
	}
	seen := hc.mustDoc(t, "out", "seen")
	delete(seen, "_rev")
	got := asJSON(seen)
	want := `{"_id":"seen","after":{"replaced":true},"d":true,"keys":"dbName,docId,doc,oldDoc,seq,deleted,attempt","same":true,"spreadRev":"1-a"}`
	if got != want {
		t.Fatalf("saw\n got %s\nwant %s", got, want)
	}
}

func TestDBRoundTrip(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`function check(ok, what) { if (!ok) throw new Error("check failed: " + what) }
export async function onChange(event, ctx) {
  const r = await ctx.db.put({ _id: "a", status: "new", n: 1 })
  check(r.id === "a" && typeof r.rev === "string", "put result " + JSON.stringify(r))
  const a = await ctx.db.get("a")
  check(a.status === "new" && a._rev === r.rev && a._id === "a", "get " + JSON.stringify(a))
  // _rev inside the body is ignored; ifRev guards the write.
  const r2 = await ctx.db.put({ ...a, status: "next", _rev: "bogus" }, { ifRev: a._rev })
  check(r2.rev !== r.rev, "new rev")
  // An explicit id wins over _id; ifRev null means none, "" is refused
  // (it would write without the check the caller asked for).
  await ctx.db.put({ _id: "ignored", status: "x" }, { id: "b", ifRev: null })
  await ctx.db.put({ status: "x" }, { id: "c" })
  const empty = await ctx.db.put({ status: "y" }, { id: "c", ifRev: "" }).catch((e) => e)
  check(empty.code === "invalid" && /ifRev is empty/.test(empty.message), "empty ifRev on put: " + empty)
  const emptyDel = await ctx.db.delete("c", { ifRev: "" }).catch((e) => e)
  check(emptyDel.code === "invalid", "empty ifRev on delete: " + emptyDel)
  check((await ctx.db.get("b")).status === "x", "explicit id")
  // ifAbsent reports the existing revision.
  const again = await ctx.db.put({ _id: "b", status: "y" }, { ifAbsent: true })
  check(again.existing === true && (await ctx.db.get("b")).status === "x", "ifAbsent")
  // Pages of 2 over 5 matches, following .next.
  for (const id of ["q1", "q2", "q3", "q4", "q5"]) await ctx.db.put({ _id: id, kind: { k: 1 } })
  const seen = []
  let after, pages = 0
  do {
    const page = await ctx.db.query({ field: "kind", key: { k: 1 }, limit: 2, after })
    check(Array.isArray(page), "page is an array")
    check(!Object.keys(page).includes("next"), "next is not enumerable")
    for (const d of page) seen.push(d._id)
    after = page.next
    pages++
  } while (after)
  check(seen.join() === "q1,q2,q3,q4,q5" && pages === 3, "query " + seen + " in " + pages)
  const last = await ctx.db.query({ field: "kind", key: { k: 1 } })
  check(last.length === 5 && last.next === null, "single page next " + last.next)
  // delete, then get is null
  const d = await ctx.db.delete("q5", { ifRev: (await ctx.db.get("q5"))._rev })
  check(d.id === "q5" && typeof d.rev === "string", "delete result")
  check((await ctx.db.get("q5")) === null, "deleted doc reads null")
  // Promise.all runs several at once.
  const many = await Promise.all(["q1", "q2", "q3"].map((id) => ctx.db.get(id)))
  check(many.map((d) => d._id).join() === "q1,q2,q3", "Promise.all")
  await ctx.db.put({ _id: "done", ok: true }, { db: "out" })
}`)
	hc := newFake()
	if err := b.OnChange(context.Background(), event("jobs", "x", nil), hc); err != nil {
		t.Fatal(err)
	}
	hc.mustDoc(t, "out", "done")
	if a := hc.mustDoc(t, "jobs", "a"); a["status"] != "next" || a["_rev"] != "2-r" {
		t.Fatalf("a: %v", a)
	}
	if hc.doc("jobs", "ignored") != nil || hc.mustDoc(t, "jobs", "c")["status"] != "x" {
		t.Fatal("explicit id not used")
	}
}

func TestDBErrorsCarryCodeAndReason(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`async function attempt(p) {
  try { await p; return "ok" }
  catch (err) { return { isError: err instanceof Error, code: err.code, forbidden: err.forbidden ?? null, message: err.message } }
}
export async function onChange(event, ctx) {
  const out = {}
  out.conflict = await attempt(ctx.db.put({ _id: "a", v: 2 }, { ifRev: "9-old" }))
  out.conflictMissing = await attempt(ctx.db.put({ _id: "nope" }, { ifRev: "1-a" }))
  out.forbidden = await attempt(ctx.db.put({ _id: "b", secret: true }))
  out.notFound = await attempt(ctx.db.delete("missing"))
  out.badDoc = await attempt(ctx.db.put(5))
  out.badOption = await attempt(ctx.db.put({ _id: "a" }, { ifrev: "1-r" }))
  out.badID = await attempt(ctx.db.get(""))
  out.badQuery = await attempt(ctx.db.query({ key: 1 }))
  out.noKey = await attempt(ctx.db.query({ field: "f" }))
  out.badLimit = await attempt(ctx.db.query({ field: "f", key: 1, limit: 0 }))
  out.badIfAbsent = await attempt(ctx.db.put({ _id: "a" }, { ifAbsent: "yes" }))
  // The seed's test: a lost race is err.code === "conflict".
  try { await ctx.db.put({ _id: "a" }, { ifRev: "0-x" }) } catch (err) { out.isConflict = err.code === "conflict" }
  await ctx.db.put({ _id: "report", out }, { db: "out" })
}`)
	hc := newFake()
	hc.seed("jobs", map[string]any{"_id": "a", "v": 1})
	hc.forbid = func(db string, doc map[string]any) string {
		if doc["secret"] == true {
			return "only the owner may write secrets"
		}
		return ""
	}
	if err := b.OnChange(context.Background(), event("jobs", "a", nil), hc); err != nil {
		t.Fatal(err)
	}
	out := hc.mustDoc(t, "out", "report")["out"].(map[string]any)
	want := map[string]string{
		"conflict":        `{"code":"conflict","forbidden":null,"isError":true,"message":"jobs/a is no longer at revision 9-old; read it again and retry"}`,
		"conflictMissing": `{"code":"conflict","forbidden":null,"isError":true,"message":"jobs/nope is no longer at revision 1-a; read it again and retry"}`,
		"forbidden":       `{"code":"forbidden","forbidden":"only the owner may write secrets","isError":true,"message":"access.js refused the write: only the owner may write secrets"}`,
		"notFound":        `{"code":"not_found","forbidden":null,"isError":true,"message":"jobs/missing does not exist"}`,
		"isConflict":      `true`,
	}
	for k, w := range want {
		if got := asJSON(out[k]); got != w {
			t.Errorf("%s:\n got %s\nwant %s", k, got, w)
		}
	}
	invalid := map[string]string{
		"badDoc":      "ctx.db.put: needs a document object first, not 5",
		"badOption":   `ctx.db.put: unknown option "ifrev"; the options are db, id, ifRev, ifAbsent`,
		"badID":       "ctx.db.get needs a document id string first",
		"badQuery":    "ctx.db.query: needs a field",
		"noKey":       "ctx.db.query: needs a key",
		"badLimit":    "option limit must be a whole number of at least 1, not 0",
		"badIfAbsent": `option ifAbsent must be true or false, not "yes"`,
	}
	for k, msg := range invalid {
		m, _ := out[k].(map[string]any)
		if m["code"] != "invalid" || m["isError"] != true || !strings.Contains(fmt.Sprint(m["message"]), msg) {
			t.Errorf("%s: got %v, want code invalid with %q", k, out[k], msg)
		}
	}
}

func TestUncaughtDBErrorNamesTheLine(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  const job = event.doc
  await ctx.db.put({ ...job, status: "running" }, { ifRev: "0-stale" })
}`)
	hc := newFake()
	err := b.OnChange(context.Background(), event("jobs", "a", json.RawMessage(`{"_id":"a","_rev":"1-r"}`)), hc)
	if err == nil || !strings.Contains(err.Error(), "backend.js:3:") || !strings.Contains(err.Error(), "is no longer at revision 0-stale") {
		t.Fatalf("got %v", err)
	}
	t.Log(err)
}

func TestThrowReportsMessageAndLine(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  if (event.docId === "sync") throw new Error("boom")
  await null
  if (event.docId === "async") throw new TypeError("later")
  if (event.docId === "value") throw { reason: "odd" }
  return Promise.reject("plain")
}`)
	cases := map[string][]string{
		"sync":  {"backend.js:2:", "Error: boom", "onChange"},
		"async": {"backend.js:4:", "TypeError: later"},
		"value": {`{"reason":"odd"}`},
		"other": {`"plain"`},
	}
	for id, parts := range cases {
		err := b.OnChange(context.Background(), event("jobs", id, nil), newFake())
		var je *jsvm.JSError
		if !errors.As(err, &je) {
			t.Fatalf("%s: got %v (%T), want a *jsvm.JSError", id, err, err)
		}
		for _, p := range parts {
			if !strings.Contains(err.Error(), p) {
				t.Errorf("%s: %q does not contain %q", id, err, p)
			}
		}
	}
}

func TestDBDefaultsInOnChangeAndIsRequiredInScheduled(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export const config = { scheduled: { interval: "5s" } }
export async function onChange(event, ctx) {
  await ctx.db.put({ _id: "x", from: "onChange" })
  const doc = await ctx.db.get("x")
  await ctx.db.put({ _id: "y", sawX: doc !== null }, { db: "other" })
}
export async function scheduled(event, ctx) {
  let msg = "", code = ""
  try { await ctx.db.get("x") } catch (err) { msg = err.message; code = err.code }
  await ctx.db.put({ _id: "tick", at: event.scheduledTime, code, msg }, { db: "ticks" })
}`)
	hc := newFake()
	if err := b.OnChange(context.Background(), event("jobs", "j", nil), hc); err != nil {
		t.Fatal(err)
	}
	hc.mustDoc(t, "jobs", "x")
	if hc.mustDoc(t, "other", "y")["sawX"] != true {
		t.Fatal("get did not default to the event's database")
	}
	if err := b.Scheduled(context.Background(), appcode.TickEvent{ScheduledTime: 1234}, hc); err != nil {
		t.Fatal(err)
	}
	tick := hc.mustDoc(t, "ticks", "tick")
	if tick["at"] != 1234.0 || tick["code"] != "invalid" || !strings.Contains(tick["msg"].(string), `ctx.db.get needs the database in scheduled: pass {db: "name"}`) {
		t.Fatalf("tick: %v", tick)
	}
}

func TestLogAndConsoleReachTheAppLog(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`console.log("loading", { v: 1 })
export async function onChange(event, ctx) {
  ctx.log("warn", "lease expired", { id: "j1", attempts: 2 })
  ctx.log("loud", "unknown level")
  ctx.log("debug", "no fields", undefined)
  ctx.log("error", "scalar fields", 7)
  console.log("plain", 1, { a: [1] }, null, undefined)
  console.info("info")
  console.warn("warn")
  console.error(new Error("bad"))
  console.debug("debug")
}`)
	if !strings.Contains(e.logs.String(), `msg="loading {\"v\":1}"`) {
		t.Fatalf("console at load time should reach the server logger: %s", e.logs)
	}
	hc := newFake()
	if err := b.OnChange(context.Background(), event("jobs", "j", nil), hc); err != nil {
		t.Fatal(err)
	}
	lines := hc.lines()
	want := []logLine{
		{"warn", "lease expired", `{"id":"j1","attempts":2}`},
		{"info", "unknown level", ""},
		{"debug", "no fields", ""},
		{"error", "scalar fields", `{"value":7}`},
		{"info", `plain 1 {"a":[1]} null undefined`, ""},
		{"info", "info", ""},
		{"warn", "warn", ""},
		{"error", "Error: bad\n\tat onChange (backend.js:10:", ""},
		{"debug", "debug", ""},
	}
	if len(lines) != len(want) {
		t.Fatalf("got %d lines, want %d: %q", len(lines), len(want), lines)
	}
	for i, w := range want {
		g := lines[i]
		if g.Level != w.Level || g.Fields != w.Fields || !strings.HasPrefix(g.Message, w.Message) {
			t.Errorf("line %d: got %q, want %q", i, g, w)
		}
	}
}

func TestSecretsAndApp(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  let writeErr = ""
  try { ctx.secrets.TOKEN = "x" } catch (err) { writeErr = err.message }
  let ctxErr = ""
  try { ctx.db = null } catch (err) { ctxErr = err.constructor.name }
  await ctx.db.put({ _id: "r", token: ctx.secrets.TOKEN, missing: ctx.secrets.MISSING === undefined,
    has: "TOKEN" in ctx.secrets, hasMissing: "MISSING" in ctx.secrets, app: ctx.app, writeErr, ctxErr }, { db: "out" })
}`)
	hc := newFake()
	hc.secrets["TOKEN"] = "s3cret"
	if err := b.OnChange(context.Background(), event("jobs", "j", nil), hc); err != nil {
		t.Fatal(err)
	}
	r := hc.mustDoc(t, "out", "r")
	delete(r, "_rev")
	want := `{"_id":"r","app":{"name":"jobs","owner":"alice"},"ctxErr":"TypeError","has":true,"hasMissing":false,"missing":true,"token":"s3cret","writeErr":"ctx.secrets is read-only; set secrets with the CLI or the console"}`
	if got := asJSON(r); got != want {
		t.Fatalf("\n got %s\nwant %s", got, want)
	}
}

// The handler's ctx reads the running call from Go: a ctx kept in a global
// by one event acts for whichever event runs later, never the old one.
func TestCtxActsForTheRunningCall(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export const config = { onChange: { concurrency: 1 } }
let kept
export async function onChange(event, ctx) {
  kept ??= ctx
  await kept.db.put({ _id: event.docId, app: kept.app.name, secret: kept.secrets.S ?? null })
}`)
	first, second := newFake(), newFake()
	second.name, second.secrets["S"] = "other", "two"
	for _, hc := range []*fakeHC{first, second} {
		if err := b.OnChange(context.Background(), event("jobs", hc.name, nil), hc); err != nil {
			t.Fatal(err)
		}
	}
	if d := second.mustDoc(t, "jobs", "other"); d["app"] != "other" || d["secret"] != "two" {
		t.Fatalf("second call: %v", d)
	}
	if first.doc("jobs", "other") != nil {
		t.Fatal("the kept ctx wrote to the first call's context")
	}
}

func TestConcurrentEventsKeepTheirOwnContext(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export const config = { onChange: { concurrency: 8 } }
export async function onChange(event, ctx) {
  const r = await ctx.db.put({ _id: event.docId, n: event.seq })
  const d = await ctx.db.get(event.docId)
  if (d._rev !== r.rev || d.n !== event.seq) throw new Error("crossed wires")
  ctx.log("info", "done " + event.docId)
}`)
	var wg sync.WaitGroup
	fakes := make([]*fakeHC, 32)
	for i := range fakes {
		fakes[i] = newFake()
		wg.Go(func() {
			ev := event("jobs", fmt.Sprintf("d%d", i), nil)
			ev.Seq = int64(i)
			if err := b.OnChange(context.Background(), ev, fakes[i]); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i, f := range fakes {
		id := fmt.Sprintf("d%d", i)
		if d := f.mustDoc(t, "jobs", id); d["n"] != float64(i) {
			t.Fatalf("%s: %v", id, d)
		}
		if l := f.lines(); len(l) != 1 || l[0].Message != "done "+id {
			t.Fatalf("%s log: %v", id, l)
		}
	}
}

func TestLimitsAreReported(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange(event, ctx) {
  if (event.docId === "deep") { const f = (n) => f(n + 1) + 1; f(0) }
  if (event.docId === "big") return "x".repeat(2 ** 30)
}`)
	err := b.OnChange(context.Background(), event("jobs", "deep", nil), newFake())
	if !errors.Is(err, jsvm.ErrStackOverflow) || !strings.Contains(err.Error(), "call stack exceeded") {
		t.Fatalf("deep: %v", err)
	}
	err = b.OnChange(context.Background(), event("jobs", "big", nil), newFake())
	if !errors.Is(err, jsvm.ErrHeapLimit) || !strings.Contains(err.Error(), "of memory") {
		t.Fatalf("big: %v", err)
	}
	// The pool still serves.
	if err := b.OnChange(context.Background(), event("jobs", "fine", nil), newFake()); err != nil {
		t.Fatal(err)
	}
}

func TestClosedBackendRefusesCalls(t *testing.T) {
	e := newEnv(t)
	b := e.compile(`export async function onChange() {}`)
	b.Close()
	err := b.OnChange(context.Background(), event("jobs", "a", nil), newFake())
	if errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("got %v", err)
	}
}
