package jstest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/apptest"
	"github.com/handoff-run/handoff/internal/jstest"
	"github.com/handoff-run/handoff/internal/sim"
)

// run runs the app folder's tests and returns the results by name.
func run(t *testing.T, files map[string]string, o jstest.Options) (*jstest.Report, map[string]jstest.Result) {
	t.Helper()
	o.Dir = apptest.Folder(t, files)
	rep, err := jstest.Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]jstest.Result{}
	for _, r := range rep.Results {
		byName[r.Name] = r
	}
	return rep, byName
}

const allowAll = `export default function () { return { channels: ["all"], grant: { public: ["all"] } } }`

func TestAFailingAssertionNamesItsFileAndLine(t *testing.T) {
	t.Parallel()
	rep, res := run(t, map[string]string{
		"access.js": allowAll,
		"test/a.test.js": `test("passes", async (t) => {
  await t.db("docs").put({ _id: "a", n: 1 });
  t.expect((await t.db("docs").get("a")).n).toBe(1);
});

test("fails", async (t) => {
  await t.db("docs").put({ _id: "a", n: 1 });
  const doc = await t.db("docs").get("a");
  t.expect(doc.n).toBe(2);
});
`,
	}, jstest.Options{})
	if rep.Passed != 1 || rep.Failed != 1 {
		t.Fatalf("passed %d, failed %d; want 1 and 1: %+v", rep.Passed, rep.Failed, rep.Results)
	}
	r := res["fails"]
	if r.Message != "expected 1 to be 2" || r.At != "test/a.test.js:9:23" {
		t.Errorf("failure = %q at %q; want %q at test/a.test.js:9:23", r.Message, r.At, "expected 1 to be 2")
	}
	var out bytes.Buffer
	jstest.WriteResult(&out, r)
	if !strings.Contains(out.String(), "FAIL  test/a.test.js › fails") || !strings.Contains(out.String(), "at test/a.test.js:9:23") {
		t.Errorf("printed:\n%s", out.String())
	}
}

func TestAnAppErrorShowsTheAppsFileAndLine(t *testing.T) {
	t.Parallel()
	_, res := run(t, map[string]string{
		"access.js": `export default function (doc) {
  if (doc.kind === "bad") return doc.missing.field;
  return { channels: ["all"], grant: { public: ["all"] } };
}`,
		"backend.js": `export async function onChange(ev) {
  if (ev.doc.explode) throw new Error("boom at " + ev.doc._id);
}`,
		"test/app.test.js": `test("access.js throws", async (t) => {
  await t.db("docs").put({ _id: "a", kind: "bad" });
});

test("onChange throws", async (t) => {
  await t.db("docs").put({ _id: "b", explode: true });
  await t.settle();
  const [ev] = await t.events();
  t.expect(ev.lastError).toMatch("backend.js:2:");
  t.expect(ev.lastError).toMatch("boom at b");
});
`,
	}, jstest.Options{})
	r := res["access.js throws"]
	if r.OK || !strings.Contains(r.Message, "access_error") || !strings.Contains(r.Message, "access.js:2:") || !strings.HasPrefix(r.At, "test/app.test.js:2:") {
		t.Errorf("access.js throws: ok=%v %q at %q; want an access_error naming access.js:2 at the test's line 2", r.OK, r.Message, r.At)
	}
	if r := res["onChange throws"]; !r.OK {
		t.Errorf("onChange throws: %s at %s", r.Message, r.At)
	}
}

func TestAHungTestIsStoppedByItsTimeout(t *testing.T) {
	t.Parallel()
	rep, res := run(t, map[string]string{
		"access.js": allowAll,
		"test/hang.test.js": `test("spins", () => { while (true) {} });
test("after", async (t) => { await t.db("docs").put({ _id: "a" }); });
`,
	}, jstest.Options{Timeout: 200 * time.Millisecond})
	r := res["spins"]
	if r.OK || !strings.Contains(r.Message, "ran past its 200ms timeout") || !strings.Contains(r.Message, "--timeout") {
		t.Errorf("spins: ok=%v %q; want stopped past its 200ms timeout", r.OK, r.Message)
	}
	if !res["after"].OK || rep.Failed != 1 {
		t.Errorf("the test after a hung one: %+v", res["after"])
	}
}

