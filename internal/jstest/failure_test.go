package jstest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/internal/appdir"
	"github.com/handoff-run/handoff/internal/apptest"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/internal/jstest"
	"github.com/handoff-run/handoff/internal/server"
	"github.com/handoff-run/handoff/store/sqlite"
)

// sweepBackend's sweep misspells ifRev: every tick throws, and the only
// sign of it in the test is the document that never expires.
const sweepBackend = `export const config = { scheduled: { interval: "5s" } };
export async function scheduled(ev, ctx) {
  const docs = await ctx.db.query({ db: "jobs", field: "status", key: "pending" });
  for (const d of docs) {
    ctx.log("info", "expiring", { id: d._id });
    await ctx.db.put({ ...d, status: "expired" }, { db: "jobs", ifrev: d._rev });
  }
}`

func TestAFailedTestShowsItsHandlerErrorsAndLog(t *testing.T) {
	t.Parallel()
	rep, res := run(t, map[string]string{
		"access.js":  allowAll,
		"backend.js": sweepBackend,
		"test/sweep.test.js": `test("expires", async (t) => {
  await t.db("jobs").put({ _id: "a", status: "pending" });
  await t.advance("12s");
  t.expect(await t.db("jobs").get("a")).toMatch({ status: "expired" });
});

test("quiet", async (t) => {
  await t.db("jobs").put({ _id: "a", status: "pending" });
  await t.advance("6s");
});
`,
	}, jstest.Options{})
	if rep.Passed != 1 || rep.Failed != 1 {
		t.Fatalf("passed %d, failed %d; want 1 and 1: %+v", rep.Passed, rep.Failed, rep.Results)
	}
	r := res["expires"]
	if len(r.HandlerErrors) != 1 {
		t.Fatalf("handler errors %+v; want the sweep's one, twice", r.HandlerErrors)
	}
	if e := r.HandlerErrors[0]; e.Handler != "scheduled" || e.At != "backend.js:6:21" || e.Count != 2 || !strings.Contains(e.Message, `unknown option "ifrev"`) {
		t.Errorf("handler error %+v; want scheduled at backend.js:6:21, twice, naming ifrev", e)
	}
	var out bytes.Buffer
	jstest.WriteResult(&out, r)
	for _, want := range []string{
		"the app's handlers threw 2 times, first at backend.js:6:21:",
		`scheduled (2 times): backend.js:6:21: Error: ctx.db.put: unknown option "ifrev"`,
		"the app's log (4 lines):",
		`+5s     info  scheduled: expiring {"id":"a"}`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the failure does not show %q:\n%s", want, out.String())
		}
	}
	// The sweep threw in the passing test too; it stays one line.
	if q := res["quiet"]; !q.OK || q.HandlerErrors != nil || q.Logs != nil {
		t.Errorf("a passing test carries failure details: %+v", q)
	}
	out.Reset()
	jstest.WriteResult(&out, res["quiet"])
	if n := strings.Count(out.String(), "\n"); n != 1 {
		t.Errorf("a passing test printed %d lines:\n%s", n, out.String())
	}
}

func TestAFailedTestShowsTheEndOfALongLog(t *testing.T) {
	t.Parallel()
	_, res := run(t, map[string]string{
		"access.js": allowAll,
		"backend.js": `export async function onChange(ev, ctx) {
  for (let i = 1; i <= 30; i++) ctx.log("info", "line " + i);
}`,
		"test/log.test.js": `test("fails", async (t) => {
  await t.db("docs").put({ _id: "a" });
  await t.settle();
  t.expect(1).toBe(2);
});
`,
	}, jstest.Options{})
	r := res["fails"]
	if len(r.Logs) != 20 || r.LogsOmitted != 10 || !strings.HasSuffix(r.Logs[19], "line 30") || !strings.HasSuffix(r.Logs[0], "line 11") {
		t.Fatalf("logs %q, %d left out; want lines 11 to 30, 10 left out", r.Logs, r.LogsOmitted)
	}
	var out bytes.Buffer
	jstest.WriteResult(&out, r)
	if !strings.Contains(out.String(), "the app's log, its last 20 lines (10 earlier left out; read them all with t.logs())") {
		t.Errorf("printed:\n%s", out.String())
	}
}

