package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/backend"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/internal/pgtest"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
	"github.com/handoff-run/handoff/store/sqlite"
)

// fuzzAccessJS is the fuzzed app's access.js: editors write, what they
// write is readable on one channel, and a document can grant more.
const fuzzAccessJS = `
export function jobs(doc, oldDoc, user, ctx) {
  if (!user) throw { forbidden: "sign in" };
  if (doc.status === "forbidden") throw { forbidden: "not this one" };
  if (doc.boom) throw new Error("access.js broke on purpose");
  return { channels: ["jobs", ...(doc.channels || [])], grant: { users: doc.readers || {} } };
}
`

// fuzzBackendJS answers the app's HTTP lane. Under /json it parses the
// body as the client sent it, which fails in the app's own code for
// most inputs: an app's failure (502 app_error), never the server's.
const fuzzBackendJS = `
export async function fetch(request, ctx) {
  if (request.path.startsWith("/json")) return Response.json({ got: await request.json() });
  const text = await request.text();
  return Response.json({ path: request.path, method: request.method, bytes: text.length });
}
`

// fuzzServer is one server for a whole fuzz run, on SQLite in a
// temporary directory (or, with HANDOFF_FUZZ_POSTGRES set, on a fresh
// PostgreSQL database), with JavaScript: alice owns alice/jobs (access.js,
// backend.js, a static page; bob is an editor) and alice/pub (public);
// alice has a device key.
type fuzzServer struct {
	srv    *Server
	routes []string
	logs   *syncBuffer

	mu     sync.Mutex
	tokens map[string]string
	device auth.DeviceKey
	e      *engine.Engine
	addrs  atomic.Uint32
}

func newFuzzServer(f *testing.F) *fuzzServer {
	ctx := context.Background()
	var st store.Store
	var err error
	if os.Getenv("HANDOFF_FUZZ_POSTGRES") != "" {
		// PostgreSQL refuses values SQLite keeps: fuzz it too, by hand.
		st, err = postgres.Open(ctx, pgtest.Fresh(f, 8))
	} else {
		st, err = sqlite.Open(f.TempDir())
	}
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelError}))
	e := engine.New(st, engine.Options{Logger: log, Code: jsapp.New(jsapp.Options{Backend: backend.Options{Logger: log}}), SecretKey: bytes.Repeat([]byte{7}, 32)})
	admin := engine.Actor{User: engine.AdminUser, Admin: true}
	if _, err := e.Bootstrap(ctx, adminToken); err != nil {
		f.Fatal(err)
	}
	fs := &fuzzServer{logs: logs, tokens: map[string]string{"admin": adminToken}, e: e}
	for _, u := range []string{"alice", "bob"} {
		if fs.tokens[u], err = e.AddUser(ctx, admin, u); err != nil {
			f.Fatal(err)
		}
	}
	alice := engine.Actor{User: "alice"}
	for _, a := range []struct {
		ref    string
		public bool
	}{{"alice/jobs", false}, {"alice/pub", true}} {
		if _, err := e.CreateApp(ctx, alice, a.ref, a.public); err != nil {
			f.Fatal(err)
		}
		// A CPU budget, not a protocol timeout: fuzzing on two cores can
		// take far longer than the 100 ms default.
		if err := e.SetAccessTimeout(ctx, admin, a.ref, 10*time.Second); err != nil {
			f.Fatal(err)
		}
	}
	if _, err := e.DeployCode(ctx, alice, "alice/jobs", engine.Code{Access: fuzzAccessJS, Backend: fuzzBackendJS,
		Files: map[string][]byte{"index.html": []byte("<h1>jobs</h1>")}}); err != nil {
		f.Fatal(err)
	}
	if err := e.AddMember(ctx, alice, "alice/jobs", "bob", "editor"); err != nil {
		f.Fatal(err)
	}
	for _, id := range []string{"j1", "j2"} {
		if _, err := e.Put(ctx, alice, "alice/jobs", "jobs", id, []byte(`{"status":"pending","attempts":0}`), appcode.PutOptions{}); err != nil {
			f.Fatal(err)
		}
	}
	if err := e.SetSecret(ctx, alice, "alice/jobs", "API_KEY", []byte("s3cret")); err != nil {
		f.Fatal(err)
	}
	fs.addDevice(f)
	if err := e.Start(ctx); err != nil {
		f.Fatal(err)
	}
	f.Cleanup(e.Close)
	fs.srv = New(e, Options{Logger: log})
	fs.routes = append(slices.Clone(fs.srv.paths), "/apps/{owner}/{name}/{path...}")
	return fs
}

