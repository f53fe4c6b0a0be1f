package server

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/backend"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store/sqlite"
)

// newSiteEnv is newEnv with JavaScript: access.js and backend.js run, and
// the engine delivers events. Users alice and bob; no apps yet.
func newSiteEnv(t *testing.T) *env {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	e := engine.New(st, engine.Options{Logger: log, Code: jsapp.New(jsapp.Options{Backend: backend.Options{Logger: log}})})
	if _, err := e.Bootstrap(context.Background(), adminToken); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	srv := New(e, Options{Logger: log})
	v := &env{t: t, e: e, srv: srv, tokens: map[string]string{"admin": adminToken}, logs: logs}
	v.ts = httptest.NewServer(srv)
	t.Cleanup(v.ts.Close)
	for _, u := range []string{"alice", "bob"} {
		var out struct{ Name, Token string }
		v.mustJSON(v.do("POST", "/v1/users", "admin", `{"name":"`+u+`"}`), 201, &out)
		v.tokens[u] = out.Token
	}
	return v
}

// deployApp creates app as its owner and deploys code and files to it.
func (v *env) deployApp(app, accessJS, backendJS string, files map[string]string) {
	v.t.Helper()
	owner, _, _ := strings.Cut(app, "/")
	v.mustJSON(v.do("POST", "/v1/apps", owner, `{"app":"`+app+`"}`), 201, nil)
	v.mustJSON(v.do("POST", "/v1/apps/"+app+"/code", owner, deployBody(accessJS, backendJS, files)), 201, nil)
}

func deployBody(accessJS, backendJS string, files map[string]string) string {
	fs := map[string][]byte{}
	for p, s := range files {
		fs[p] = []byte(s)
	}
	b, _ := json.Marshal(map[string]any{"access": accessJS, "backend": backendJS, "files": fs})
	return string(b)
}