const clockBackend = `export const config = { scheduled: { interval: "2s" }, onChange: { maxAttempts: 4 } };
export async function scheduled(ev, ctx) { ctx.log("info", "tick", { at: Date.now() }) }
export async function onChange(ev, ctx) {
  ctx.log("info", "attempt", { at: Date.now(), attempt: ev.attempt });
  throw new Error("always");
}`

// ticksInGo plays clockBackend for d with the engine's own harness and
// lists when each tick ran, in seconds from the start.
func ticksInGo(t *testing.T, d time.Duration) []float64 {
	env := sim.New(t, sim.Options{Dir: apptest.Folder(t, map[string]string{"access.js": allowAll, "backend.js": clockBackend})})
	env.RunFor(d)
	var out []float64
	for _, r := range env.Ticks() {
		out = append(out, r.Start.Sub(env.Start).Seconds())
	}
	return out
}

// t.advance must fire every timer due on the way at its own instant, as
// the engine's own harness (internal/sim) does in Go: the ticks at the
// same virtual instants, and each retry at the moment its event is due,
// not a millisecond before.
func TestAdvanceFiresExactlyTheTicksAndRetriesDue(t *testing.T) {
	t.Parallel()
	_, res := run(t, map[string]string{
		"access.js":  allowAll,
		"backend.js": clockBackend,
		"test/clock.test.js": `test("ten seconds", async (t) => {
  const start = Date.now();
  await t.advance("10s");
  console.log(JSON.stringify((await logged(t, "tick")).map((f) => (f.at - start) / 1000)));
  t.expect(Date.now() - start).toBe(10000);
});

test("retries when due", async (t) => {
  await t.db("docs").put({ _id: "a" });
  await t.settle();
  for (let attempt = 2; attempt <= 4; attempt++) {
    const [ev] = await t.events();
    t.expect(ev.attempts).toBe(attempt - 1);
    const due = Date.parse(ev.nextAt);
    await t.advance(due - Date.now() - 1);
    t.expect((await logged(t, "attempt")).length).toBe(attempt - 1);
    await t.advance(2);
    const runs = await logged(t, "attempt");
    t.expect(runs.length).toBe(attempt);
    t.expect(runs[attempt - 1].at - due).toBeLessThan(2);
    t.expect(runs[attempt - 1].at - due).not.toBeLessThan(0);
  }
  const [dead] = await t.events({ dead: true });
  t.expect(dead).toMatch({ docId: "a", attempts: 4, dead: true });
});

async function logged(t, m) {
  return (await t.logs()).filter((l) => l.message === m).map((l) => l.fields);
}
`,
	}, jstest.Options{})
	for _, name := range []string{"ten seconds", "retries when due"} {
		if r := res[name]; !r.OK {
			t.Fatalf("%s: %s at %s", name, r.Message, r.At)
		}
	}
	var fromJS []float64
	if err := json.Unmarshal([]byte(res["ten seconds"].Console[0]), &fromJS); err != nil {
		t.Fatal(err)
	}
	fromGo := ticksInGo(t, 10*time.Second)
	if fmt.Sprint(fromJS) != fmt.Sprint(fromGo) || len(fromGo) != 5 {
		t.Errorf("ticks at %v s in JavaScript, %v s in the engine's harness; want 2, 4, 6, 8, 10 in both", fromJS, fromGo)
	}
}