// addDevice (re)registers alice's device "laptop" with a new key.
func (fs *fuzzServer) addDevice(tb testing.TB) {
	key, err := auth.NewDeviceKey("alice", "laptop")
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := fs.e.AddDevice(context.Background(), engine.Actor{User: "alice"}, "laptop", key.Public(), ""); err != nil {
		tb.Fatal(err)
	}
	fs.device = key
}

// wildcardRE finds a route's wildcards: {name} or {name...}.
var wildcardRE = regexp.MustCompile(`\{(\w+)(\.\.\.)?\}`)

// fuzzDefaults fill the wildcards the input leaves out.
var fuzzDefaults = map[string]string{
	"owner": "alice", "app": "jobs", "name": "jobs", "db": "jobs", "id": "j1", "user": "bob",
	"version": "1", "seq": "1", "path": "index.html",
}

// fuzzWriter ends a streamed answer (a live feed) at its first flush,
// as a client that hangs up would.
type fuzzWriter struct {
	*httptest.ResponseRecorder
	cancel context.CancelFunc
}

func (w fuzzWriter) Flush() {
	w.ResponseRecorder.Flush()
	w.cancel()
}

// FuzzHTTP sends requests built from the real routes (or any path), with
// any method, query, headers, credential and body, to the whole server:
// no request may get a 5xx, an internal error inside a 200 (a bulk
// result, a feed's error event), an error without a code and a message,
// or crash the process. The one 5xx allowed is 502 app_error from an
// app's fetch lane: the app's own code failed (its fetch handler threw on
// the body, or code the input deployed failed), which is not the
// server's failure; a 500 there still is.
func FuzzHTTP(f *testing.F) {
	type seed struct {
		method string
		route  uint8 // index into the routes; past them, params is the path
		params string
		query  string
		auth   uint8
		header string
		body   string
	}
	fs := newFuzzServer(f)
	route := func(p string) uint8 {
		i := slices.Index(fs.routes, p)
		if i < 0 {
			f.Fatalf("no route %s in %v", p, fs.routes)
		}
		return uint8(i)
	}
	const (
		doc  = "/v1/apps/{owner}/{app}/dbs/{db}/docs/{id}"
		docs = "/v1/apps/{owner}/{app}/dbs/{db}/docs"
	)
	raw := uint8(len(fs.routes))
	for _, s := range []seed{
		{"GET", route("/v1/whoami"), "", "", 1, "", ""},
		{"GET", route(doc), "", "", 1, "", ""},
		{"PUT", route(doc), "alice|jobs|jobs|j3", "", 1, "Content-Type: application/json", `{"status":"pending","n":1.5,"tags":["a"]}`},
		{"PUT", route(doc), "", "ifRev=1-abc", 3, "", `{"status":"running"}`},
		{"PUT", route(doc), "", "ifAbsent=true&ifRev=x", 1, "", `{"status":"x"}`},
		{"PUT", route(doc), "", "", 1, "", `{"n":1e999999,"s":"\u0000","\ud800":1}`},
		{"PUT", route(doc), "alice|jobs|jobs|%2E%2E", "", 6, "", `{"status":"pending"}`},
		{"POST", route(docs), "", "", 6, "X-Handoff-Path: import", `{"_id":"dev1","status":"pending","readers":{"bob":["x"]}}`},
		{"DELETE", route(doc), "", "ifRev=", 1, "", ""},
		{"GET", route(doc + "/history"), "", "", 2, "", ""},
		{"GET", route(docs), "", "limit=2&after=aTpqMQ", 1, "", ""},
		{"GET", route("/v1/apps/{owner}/{app}/dbs/{db}/query"), "", "field=status&key=%22pending%22&limit=1000", 1, "", ""},
		{"GET", route("/v1/apps/{owner}/{app}/dbs/{db}/query"), "", "field=n&key=1e999", 1, "", ""},
		{"GET", route("/v1/apps/{owner}/{app}/dbs/{db}/query"), "", "field=a..b&key=", 1, "", ""},
		{"POST", route("/v1/apps/{owner}/{app}/dbs/{db}/bulk"), "", "", 1, "", `{"docs":[{"_id":"b1"},{"_x":1},[1],{"_id":"b2","boom":true}],"ifAbsent":true}`},
		{"GET", route("/v1/apps/{owner}/{app}/dbs/{db}/transitions"), "", "field=status", 1, "", ""},
		{"GET", route("/v1/apps/{owner}/{app}/dbs/{db}/changes"), "", "since=9223372036854775807&limit=0", 1, "", ""},
		{"GET", route("/v1/apps/{owner}/{app}/changes"), "", "since=-1", 0, "", ""},
		{"GET", route("/v1/apps/{owner}/{app}/feed"), "", "db=jobs", 1, "Last-Event-ID: 1\nAccept: text/event-stream", ""},
		{"GET", route("/v1/apps/{owner}/{app}/feed"), "alice|pub", "db=jobs&field=status&key=%22pending%22", 0, "", ""},
		{"GET", route("/v1/apps/{owner}/{app}/feed"), "", "", 1, "Last-Event-ID: 99999999999999999999", ""},
		{"POST", route("/v1/apps/{owner}/{app}/code"), "alice|pub", "", 1, "", `{"access":"export function jobs() {}","backend":"","files":{"a.html":"PGgxPg=="}}`},
		{"GET", route("/v1/apps/{owner}/{app}/code"), "", "", 1, "", ""},
		{"POST", route("/v1/apps/{owner}/{app}/code/{version}/activate"), "alice|jobs|9223372036854775807", "", 1, "", ""},
		{"PUT", route("/v1/apps/{owner}/{app}/settings"), "alice|pub", "", 1, "", `{"accessTimeout":"250ms","public":false}`},
		{"GET", route("/v1/apps/{owner}/{app}/logs"), "", "after=0&limit=10", 1, "", ""},
		{"GET", route("/v1/apps/{owner}/{app}/events"), "", "dead=true", 1, "", ""},
		{"POST", route("/v1/apps/{owner}/{app}/events/{seq}/replay"), "alice|jobs|18446744073709551616", "", 1, "", ""},
		{"GET", route("/v1/apps/{owner}/{app}/schedule"), "", "", 1, "", ""},
		{"POST", route("/v1/apps"), "", "", 3, "", `{"app":"bob/new","public":true}`},
		{"GET", route("/v1/apps"), "", "", 0, "", ""},
		{"POST", route("/v1/apps/{owner}/{app}/members"), "", "", 1, "", `{"user":"bob","role":"viewer"}`},
		{"DELETE", route("/v1/apps/{owner}/{app}/members/{user}"), "alice|jobs|b%00b", "role=x", 1, "", ""},
		{"POST", route("/v1/users"), "", "", 2, "", `{"name":"carol"}`},
		{"POST", route("/v1/users/{user}/token"), "bob", "", 3, "", ""},
		{"POST", route("/v1/devices"), "", "", 3, "", `{"name":"ci","publicKey":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","app":"alice/jobs"}`},
		{"DELETE", route("/v1/devices/{name}"), "nope", "", 1, "", ""},
		{"PUT", route("/v1/apps/{owner}/{app}/secrets/{name}"), "alice|jobs|TOKEN", "", 1, "", `{"value":"v"}`},
		{"GET", route("/v1/apps/{owner}/{app}/secrets"), "", "", 1, "", ""},
		{"DELETE", route("/v1/apps/{owner}/{app}/secrets/{name}"), "alice|jobs|a%00", "", 1, "", ""},
		{"GET", route("/apps/{owner}/{name}/{path...}"), "alice|jobs|", "", 0, "If-None-Match: \"x\"", ""},
		{"POST", route("/apps/{owner}/{name}/{path...}"), "alice|jobs|api/in", "q=1", 0, "Content-Type: text/plain", "hello"},
		{"POST", route("/apps/{owner}/{name}/{path...}"), "alice|jobs|api/x", "", 7, "", "x"},
		{"POST", route("/apps/{owner}/{name}/{path...}"), "alice|jobs|api/json", "", 1, "Content-Type: application/json", `{"a":[1,`},
		{"PUT", route("/apps/{owner}/{name}/{path...}"), "alice|jobs|api/json/x", "", 0, "", `{"a":"\ud800"}`},
		{"GET", route("/healthz"), "", "", 4, "", ""},
		{"GET", route("/metrics"), "", "", 0, "", ""},
		{"PATCH", route(doc), "", "", 1, "", "{}"},
		{"GET", raw, "/v1/apps/alice/jobs/dbs/jobs/docs/a/b", "", 1, "", ""},
		{"GET", raw, "/v1/apps/ALICE/jobs/dbs/x%20y/docs/%ff", "%zz", 5, "", ""},
		{"GET", raw, "/v1/apps/alice/jobs/dbs/jobs/docs", "after=%00", 8, "", ""},
		{"GET", raw, "/", "", 0, "Host: jobs--alice.localhost:8080", ""},
		{"POST", raw, "/api/in", "q=1", 1, "Host: JOBS--alice.localhost.", "hello"},
		{"GET", raw, "/_handoff/client/../../v1/whoami", "", 1, "Host: jobs--alice.localhost", ""},
		{"GET", raw, "/x", "", 0, "Host: a--b--c--.localhost", ""},
		{"OPTIONS", route(doc), "", "", 1, "Origin: http://jobs--alice.localhost\nAccess-Control-Request-Method: PUT", ""},
		{"GET", route("/v1/whoami"), "", "", 1, "Origin: http://pub--alice.localhost:1", ""},
		{"PUT", route("/v1/apps/{owner}/{app}/settings"), "alice|jobs", "", 1, "", `{"origins":["http://localhost:5173","x:/y",""]}`},
	} {
		f.Add(s.method, s.route, s.params, s.query, s.auth, s.header, []byte(s.body))
	}

	f.Fuzz(func(t *testing.T, method string, route uint8, params, query string, authKind uint8, header string, body []byte) {
		fs.do(t, method, route, params, query, authKind, header, body)
	})
}