// eventually polls f until it holds; onChange runs on its own time.
func eventually(t *testing.T, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

const hooksAccess = `
export function inbox(doc, oldDoc, user, ctx) {
  ctx.requireBackend("fetch");
  return { channels: ["inbox"] };
}`

const hooksBackend = `
export async function fetch(request, ctx) {
  if (request.path === "/fail") throw new Error("the handler broke on purpose");
  const body = await request.json();
  const r = await ctx.db.put({ status: "pending", note: body.note, auth: request.headers.get("authorization") }, { db: "inbox", id: body.id });
  return Response.json({ id: r.id, rev: r.rev, path: request.path, q: request.query.get("q") }, { status: 201, headers: { "x-hook": "1", "set-cookie": "a=b" } });
}

// onChange tries the lane's edge: requireBackend("fetch") must refuse it.
export async function onChange(event, ctx) {
  if (event.dbName !== "trigger") return;
  let code = "none";
  try {
    await ctx.db.put({ status: "pending" }, { db: "inbox", id: "from-onchange" });
  } catch (err) {
    code = err.code;
  }
  await ctx.db.put({ code }, { db: "results", id: event.docId });
}`

type ledger []struct {
	Writer struct{ User, Device, Handler string }
	Path   string
}

func (v *env) history(app, db, id string) ledger {
	v.t.Helper()
	var out struct{ History ledger }
	v.mustJSON(v.do("GET", docPath(app, db, id)+"/history", "admin", ""), 200, &out)
	if len(out.History) == 0 {
		v.t.Fatalf("no history of %s/%s", db, id)
	}
	return out.History
}

func TestFetchLaneRoundTrip(t *testing.T) {
	t.Parallel()
	v := newSiteEnv(t)
	v.deployApp("alice/hooks", hooksAccess, hooksBackend, nil)

	// Anonymous: the write is the fetch handler's, with no user.
	r := v.do("POST", "/apps/alice/hooks/api/in?q=x%20y", "", `{"id":"w1","note":"hello"}`, "Content-Type", "application/json")
	if r.status != 201 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var out struct{ ID, Rev, Path, Q string }
	if err := json.Unmarshal(r.body, &out); err != nil || out.ID != "w1" || out.Rev == "" || out.Path != "/in" || out.Q != "x y" {
		t.Fatalf("body %s (%v)", r.body, err)
	}
	if r.header.Get("X-Hook") != "1" || r.header.Get("Set-Cookie") != "" || r.header.Get("Content-Security-Policy") != "" {
		t.Fatalf("headers: %v", r.header)
	}
	h := v.history("alice/hooks", "inbox", "w1")
	if w := h[0].Writer; w.User != "" || w.Handler != "fetch" || h[0].Path != "fetch" {
		t.Fatalf("anonymous lane write: %+v", h)
	}

	// With bob's token: the write acts as bob, and the token never
	// reaches the handler.
	r = v.do("POST", "/apps/alice/hooks/api/in", "bob", `{"id":"w2","note":"signed"}`)
	if r.status != 201 {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	if w := v.history("alice/hooks", "inbox", "w2")[0].Writer; w.User != "bob" || w.Handler != "fetch" {
		t.Fatalf("authenticated lane write: %+v", w)
	}
	var doc map[string]any
	v.mustJSON(v.do("GET", docPath("alice/hooks", "inbox", "w2"), "alice", ""), 200, &doc)
	if doc["auth"] != nil {
		t.Fatalf("the handler saw the Authorization header: %v", doc["auth"])
	}

	// A device signature of bob's device: the write is bob's, by that device.
	k, err := auth.NewDeviceKey("bob", "ci")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.e.AddDevice(context.Background(), engine.Actor{User: "bob"}, "ci", k.Public(), ""); err != nil {
		t.Fatal(err)
	}
	body := `{"id":"w4","note":"device"}`
	// The signature covers the path on the site, where the request goes.
	r = v.do("POST", "/apps/alice/hooks/api/in", "raw:"+k.Sign("POST", "/api/in", []byte(body), time.Now()), body)
	if r.status != 201 {
		t.Fatalf("device-signed: %d %s", r.status, r.body)
	}
	if w := v.history("alice/hooks", "inbox", "w4")[0].Writer; w.User != "bob" || w.Device != "ci" || w.Handler != "fetch" {
		t.Fatalf("device lane write: %+v", w)
	}

	// A bad credential is refused, not downgraded; the handler never runs.
	v.mustError(v.do("POST", "/apps/alice/hooks/api/in", "raw:Bearer nope", `{"id":"w3"}`), 401, "unauthorized")
	v.mustError(v.do("GET", docPath("alice/hooks", "inbox", "w3"), "alice", ""), 404, "not_found")
}

func TestRequireBackendFetchPassesOnlyForTheLane(t *testing.T) {
	t.Parallel()
	v := newSiteEnv(t)
	v.deployApp("alice/hooks", hooksAccess, hooksBackend, nil)
	// Not the owner through the API, whatever it claims.
	for _, hdr := range [][]string{nil, {"X-Handoff-Path", "fetch"}, {"X-Handoff-Handler", "fetch"}} {
		e := v.mustError(v.do("PUT", docPath("alice/hooks", "inbox", "x"), "alice", `{"status":"pending"}`, hdr...), 403, "forbidden")
		if !strings.Contains(e.Reason+e.Message, "fetch") {
			t.Fatalf("refusal does not name the handler: %+v", e)
		}
	}
	v.mustError(v.do("PUT", docPath("alice/hooks", "inbox", "x"), "alice", `{"status":"pending","_handler":"fetch"}`), 400, "invalid")
	// Not another handler of the same app.
	v.mustJSON(v.do("PUT", docPath("alice/hooks", "trigger", "t1"), "alice", `{"go":true}`), 200, nil)
	var res map[string]any
	eventually(t, "onChange's attempt", func() bool {
		r := v.do("GET", docPath("alice/hooks", "results", "t1"), "alice", "")
		return r.status == 200 && json.Unmarshal(r.body, &res) == nil
	})
	if res["code"] != "forbidden" {
		t.Fatalf("onChange's write to the fetch edge: %v", res)
	}
	// The lane itself passes.
	if r := v.do("POST", "/apps/alice/hooks/api/in", "", `{"id":"ok"}`); r.status != 201 {
		t.Fatalf("lane: %d %s", r.status, r.body)
	}
}

func TestFetchLaneErrors(t *testing.T) {
	t.Parallel()
	v := newSiteEnv(t)
	v.deployApp("alice/hooks", hooksAccess, hooksBackend, nil)
	v.deployApp("alice/plain", "", `export async function onChange() {}`, nil)
	v.mustError(v.do("GET", "/apps/alice/plain/api/x", "", ""), 404, "not_found")
	v.mustError(v.do("GET", "/apps/alice/nope/api/x", "", ""), 404, "not_found")
	v.mustError(v.do("POST", "/apps/alice/hooks/api/in", "", strings.Repeat("x", appcode.MaxFetchRequestBytes+1)), 413, "too_large")
}

// failingBackend fails in the app's own code in every way a fetch
// handler can. Its config lets it relay a response from 127.0.0.1.
const failingBackend = `
export const config = { fetch: { allow: ["127.0.0.1"] } };
export async function fetch(request, ctx) {
  switch (request.path) {
    case "/throw":
      throw new Error("the handler broke on purpose with secret s3cret");
    case "/json":
      return Response.json(await request.json());
    case "/shape":
      return { status: 200, bodyy: "typo" };
    case "/big":
      return "x".repeat(9 << 20);
    case "/relay":
      return await globalThis.fetch(request.query.get("url"));
    case "/recurse":
      const down = (n) => down(n + 1) + 1;
      return String(down(0));
  }
}`

// TestFetchLaneAppFailuresAre502 checks that a fetch handler's own
// failure is the app's, not the server's: 502 app_error naming what
// failed and where, with an error id that the app's log line also
// carries, and never the exception's own words.
func TestFetchLaneAppFailuresAre502(t *testing.T) {
	t.Parallel()
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(999) }))
	defer upstream.Close()
	v := newSiteEnv(t)
	v.deployApp("alice/hooks", "", failingBackend, nil)
	for _, c := range []struct {
		path, body string
		says       []string
		logged     string
	}{
		{"/throw", "", []string{"backend.js:6:12: fetch threw Error;"}, "on purpose with secret s3cret"},
		{"/json", `{"note":`, []string{"fetch threw SyntaxError"}, "SyntaxError"},
		{"/shape", "", []string{"no usable response", `"bodyy"`}, `"bodyy"`},
		{"/big", "", []string{"9437184 bytes", "the limit is 8388608"}, "9437184 bytes"},
		{"/relay?url=" + upstream.URL, "", []string{"status 999", "200 to 599"}, "status 999"},
		{"/recurse", "", []string{"call stack exceeded"}, "call stack exceeded"},
	} {
		e := v.mustError(v.do("POST", "/apps/alice/hooks/api"+c.path, "", c.body), 502, "app_error")
		if strings.Contains(e.Message, "s3cret") {
			t.Fatalf("%s: the handler's own words reached an anonymous caller: %s", c.path, e.Message)
		}
		for _, want := range append(c.says, "`handoff logs --app alice/hooks`", "(error id "+e.ID+")") {
			if e.ID == "" || !strings.Contains(e.Message, want) {
				t.Fatalf("%s: message %q (id %q) does not say %q", c.path, e.Message, e.ID, want)
			}
		}
		eventually(t, c.path+"'s line in the app's log", func() bool {
			var logs struct{ Logs []engine.LogLine }
			v.mustJSON(v.do("GET", "/v1/apps/alice/hooks/logs", "alice", ""), 200, &logs)
			for _, l := range logs.Logs {
				var f struct{ ErrorID string }
				_ = json.Unmarshal(l.Fields, &f)
				if l.Source == "fetch" && l.Level == "error" && f.ErrorID == e.ID && strings.Contains(l.Message, c.logged) {
					return true
				}
			}
			return false
		})
	}
}