func TestStubFetchAnswersTheHandlersFetch(t *testing.T) {
	t.Parallel()
	_, res := run(t, map[string]string{
		"access.js": allowAll,
		"backend.js": `export const config = { fetch: { allow: ["api.example.com"] } };
export async function onChange(ev, ctx) {
  if (ev.doc.price !== undefined || ev.deleted) return;
  const r = await fetch("https://api.example.com/price?item=" + ev.doc._id, { method: "POST", body: JSON.stringify({ q: 1 }) });
  const { price } = await r.json();
  await ctx.db.put({ ...ev.doc, price, status: r.status }, { ifRev: ev.doc._rev });
}`,
		"test/fetch.test.js": `test("stubbed", async (t) => {
  const seen = [];
  t.stubFetch(async (req) => {
    seen.push(req.method + " " + req.url + " " + req.json().q);
    return { status: 201, body: { price: 42 } };
  });
  await t.db("docs").put({ _id: "pen" });
  await t.settle();
  t.expect(await t.db("docs").get("pen")).toMatch({ price: 42, status: 201 });
  t.expect(seen).toEqual(["POST https://api.example.com/price?item=pen 1"]);
});

test("not stubbed", async (t) => {
  await t.db("docs").put({ _id: "pen" });
  await t.settle();
  const [ev] = await t.events();
  t.expect(ev.lastError).toMatch("t.stubFetch");
});
`,
	}, jstest.Options{})
	for _, name := range []string{"stubbed", "not stubbed"} {
		if r := res[name]; !r.OK {
			t.Errorf("%s: %s at %s\n%s", name, r.Message, r.At, r.Stack)
		}
	}
}

func TestActorsRolesAndFetchLane(t *testing.T) {
	t.Parallel()
	rep, _ := run(t, map[string]string{
		"access.js": `export default function (doc, was, user, ctx) {
  if (!user) throw { forbidden: "sign in" };
  if (doc.approved && !user.roles.includes("boss")) throw { forbidden: "only a boss approves" };
  if (doc.byHandler) ctx.requireBackend("onChange");
  return { channels: ["all"] };
}`,
		"backend.js": `export async function fetch(req, ctx) {
  const body = await req.json();
  await ctx.db.put({ _id: body.id, from: "hook" }, { db: "docs" });
  return new Response(JSON.stringify({ ok: true }), { status: 202, headers: { "content-type": "application/json" } });
}`,
		"test/actors.test.js": `test("actors", async (t) => {
  await t.expectForbidden(t.db("docs").put({ _id: "a" }), "sign in");
  await t.expectForbidden(t.as("sam").db("docs").put({ _id: "a", approved: true }), /boss/);
  const { rev } = await t.as("kim", { roles: ["boss"] }).db("docs").put({ _id: "a", approved: true });
  await t.expectConflict(t.as("kim").db("docs").put({ _id: "a", approved: true }, { ifRev: "1-0" }));
  await t.expectForbidden(t.as("sam").db("docs").put({ _id: "b", byHandler: true }), "onChange");
  await t.backend.db("docs").put({ _id: "b", byHandler: true });
  t.expect((await t.history("docs", "a")).map((r) => r.writer.user)).toEqual(["kim"]);
  const res = await t.as("sam").fetch("/api/hook", { method: "POST", body: { id: "c" } });
  t.expect(res.status).toBe(202);
  t.expect(res.json()).toEqual({ ok: true });
  t.expect((await t.owner.db("docs").get("c")).from).toBe("hook");
  t.expect(rev).toMatch(/^1-/);
});

test("an unawaited expectation still counts", async (t) => {
  t.expectForbidden(t.as("sam").db("docs").put({ _id: "x" }));
});
`,
	}, jstest.Options{})
	if rep.Passed != 1 || rep.Failed != 1 {
		t.Fatalf("passed %d failed %d: %+v", rep.Passed, rep.Failed, rep.Results)
	}
	if r := rep.Results[1]; !strings.Contains(r.Message, "expected the call to be refused with forbidden, but it succeeded") {
		t.Errorf("unawaited expectation: %q", r.Message)
	}
}