// do sends one fuzzed request and checks its answer.
func (fs *fuzzServer) do(t *testing.T, method string, route uint8, params, query string, authKind uint8, header string, body []byte) {
	var vals []string
	if params != "" {
		vals = strings.Split(params, "|")
	}
	filled := map[string]string{}
	var path string
	if i := int(route) % (len(fs.routes) + 1); i < len(fs.routes) {
		path = wildcardRE.ReplaceAllStringFunc(fs.routes[i], func(w string) string {
			m := wildcardRE.FindStringSubmatch(w)
			v := fuzzDefaults[m[1]]
			if len(vals) > 0 {
				v, vals = vals[0], vals[1:]
			}
			filled[m[1]] = v
			return v // as given: escaped or not, as a client might send it
		})
	} else {
		path = params
	}
	if method == "" {
		method = http.MethodGet
	}
	target := "http://handoff.test" + path
	if query != "" {
		target += "?" + query
	}
	req, err := http.NewRequest(method, target, bytes.NewReader(body))
	if err != nil || req.URL.Path == "" || req.URL.Opaque != "" {
		return // not a request any client can send
	}
	for _, line := range strings.Split(header, "\n") {
		k, v, _ := strings.Cut(line, ":")
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if k == "" && v == "" {
			continue
		}
		if !headerOnTheWire(k, v) {
			return // net/http answers 400 before any handler sees it
		}
		if strings.EqualFold(k, "Host") {
			req.Host = v // an app's site, say
			continue
		}
		req.Header.Add(k, v)
	}
	fs.mu.Lock()
	alice, admin, bob, device := fs.tokens["alice"], fs.tokens["admin"], fs.tokens["bob"], fs.device
	fs.mu.Unlock()
	switch authKind % 9 {
	case 1:
		req.Header.Set("Authorization", "Bearer "+alice)
	case 2:
		req.Header.Set("Authorization", "Bearer "+admin)
	case 3:
		req.Header.Set("Authorization", "Bearer "+bob)
	case 4:
		req.Header.Set("Authorization", "Bearer hnd_not-a-token")
	case 5:
		req.Header.Set("Authorization", "Basic YWxpY2U6cHc=")
	case 6:
		req.Header.Set("Authorization", device.Sign(method, req.URL.RequestURI(), body, time.Now()))
	case 7:
		req.Header.Set("Authorization", "Device "+params)
	case 8:
		req.Header.Add("Authorization", "Bearer "+alice)
		req.Header.Add("Authorization", "Bearer "+bob)
	}
	// Many client addresses, so that bad credentials are rate-limited
	// now and then but do not shut every later input out.
	n := fs.addrs.Add(1) % 1024
	req.RemoteAddr = fmt.Sprintf("10.0.%d.%d:4000", n/256, n%256)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req = req.WithContext(ctx)
	w := fuzzWriter{httptest.NewRecorder(), cancel}
	describe := func() string {
		return fmt.Sprintf("%s %s\nheaders %q\nbody %.300q\nanswer %d %.1000s\nserver log:\n%s",
			method, target, req.Header, body, w.Code, w.Body, tail(fs.logs.String(), 2000))
	}
	func() {
		defer func() {
			if v := recover(); v != nil {
				t.Fatalf("the request panicked: %v\n%s", v, describe())
			}
		}()
		fs.srv.ServeHTTP(w, req)
	}()

	if w.Code >= 500 && !fs.appFailure(req.URL.Path, w) {
		t.Fatalf("a %d answer:\n%s", w.Code, describe())
	}
	if strings.HasPrefix(req.URL.Path, "/v1/") && w.Code >= 400 {
		var e errorOut
		if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("an error without a code and a message:\n%s", describe())
		}
	}
	if w.Code == http.StatusOK {
		fs.checkOK(t, method, req.URL.Path, filled, w.Body.Bytes(), describe)
	}
}