// rawGet sends path exactly as given, bypassing the client's URL
// cleaning, and returns the status and body.
func (v *env) rawGet(path string) (int, http.Header, string) {
	v.t.Helper()
	host, path := v.siteHost(path)
	return v.rawGetHost(host, path)
}

// rawMainGet is rawGet on the main origin, even for /apps/ paths.
func (v *env) rawMainGet(path string) (int, http.Header, string) {
	v.t.Helper()
	return v.rawGetHost("", path)
}

func (v *env) rawGetHost(host, path string) (int, http.Header, string) {
	v.t.Helper()
	conn, err := net.Dial("tcp", v.ts.Listener.Addr().String())
	if err != nil {
		v.t.Fatal(err)
	}
	defer conn.Close()
	if host == "" {
		host = v.ts.Listener.Addr().String()
	}
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, host)
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		v.t.Fatalf("GET %q: %v", path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, string(b)
}

func TestStaticFiles(t *testing.T) {
	t.Parallel()
	v := newSiteEnv(t)
	v.deployApp("alice/site", "", "", map[string]string{
		"index.html":      "<h1>alice</h1>",
		"css/site.css":    "h1{}",
		"docs/index.html": "docs",
		"app.js":          "export {}",
		"data/blob":       "\x00\x01binary",
	})
	for path, want := range map[string][2]string{
		"/apps/alice/site/":                {"<h1>alice</h1>", "text/html; charset=utf-8"},
		"/apps/alice/site/index.html":      {"<h1>alice</h1>", "text/html; charset=utf-8"},
		"/apps/alice/site/css/site.css":    {"h1{}", "text/css; charset=utf-8"},
		"/apps/alice/site/docs/":           {"docs", "text/html; charset=utf-8"},
		"/apps/alice/site/app.js":          {"export {}", "text/javascript; charset=utf-8"},
		"/apps/alice/site/data/blob":       {"\x00\x01binary", "application/octet-stream"},
		"/apps/alice/site/docs/index.html": {"docs", "text/html; charset=utf-8"},
	} {
		r := v.do("GET", path, "", "")
		// The site has an origin of its own: no sandbox, and nothing for
		// other origins to read.
		if r.status != 200 || string(r.body) != want[0] || r.header.Get("Content-Type") != want[1] ||
			r.header.Get("Content-Security-Policy") != "" || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("GET %s: %d %q %q %v", path, r.status, r.body, r.header.Get("Content-Type"), r.header)
		}
	}
	// A folder without its slash redirects, so relative links resolve.
	if st, h, _ := v.rawGet("/apps/alice/site/docs"); st != 301 || h.Get("Location") != "/docs/" {
		t.Fatalf("folder redirect: %d %v", st, h)
	}
	// Revalidation is a 304.
	r := v.do("GET", "/apps/alice/site/css/site.css", "", "")
	if r2 := v.do("GET", "/apps/alice/site/css/site.css", "", "", "If-None-Match", r.header.Get("ETag")); r2.status != 304 {
		t.Fatalf("If-None-Match: %d", r2.status)
	}
	v.mustError(v.do("GET", "/apps/alice/site/missing.html", "", ""), 404, "not_found")
	v.mustError(v.do("POST", "/apps/alice/site/index.html", "", "x"), 405, "invalid")
	// A new version replaces the files; a rollback brings them back.
	v.mustJSON(v.do("POST", "/v1/apps/alice/site/code", "alice", deployBody("", "", map[string]string{"index.html": "v2"})), 201, nil)
	if r := v.do("GET", "/apps/alice/site/", "", ""); string(r.body) != "v2" {
		t.Fatalf("after redeploy: %q", r.body)
	}
	v.mustError(v.do("GET", "/apps/alice/site/css/site.css", "", ""), 404, "not_found")
	v.mustJSON(v.do("POST", "/v1/apps/alice/site/code/1/activate", "alice", ""), 200, nil)
	if r := v.do("GET", "/apps/alice/site/css/site.css", "", ""); r.status != 200 {
		t.Fatalf("after rollback: %d", r.status)
	}
}

