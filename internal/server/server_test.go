package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store/sqlite"
)

const adminToken = "admintoken"

// env is a server on a real SQLite store with a few users:
// alice owns alice/jobs (private) and alice/pub (public), bob is an
// editor of alice/jobs, carol a viewer, dave a stranger.
type env struct {
	t      *testing.T
	e      *engine.Engine
	srv    *Server
	ts     *httptest.Server
	tokens map[string]string
	logs   *syncBuffer
}

// syncBuffer collects the server's log; handlers write it on their own
// goroutines while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, Options{})
}

// newEnvWith is newEnv with a server made with o (its Logger is set).
func newEnvWith(t *testing.T, o Options) *env {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := engine.New(st, engine.Options{})
	if _, err := e.Bootstrap(context.Background(), adminToken); err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	srv := New(e, o)
	v := &env{t: t, e: e, srv: srv, tokens: map[string]string{"admin": adminToken}, logs: logs}
	v.ts = httptest.NewServer(srv)
	t.Cleanup(v.ts.Close)

	for _, u := range []string{"alice", "bob", "carol", "dave"} {
		var out struct{ Name, Token string }
		v.mustJSON(v.do("POST", "/v1/users", "admin", `{"name":"`+u+`"}`), 201, &out)
		v.tokens[u] = out.Token
	}
	v.mustJSON(v.do("POST", "/v1/apps", "alice", `{"app":"alice/jobs"}`), 201, nil)
	v.mustJSON(v.do("POST", "/v1/apps", "alice", `{"app":"alice/pub","public":true}`), 201, nil)
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/members", "alice", `{"user":"bob","role":"editor"}`), 200, nil)
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/members", "alice", `{"user":"carol","role":"viewer"}`), 200, nil)
	return v
}

// resp is an answer read in full.
type resp struct {
	status int
	header http.Header
	body   []byte
}