// appFailure reports whether w is an app's own failure on its fetch lane:
// 502 app_error with an error id, under /apps/{owner}/{name}/api.
func (fs *fuzzServer) appFailure(path string, w fuzzWriter) bool {
	var e errorOut
	parts := strings.SplitN(path, "/", 6) // "", apps, owner, name, api, rest
	return w.Code == http.StatusBadGateway && len(parts) >= 5 && parts[1] == "apps" && parts[4] == "api" &&
		json.Unmarshal(w.Body.Bytes(), &e) == nil && e.Error.Code == "app_error" && e.Error.ID != "" &&
		strings.Contains(e.Error.Message, "handoff logs --app")
}

type errorOut struct {
	Error struct{ Code, Message, ID string }
}

// checkOK looks inside successful answers for server failures, and keeps
// the credentials up to date when the input changed them.
func (fs *fuzzServer) checkOK(t *testing.T, method, path string, filled map[string]string, body []byte, describe func() string) {
	switch {
	case strings.HasSuffix(path, "/bulk"):
		var out struct {
			Results []struct{ Error *struct{ Code string } }
		}
		if json.Unmarshal(body, &out) == nil {
			for _, r := range out.Results {
				if r.Error != nil && r.Error.Code == "internal" {
					t.Fatalf("a bulk result is an internal error:\n%s", describe())
				}
			}
		}
	case strings.HasSuffix(path, "/feed"):
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<24)
		event := ""
		for sc.Scan() {
			line := sc.Text()
			if e, ok := strings.CutPrefix(line, "event: "); ok {
				event = e
			}
			var e errorOut
			if d, ok := strings.CutPrefix(line, "data: "); ok && event == "error" &&
				json.Unmarshal([]byte(d), &e) == nil && e.Error.Code == "internal" {
				t.Fatalf("a feed ended with an internal error:\n%s", describe())
			}
		}
	case method == http.MethodPost && strings.HasSuffix(path, "/token"):
		var out struct{ Token string }
		if json.Unmarshal(body, &out) == nil && out.Token != "" {
			fs.mu.Lock()
			if _, ok := fs.tokens[filled["user"]]; ok {
				fs.tokens[filled["user"]] = out.Token
			}
			fs.mu.Unlock()
		}
	case method == http.MethodDelete && path == "/v1/devices/laptop":
		fs.mu.Lock()
		fs.addDevice(t)
		fs.mu.Unlock()
	}
}

// headerOnTheWire reports whether net/http lets a header line through:
// a name of token characters, a value without control characters.
func headerOnTheWire(k, v string) bool {
	if k == "" {
		return false
	}
	for _, c := range []byte(k) {
		if c <= ' ' || c >= 0x7f || strings.IndexByte("\"(),/:;<=>?@[\\]{}", c) >= 0 {
			return false
		}
	}
	for _, c := range []byte(v) {
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