func TestStaticPathsCannotEscapeTheAppFolder(t *testing.T) {
	t.Parallel()
	v := newSiteEnv(t)
	v.deployApp("alice/site", "", "", map[string]string{"index.html": "alice", "css/a.css": "a"})
	v.deployApp("bob/site", "", "", map[string]string{"secret.txt": "BOB-SECRET"})
	for _, path := range []string{
		"/apps/alice/site/..%2f..%2fbob%2fsite%2fsecret.txt",
		"/apps/alice/site/css/..%2f..%2f..%2fbob%2fsite%2fsecret.txt",
		"/apps/alice/site/%2e%2e%2f%2e%2e%2fbob%2fsite%2fsecret.txt",
		"/apps/alice/site/css%2f..%2fsecret.txt",
		"/apps/alice/site/..%5c..%5cbob%5csite%5csecret.txt",
		"/apps/alice/site/css%5ca.css",
		"/apps/alice/site/index.html%00.txt",
		"/apps/alice/site/%2fetc%2fpasswd",
		"/apps/alice/site/C:%2fwindows%2fwin.ini",
		"/apps/alice/site/css/.%2fa.css",
	} {
		status, _, body := v.rawGet(path)
		if status != 400 && status != 404 {
			t.Errorf("GET %s: status %d (%q), want 400 or 404", path, status, body)
		}
		if strings.Contains(body, "BOB-SECRET") {
			t.Errorf("GET %s reached another app's file", path)
		}
	}
	// Unencoded dots and doubled slashes are refused on a site (browsers
	// clean them before they send), and cleaned by the router on the old
	// paths before the redirect: never a file.
	for _, path := range []string{"/apps/alice/site/../../bob/site/secret.txt", "/apps/alice/site/./css/../index.html", "/apps/alice/site//etc/passwd"} {
		if status, _, body := v.rawGet(path); status != 400 || strings.Contains(body, "BOB-SECRET") {
			t.Errorf("GET %s on the site: %d %q, want 400", path, status, body)
		}
		if status, _, body := v.rawMainGet(path); status != 301 && status != 307 || strings.Contains(body, "BOB-SECRET") {
			t.Errorf("GET %s on the main origin: %d %q, want a redirect", path, status, body)
		}
	}
	// Bad paths are refused at deploy too, and nothing is deployed.
	for _, p := range []string{"../x", "/abs", "a\\b", "a\x00b", "a//b", "./a", "a/", "", "c:x"} {
		r := v.do("POST", "/v1/apps/alice/site/code", "alice", deployBody("", "", map[string]string{p: "x"}))
		v.mustError(r, 400, "invalid")
	}
	var versions struct{ Versions []engine.CodeInfo }
	v.mustJSON(v.do("GET", "/v1/apps/alice/site/code", "alice", ""), 200, &versions)
	if len(versions.Versions) != 1 {
		t.Fatalf("refused deploys made versions: %+v", versions.Versions)
	}
	// Files over the limits are refused.
	big := base64.StdEncoding.EncodeToString(make([]byte, engine.MaxStaticFileBytes+1))
	r := v.do("POST", "/v1/apps/alice/site/code", "alice", `{"files":{"big.bin":"`+big+`"}}`)
	v.mustError(r, 413, "too_large")
}