// do sends a request as user ("" for anonymous, or a raw "Bearer ..."
// header value when it starts with "raw:"). body is sent as is.
func (v *env) do(method, path, user string, body string, hdr ...string) resp {
	v.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	host, path := v.siteHost(path)
	req, err := http.NewRequest(method, v.ts.URL+path, rd)
	if err != nil {
		v.t.Fatal(err)
	}
	req.Host = host
	switch {
	case strings.HasPrefix(user, "raw:"):
		req.Header.Set("Authorization", strings.TrimPrefix(user, "raw:"))
	case user != "":
		tok, ok := v.tokens[user]
		if !ok {
			v.t.Fatalf("no token for %q", user)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := v.ts.Client().Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		v.t.Fatal(err)
	}
	return resp{res.StatusCode, res.Header, b}
}

// siteHost turns "/apps/{owner}/{name}/rest", the old form of a site's
// path that tests still write, into the site's host and "/rest"; other
// paths go to the main origin ("" keeps the URL's host).
func (v *env) siteHost(path string) (host, p string) {
	rest, ok := strings.CutPrefix(path, "/apps/")
	if !ok {
		return "", path
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 3 {
		return "", path
	}
	return engine.SiteLabel(parts[0], parts[1]) + ".localhost:" + v.port(), "/" + parts[2]
}

// port is the test server's port.
func (v *env) port() string {
	_, p, _ := net.SplitHostPort(v.ts.Listener.Addr().String())
	return p
}

// mustJSON checks the status and decodes the body into out (if not nil).
func (v *env) mustJSON(r resp, status int, out any) {
	v.t.Helper()
	if r.status != status {
		v.t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		v.t.Fatalf("Content-Type %q, want JSON", ct)
	}
	if out != nil {
		if err := json.Unmarshal(r.body, out); err != nil {
			v.t.Fatalf("decode %s: %v", r.body, err)
		}
	}
}

// mustError checks that r is a JSON error with status and code, and
// returns it.
func (v *env) mustError(r resp, status int, code string) apiError {
	v.t.Helper()
	var out struct{ Error apiError }
	v.mustJSON(r, status, &out)
	if out.Error.Code != code {
		v.t.Fatalf("code %q, want %q: %s", out.Error.Code, code, r.body)
	}
	if out.Error.Message == "" {
		v.t.Fatalf("error without a message: %s", r.body)
	}
	return out.Error
}

type apiError struct {
	Code, Message, Reason, ID string
}

type writeOut struct {
	OK       bool
	ID       string
	Rev      string
	Seq      int64
	Existing bool
}

// put writes a doc as user and returns the result, failing the test on
// any error.
func (v *env) put(user, db, id, body string) writeOut {
	v.t.Helper()
	var w writeOut
	v.mustJSON(v.do("PUT", docPath("alice/jobs", db, id), user, body), 200, &w)
	if !w.OK || w.ID != id || w.Rev == "" || w.Seq == 0 {
		v.t.Fatalf("bad put result %+v", w)
	}
	return w
}

func docPath(app, db, id string) string {
	return "/v1/apps/" + app + "/dbs/" + db + "/docs/" + escapeID(id)
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	var out map[string]bool
	v.mustJSON(v.do("GET", "/healthz", "", ""), 200, &out)
	if !out["ok"] {
		t.Fatalf("healthz = %v", out)
	}
	// Probes and scrapers do not authenticate: a stale header is ignored.
	v.mustJSON(v.do("GET", "/healthz", "raw:Bearer nope", ""), 200, nil)
}

func TestUnknownRouteAndMethod(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.mustError(v.do("GET", "/v1/nope", "alice", ""), 404, "not_found")
	v.mustError(v.do("GET", "/nope", "", ""), 404, "not_found")
	// An unescaped '/' in an id makes the path too long for any route.
	e := v.mustError(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/docs/a/b", "alice", ""), 404, "not_found")
	if !strings.Contains(e.Message, "%2F") {
		t.Errorf("404 message gives no hint about escaping: %q", e.Message)
	}

	r := v.do("DELETE", "/v1/whoami", "alice", "")
	v.mustError(r, 405, "invalid")
	if got := r.header.Get("Allow"); got != "GET, HEAD" {
		t.Errorf("Allow = %q", got)
	}
	r = v.do("PATCH", docPath("alice/jobs", "jobs", "x"), "alice", "{}")
	v.mustError(r, 405, "invalid")
	for _, m := range []string{"PUT", "GET", "DELETE"} {
		if !strings.Contains(r.header.Get("Allow"), m) {
			t.Errorf("Allow %q lacks %s", r.header.Get("Allow"), m)
		}
	}
}

func TestPanicIsAnInternalError(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.srv.mux.HandleFunc("GET /boom", func(http.ResponseWriter, *http.Request) { panic("kaboom") })
	v.mustError(v.do("GET", "/boom", "", ""), 500, "internal")
	if !strings.Contains(v.logs.String(), "kaboom") {
		t.Errorf("the panic was not logged: %s", v.logs)
	}
	// The server is still serving.
	v.mustJSON(v.do("GET", "/v1/whoami", "alice", ""), 200, nil)
}

func TestPanicAfterWritingAbortsTheResponse(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.srv.mux.HandleFunc("GET /half", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"docs":[`))
		http.NewResponseController(w).Flush() // through the wrapper's Unwrap
		w.(http.Flusher).Flush()
		panic("late")
	})
	res, err := v.ts.Client().Get(v.ts.URL + "/half")
	if err == nil {
		_, err = io.ReadAll(res.Body)
		res.Body.Close()
	}
	if err == nil {
		t.Fatal("a response broken by a panic arrived as if complete")
	}
	if !strings.Contains(v.logs.String(), "late") {
		t.Errorf("the panic was not logged: %s", v.logs)
	}
	v.mustJSON(v.do("GET", "/v1/whoami", "alice", ""), 200, nil)
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.put("alice", "jobs", "m1", `{"n":1}`)
	v.do("PUT", docPath("alice/jobs", "jobs", "m1")+"?ifRev=1-stale", "alice", `{"n":2}`)
	v.do("GET", "/v1/whoami", "alice", "")
	v.do("GET", "/no/such/path/12345", "", "")
	v.do("GET", docPath("alice/jobs", "jobs", "secret-id-777"), "alice", "")

	r := v.do("GET", "/metrics", "", "")
	if r.status != 200 {
		t.Fatalf("metrics: %d %s", r.status, r.body)
	}
	text := string(r.body)
	for _, want := range []string{
		`handoff_http_requests_total{code="200",route="GET /v1/whoami"} 1`,
		`handoff_http_requests_total{code="409",route="PUT /v1/apps/{owner}/{app}/dbs/{db}/docs/{id}"} 1`,
		`handoff_http_requests_total{code="404",route="unmatched"} 1`,
		`handoff_http_requests_total{code="201",route="POST /v1/users"} 4`,
		`handoff_http_request_duration_seconds_count{route="GET /v1/whoami"} 1`,
		`handoff_writes_total{result="ok"} 1`,
		`handoff_writes_total{result="conflict"} 1`,
		`go_goroutines`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	// Labels come from patterns, never from the raw path.
	for _, leak := range []string{"secret-id-777", "12345", "alice/jobs"} {
		if strings.Contains(text, leak) {
			t.Errorf("metrics contain the raw path fragment %q", leak)
		}
	}
}

func TestServersShareARegistry(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	reg := v.srv.Registry()
	other := New(v.e, Options{Registry: reg})
	rec := httptest.NewRecorder()
	other.ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
	if rec.Code != 200 {
		t.Fatalf("second server: %d", rec.Code)
	}
	v.do("GET", "/healthz", "", "")
	if !strings.Contains(string(v.do("GET", "/metrics", "", "").body), `handoff_http_requests_total{code="200",route="GET /healthz"} 2`) {
		t.Errorf("the two servers do not count into one series")
	}
}