func TestRunFilterJSONAndCoverage(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"access.js": `export default function (doc, was) {
  if (was && was.status === "done") throw { forbidden: "done is final" };
  return { channels: ["all"] };
}`,
		"test/flow.test.js": `test("walks", async (t) => {
  const a = await t.db("docs").put({ _id: "a", status: "new" });
  const b = await t.db("docs").put({ _id: "a", status: "done" }, { ifRev: a.rev });
  await t.expectForbidden(t.db("docs").put({ _id: "a", status: "new" }, { ifRev: b.rev }), "final");
});
test("skipped", async (t) => { t.expect(1).toBe(2) });
`,
	}
	rep, res := run(t, files, jstest.Options{Run: regexp.MustCompile("walks")})
	if len(rep.Results) != 1 || !res["walks"].OK {
		t.Fatalf("--run walks: %+v", rep.Results)
	}
	rep.Coverage.Finish(map[jstest.Transition]int{{DB: "docs", From: "new", To: "done"}: 3, {DB: "docs", From: "done", To: "archived"}: 1})
	want := []jstest.Edge{
		{Transition: jstest.Transition{DB: "docs", From: "(new)", To: "new"}, Committed: 1},
		{Transition: jstest.Transition{DB: "docs", From: "done", To: "new"}, Refused: 1},
		{Transition: jstest.Transition{DB: "docs", From: "new", To: "done"}, Committed: 1},
	}
	if got, _ := json.Marshal(rep.Coverage.Edges); string(got) != mustJSON(t, want) {
		t.Errorf("edges %s, want %s", got, mustJSON(t, want))
	}
	if u := rep.Coverage.Untested; len(u) != 1 || u[0] != (jstest.Transition{DB: "docs", From: "done", To: "archived"}) {
		t.Errorf("untested %v, want done → archived", u)
	}
	var out bytes.Buffer
	jstest.WriteSummary(&out, rep, "alice/flow")
	words := strings.Join(strings.Fields(out.String()), " ")
	for _, s := range []string{"1 passed, 0 failed", "docs done → new 0 1", "that alice/flow took and no test committed: docs done → archived"} {
		if !strings.Contains(words, s) {
			t.Errorf("summary lacks %q:\n%s", s, out.String())
		}
	}
	out.Reset()
	if err := jstest.WriteResultJSON(&out, res["walks"]); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	if err := json.Unmarshal(out.Bytes(), &line); err != nil || line["type"] != "test" || line["ok"] != true || line["name"] != "walks" {
		t.Errorf("JSON line %s (%v)", out.String(), err)
	}
}

func TestALoadErrorIsAFailedResult(t *testing.T) {
	t.Parallel()
	rep, _ := run(t, map[string]string{
		"access.js":         allowAll,
		"test/bad.test.js":  "test(\"x\", async (t) => {\n  t.expect(1).toBe(1)\n",
		"test/none.test.js": "const x = 1;\n",
	}, jstest.Options{})
	if rep.Failed != 2 || !strings.Contains(rep.Results[0].Message, "test/bad.test.js:") || !strings.Contains(rep.Results[1].Message, "registers no tests") {
		t.Errorf("%+v", rep.Results)
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestARunReadsTheFolderOnce: every test of a run deploys the code as it
// was when the run started, bundled once; an edit during the run is for
// the next run.
func TestARunReadsTheFolderOnce(t *testing.T) {
	t.Parallel()
	dir := apptest.Folder(t, map[string]string{
		"backend.js": `export async function onChange(event, ctx) {
	if (event.doc.status === "new") await ctx.db.put({ ...event.doc, status: "seen" }, { ifRev: event.doc._rev });
}`,
		"test/a.test.js": `for (const name of ["first", "second"]) {
	test(name, async (t) => {
		await t.owner.db("d").put({ _id: name, status: "new" });
		await t.settle();
		t.expect((await t.owner.db("d").get(name)).status).toBe("seen");
	});
}`,
	})
	rep, err := jstest.Run(context.Background(), jstest.Options{Dir: dir, OnResult: func(jstest.Result) {
		apptest.Write(t, dir, map[string]string{"backend.js": "export function onChange( {"})
	}})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Passed != 2 {
		t.Fatalf("report %+v: the second test did not run the code the run started with", rep.Results)
	}
}