// TestHandlersCannotReachAnotherApp: a handler's ctx.db is bound to its
// own app. Naming another app's database in any way reaches nothing of it.
func TestHandlersCannotReachAnotherApp(t *testing.T) {
	t.Parallel()
	v := newSiteEnv(t)
	v.deployApp("bob/vault", "", "", map[string]string{"x": "x"})
	v.mustJSON(v.do("PUT", docPath("bob/vault", "private", "secret"), "bob", `{"code":"BOB-SECRET"}`), 200, nil)
	v.deployApp("alice/probe", "", `
async function attempt(f) {
  try { return { ok: await f() }; } catch (err) { return { code: err.code }; }
}
export async function fetch(request, ctx) {
  const out = {
    sameName: await attempt(() => ctx.db.get("secret", { db: "private" })),
    qualified: await attempt(() => ctx.db.get("secret", { db: "bob/vault/private" })),
    dotted: await attempt(() => ctx.db.get("secret", { db: "bob.vault.private" })),
    relative: await attempt(() => ctx.db.get("secret", { db: "../vault/private" })),
    appOption: await attempt(() => ctx.db.get("secret", { db: "private", app: "bob/vault" })),
    query: await attempt(() => ctx.db.query({ db: "private", field: "code", key: "BOB-SECRET" })),
    put: await attempt(() => ctx.db.put({ code: "overwritten" }, { db: "private", id: "secret" })),
    putQualified: await attempt(() => ctx.db.put({ code: "x" }, { db: "bob/vault/private", id: "secret" })),
    del: await attempt(() => ctx.db.delete("secret", { db: "bob/vault/private" })),
  };
  return { body: out };
}`, nil)
	r := v.do("GET", "/apps/alice/probe/api/", "alice", "")
	if r.status != 200 {
		t.Fatalf("%d %s", r.status, r.body)
	}
	if strings.Contains(string(r.body), "BOB-SECRET") {
		t.Fatalf("alice's handler read bob's data: %s", r.body)
	}
	var got map[string]map[string]any
	json.Unmarshal(r.body, &got)
	if got["sameName"]["ok"] != nil || len(got["query"]["ok"].([]any)) != 0 {
		t.Fatalf("same database name reached something: %s", r.body)
	}
	for _, k := range []string{"qualified", "dotted", "relative", "appOption", "putQualified", "del"} {
		if got[k]["code"] != "invalid" {
			t.Errorf("%s: %v, want code invalid", k, got[k])
		}
	}
	// The put landed in alice's own app; bob's document is untouched.
	var bobs, alices map[string]any
	v.mustJSON(v.do("GET", docPath("bob/vault", "private", "secret"), "bob", ""), 200, &bobs)
	v.mustJSON(v.do("GET", docPath("alice/probe", "private", "secret"), "alice", ""), 200, &alices)
	if bobs["code"] != "BOB-SECRET" || alices["code"] != "overwritten" {
		t.Fatalf("bob's %v, alice's %v", bobs, alices)
	}
}