func TestTheTestAPISaysAnErrorsCodeOnce(t *testing.T) {
	t.Parallel()
	_, res := run(t, map[string]string{
		"access.js": allowAll,
		"test/codes.test.js": `test("advance", async (t) => { await t.advance("2d"); });
test("put option", async (t) => { await t.db("docs").put({ _id: "a" }, { ifrev: "1-x" }); });
test("query option", async (t) => { await t.db("docs").query({ field: "a", key: 1, sort: "x" }); });
test("caught", async (t) => {
  const e = await t.advance("2d").catch((e) => e);
  t.expect(e.code).toBe("invalid");
  t.expect(e.message).toMatch(/^t\.advance: "2d" is not a duration/);
});
`,
	}, jstest.Options{})
	for name, want := range map[string]string{
		"advance":      `invalid: t.advance: "2d" is not a duration; write e.g. "30s", "2m", "1h30m" or a number of milliseconds`,
		"put option":   `invalid: put: unknown option "ifrev"; the options are ifRev, ifAbsent, id`,
		"query option": `invalid: query: unknown option "sort"; the options are field, key, limit, after`,
	} {
		if r := res[name]; r.Message != want {
			t.Errorf("%s: %q; want %q", name, r.Message, want)
		}
	}
	if r := res["caught"]; !r.OK {
		t.Errorf("caught: %s at %s", r.Message, r.At)
	}
}

// throwingFetch is an app whose fetch handler throws.
var throwingFetch = map[string]string{
	"access.js":  allowAll,
	"backend.js": "export async function fetch(req, ctx) {\n  throw new Error(\"no such order\");\n}\n",
}

// TestTFetchAnswersAThrowAsAServerDoes: when the fetch handler throws,
// t.fetch answers what a real server's fetch lane answers: 502, JSON,
// {"error": {code: "app_error", message, id}}; and the failure shows the
// throw.
func TestTFetchAnswersAThrowAsAServerDoes(t *testing.T) {
	t.Parallel()
	// The server's answer, from the same app deployed as owner/app.
	dir := apptest.Folder(t, throwingFetch)
	code, err := appdir.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := engine.New(st, engine.Options{Code: jsapp.New(jsapp.Options{}), Logger: slog.New(slog.DiscardHandler)})
	admin := engine.Actor{User: engine.AdminUser, Admin: true, Path: "cli"}
	if _, err := e.Bootstrap(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddUser(ctx, admin, "owner"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateApp(ctx, admin, "owner/app", true); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Deploy(ctx, admin, "owner/app", code.Access, code.Backend); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	ts := httptest.NewServer(server.New(e, server.Options{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(ts.Close)
	_, port, _ := net.SplitHostPort(ts.Listener.Addr().String())
	req, _ := http.NewRequest("GET", ts.URL+"/api/orders/1", nil)
	req.Host = engine.SiteLabel("owner", "app") + ".localhost:" + port
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := answer{Status: resp.StatusCode, Type: resp.Header.Get("Content-Type"), Body: string(body)}

	// t.fetch's answer, printed by the test.
	files := map[string]string{"test/fetch.test.js": `test("throws", async (t) => {
  const r = await t.fetch("/api/orders/1");
  console.log(JSON.stringify({ status: r.status, ok: r.ok, type: r.headers["content-type"], body: r.body }));
  t.expect(r.json().error.code).toBe("app_error");
  t.expect(r.ok).toBe(true); // fails, to show the handler's throw
});
`}
	for k, v := range throwingFetch {
		files[k] = v
	}
	_, res := run(t, files, jstest.Options{})
	r := res["throws"]
	if len(r.Console) != 1 {
		t.Fatalf("the test printed %q; %s at %s", r.Console, r.Message, r.At)
	}
	var got answer
	if err := json.Unmarshal([]byte(r.Console[0]), &got); err != nil {
		t.Fatal(err)
	}
	if want.Status != 502 || got.Status != want.Status || got.Type != want.Type || got.OK {
		t.Errorf("t.fetch answered %d %q (ok %v); the server %d %q", got.Status, got.Type, got.OK, want.Status, want.Type)
	}
	// The error id is new for each answer.
	id := regexp.MustCompile(`[0-9a-f]{10}`)
	if g, w := id.ReplaceAllString(got.Body, "ID"), id.ReplaceAllString(want.Body, "ID"); g != w {
		t.Errorf("t.fetch's body\n%s\nthe server's\n%s", g, w)
	}
	if len(r.HandlerErrors) != 1 || r.HandlerErrors[0].Handler != "fetch" || r.HandlerErrors[0].At != "backend.js:2:8" {
		t.Errorf("handler errors %+v; want fetch's throw at backend.js:2:8", r.HandlerErrors)
	}
}

type answer struct {
	Status int
	OK     bool
	Type   string
	Body   string
}
