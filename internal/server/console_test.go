package server

// Browser tests of the operator console and the client module, in a real
// headless Chromium driven by chromedp, against the whole stack: SQLite,
// the engine with access.js and backend.js on the JavaScript VM, and this
// HTTP server. The job example (examples/jobs) is deployed as it ships.
//
// Chromium is found at /usr/bin/chromium (.ci/run installs it). Without
// it the tests skip, unless CI is set: then they fail, so a CI machine
// can never pass them by not running them.
//
// Real time is fine here: the job needs no waiting, and every wait on
// the page is a bounded poll of the DOM, never a sleep.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/backend"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store/sqlite"
)

const (
	chromiumPath = "/usr/bin/chromium"
	jobsApp      = "alice/jobs"
	pageTimeout  = 30 * time.Second // a bound on each wait, generous for -race on two cores
)

var (
	consoleAdmin = engine.Actor{User: engine.AdminUser, Admin: true, Path: "cli"}
	aliceCLI     = engine.Actor{User: "alice", Path: "cli"}
)

// stack is the whole server with the job example deployed as alice/jobs.
type stack struct {
	t     *testing.T
	ctx   context.Context
	e     *engine.Engine
	ts    *httptest.Server
	token string // alice's
	gate  *gate
	feeds atomic.Int64 // feed requests being served right now

	accessJS string
}

func newStack(t *testing.T, backendJS string) *stack {
	t.Helper()
	ctx := context.Background()
	accessJS := readExample(t, "access.js")
	if backendJS == "" {
		backendJS = readExample(t, "backend.js")
	}
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.NewTextHandler(newTestLog(t), &slog.HandlerOptions{Level: slog.LevelWarn}))
	g := &gate{}
	e := engine.New(st, engine.Options{
		Logger: log,
		Code:   gatedCompiler{jsapp.New(jsapp.Options{Backend: backend.Options{Logger: log}}), g},
	})
	if _, err := e.Bootstrap(ctx, adminToken); err != nil {
		t.Fatal(err)
	}
	token, err := e.AddUser(ctx, consoleAdmin, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateApp(ctx, consoleAdmin, jobsApp, false); err != nil {
		t.Fatal(err)
	}
	// The access budget is a CPU guard on real time; -race on a loaded
	// machine can exceed the 100 ms default without anything being wrong.
	if err := e.SetAccessTimeout(ctx, consoleAdmin, jobsApp, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Deploy(ctx, aliceCLI, jobsApp, accessJS, backendJS); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	t.Cleanup(g.release) // let held handlers go before the engine stops

	s := &stack{t: t, ctx: ctx, e: e, token: token, gate: g, accessJS: accessJS}
	srv := New(e, Options{Logger: log})
	s.ts = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/feed") {
			s.feeds.Add(1)
			defer s.feeds.Add(-1)
		}
		srv.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		s.ts.CloseClientConnections()
		s.ts.Close()
	})
	return s
}

func readExample(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "examples", "jobs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// put writes a document as alice through the CLI path.
func (s *stack) put(app, db, id, body string) appcode.WriteResult {
	s.t.Helper()
	return s.putAs(aliceCLI, app, db, id, body, "")
}

func (s *stack) putAs(a engine.Actor, app, db, id, body, ifRev string) appcode.WriteResult {
	s.t.Helper()
	r, err := s.e.Put(s.ctx, a, app, db, id, []byte(body), appcode.PutOptions{IfRev: ifRev})
	if err != nil {
		s.t.Fatalf("put %s/%s/%s: %v", app, db, id, err)
	}
	return r
}

// until polls cond (a check on the server side) for a bounded time.
func (s *stack) until(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(pageTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *stack) status(app, db, id string) string {
	raw, err := s.e.Get(s.ctx, aliceCLI, app, db, id)
	if err != nil {
		return ""
	}
	var d struct{ Status string }
	json.Unmarshal(raw, &d)
	return d.Status
}

func (s *stack) deadEvents(app string) []engine.EventInfo {
	evs, err := s.e.Events(s.ctx, aliceCLI, app, true, 0, 100)
	if err != nil {
		s.t.Fatal(err)
	}
	return evs
}

// gate holds onChange deliveries of pending documents while closed, so a
// test can see a job sit in pending before the handler claims it.
type gate struct {
	mu   sync.Mutex
	open chan struct{} // nil when not held
}

func (g *gate) hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open == nil {
		g.open = make(chan struct{})
	}
}

func (g *gate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open != nil {
		close(g.open)
		g.open = nil
	}
}

func (g *gate) wait(ctx context.Context, ev appcode.ChangeEvent) error {
	g.mu.Lock()
	open := g.open
	g.mu.Unlock()
	if open == nil {
		return nil
	}
	var d struct{ Status string }
	json.Unmarshal(ev.Doc, &d)
	if d.Status != "pending" {
		return nil
	}
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

type gatedCompiler struct {
	appcode.Compiler
	g *gate
}

func (c gatedCompiler) CompileBackend(filename, source string) (appcode.Backend, error) {
	b, err := c.Compiler.CompileBackend(filename, source)
	if err != nil {
		return nil, err
	}
	return gatedBackend{b, c.g}, nil
}

type gatedBackend struct {
	appcode.Backend
	g *gate
}

func (b gatedBackend) OnChange(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
	if err := b.g.wait(ctx, ev); err != nil {
		return err
	}
	return b.Backend.OnChange(ctx, ev, hc)
}

// testLog passes the server's warnings to the test log while the test runs.
type testLog struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func newTestLog(t *testing.T) *testLog {
	l := &testLog{t: t}
	t.Cleanup(func() { l.mu.Lock(); l.done = true; l.mu.Unlock() })
	return l
}

func (l *testLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.done {
		l.t.Logf("server: %s", strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

// ---- the browser

type browser struct {
	t   *testing.T
	ctx context.Context

	mu     sync.Mutex
	errors []string // uncaught exceptions of the page
}

// findChromium returns Chromium's path, or skips (fails under CI).
func findChromium(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err == nil {
		return chromiumPath
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatalf("CI=%s but Chromium is not at %s: the browser tests must run in CI (.ci/run installs it with apt-get install -y chromium)", ci, chromiumPath)
	}
	t.Skipf("skipping the browser test: Chromium is not at %s; install it with `apt-get install -y chromium` (with CI set this fails instead)", chromiumPath)
	return ""
}

// chromium is the one Chromium process the package's browser tests
// share: starting one costs about two seconds of CPU. Each test has a
// browser context of its own (cookies, storage, cache), as a new
// profile would give it.
var chromium struct {
	once   sync.Once
	ctx    context.Context // the browser's
	cancel func()
	err    error
}

// closeChromium ends the shared Chromium, if a test started it.
func closeChromium() {
	if chromium.cancel != nil {
		chromium.cancel()
	}
}

func startChromium(path string) {
	dir, err := os.MkdirTemp("", "handoff-chromium-")
	if err != nil {
		chromium.err = err
		return
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.UserDataDir(dir),
		chromedp.WindowSize(1280, 900),
	)
	ctx, cancel := chromedp.NewContext(actx)
	chromium.ctx = ctx
	chromium.cancel = func() {
		cancel()
		cancelAlloc()
		os.RemoveAll(dir)
	}
	chromium.err = chromedp.Do(ctx) // starts the browser
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := findChromium(t)
	chromium.once.Do(func() { startChromium(path) })
	if chromium.err != nil {
		t.Fatalf("starting Chromium: %v", chromium.err)
	}
	ctx, cancel := chromedp.NewContext(chromium.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	b := &browser{t: t, ctx: ctx}
	if err := chromedp.Do(ctx, chromedp.EmulateViewport(1280, 900)); err != nil { // opens the tab
		t.Fatalf("opening a tab in Chromium: %v", err)
	}
	exceptions := chromedp.Events(ctx, cdpruntime.ExceptionThrown)
	console := chromedp.Events(ctx, cdpruntime.ConsoleAPICalled)
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil && d.Exception.Description != "" {
				msg += " " + d.Exception.Description
			}
			b.mu.Lock()
			b.errors = append(b.errors, fmt.Sprintf("%s (%s:%d)", msg, d.URL, d.LineNumber+1))
			b.mu.Unlock()
		}
	}()
	go func() {
		for ev, err := range console {
			if err != nil {
				return
			}
			if ev.Type == "error" || ev.Type == "warning" {
				var parts []string
				for _, a := range ev.Args {
					if a.Description != "" {
						parts = append(parts, a.Description)
					} else {
						parts = append(parts, string(a.Value))
					}
				}
				b.mu.Lock()
				if !b.doneLocked() {
					t.Logf("page console.%s: %s", ev.Type, strings.Join(parts, " "))
				}
				b.mu.Unlock()
			}
		}
	}()
	// An uncaught exception in the page is a bug even when the test's
	// checks pass.
	t.Cleanup(func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		for _, e := range b.errors {
			t.Errorf("uncaught exception in the page: %s", e)
		}
		b.errors = nil
		b.t = nil
	})
	return b
}

func (b *browser) doneLocked() bool { return b.t == nil }

func (b *browser) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, pageTimeout)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v\npage text:\n%s", what, err, b.pageText())
	}
}

func (b *browser) open(url string) {
	b.t.Helper()
	b.do("open "+url, chromedp.Navigate(url))
}

// click waits for the element to be visible, then clicks it.
func (b *browser) click(sel string) {
	b.t.Helper()
	b.do("click "+sel, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
}

// waitJS polls a JavaScript condition until it is truthy.
func (b *browser) waitJS(what, cond string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, pageTimeout+5*time.Second)
	defer cancel()
	_, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond,
		chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(pageTimeout)))
	if err != nil {
		b.t.Fatalf("waiting for %s: %v\npage text:\n%s", what, err, b.pageText())
	}
}

// waitText waits until the element's text contains want.
func (b *browser) waitText(sel, want string) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf("%q in %s", want, sel),
		fmt.Sprintf(`(document.querySelector(%s)?.textContent || "").includes(%s)`, jsString(sel), jsString(want)))
}

func (b *browser) waitCount(sel string, n int) {
	b.t.Helper()
	b.waitJS(fmt.Sprintf("%d of %s", n, sel), fmt.Sprintf(`document.querySelectorAll(%s).length === %d`, jsString(sel), n))
}

// eval runs an expression (awaiting a promise) and decodes its value into out.
func (b *browser) eval(expr string, out any) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, pageTimeout)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluating %s: %v", expr, err)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			b.t.Fatalf("decoding %s: %v", raw, err)
		}
	}
}

func (b *browser) pageText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.innerText : ""`))
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	if len(s) > 3000 {
		s = s[:3000] + "…"
	}
	return s
}

func (b *browser) signIn(base, token string) {
	b.t.Helper()
	b.open(base + "/")
	b.do("type the token", chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), token))
	b.click("#sign-in")
	b.waitText("#me", "alice")
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// ---- the console

// The console and the client are served without Chromium's help; API
// paths keep their JSON errors.
func TestConsoleAssetsAndFallbacks(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	for path, ctype := range map[string]string{
		"/":                    "text/html",
		"/console/":            "text/html",
		"/console/main.js":     "text/javascript",
		"/console/console.css": "text/css",
		"/client/handoff.js":   "text/javascript",
		"/client/example.html": "text/html",
	} {
		r := v.do("GET", path, "", "")
		if r.status != 200 || !strings.HasPrefix(r.header.Get("Content-Type"), ctype) {
			t.Errorf("GET %s: %d %q, want 200 %s", path, r.status, r.header.Get("Content-Type"), ctype)
		}
		if strings.HasPrefix(path, "/client/") != (r.header.Get("Access-Control-Allow-Origin") == "*") {
			t.Errorf("GET %s: Access-Control-Allow-Origin %q", path, r.header.Get("Access-Control-Allow-Origin"))
		}
		if etag := r.header.Get("ETag"); etag == "" {
			t.Errorf("GET %s: no ETag", path)
		} else if r2 := v.do("GET", path, "", "", "If-None-Match", etag); r2.status != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: %d, want 304", path, r2.status)
		}
	}
	if csp := v.do("GET", "/", "", "").header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("the console has no script policy: %q", csp)
	}
	if r := v.do("GET", "/console/nope.js", "", ""); r.status != 404 {
		t.Errorf("GET /console/nope.js: %d, want 404", r.status)
	}
	v.mustError(v.do("GET", "/v1/nope", "alice", ""), 404, "not_found")
	v.mustError(v.do("GET", "/nope", "", ""), 404, "not_found")
	v.mustError(v.do("POST", "/", "", "{}"), 405, "invalid")
}

func TestConsoleSignInAndSignOut(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	b := newBrowser(t)
	b.open(s.ts.URL + "/")
	b.waitText("h1", "Sign in to handoff")

	// A wrong token is refused in plain words and not kept.
	b.do("type a wrong token", chromedp.WaitVisible(chromedp.CSS("#token")), chromedp.SendKeys(chromedp.CSS("#token"), "hnd_not-a-real-token"))
	b.click("#sign-in")
	b.waitText("#signin-error", "That token was not accepted")
	var saved *string
	b.eval(`localStorage.getItem("handoff.token")`, &saved)
	if saved != nil {
		t.Fatalf("a refused token was kept: %q", *saved)
	}

	b.eval(`document.querySelector("#token").value = ""`, nil)
	b.do("type alice's token", chromedp.SendKeys(chromedp.CSS("#token"), s.token))
	b.click("#sign-in")
	b.waitText("#me", "alice")
	b.waitText(`a[data-app="alice/jobs"]`, "alice/jobs")

	// The token survives a reload, and signing out forgets it.
	b.open(s.ts.URL + "/")
	b.waitText("#me", "alice")
	b.click("#sign-out")
	b.waitText("h1", "Sign in to handoff")
	b.eval(`localStorage.getItem("handoff.token")`, &saved)
	if saved != nil {
		t.Fatalf("sign-out left the token in localStorage: %q", *saved)
	}
}

func TestConsoleWatchesAJobGoPendingRunningDone(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	b := newBrowser(t)

	// A first job makes the jobs database.
	s.put(jobsApp, "jobs", "job-1", `{"kind":"job","status":"pending","attempts":0,"input":"the first job"}`)
	s.until("job-1 done", func() bool { return s.status(jobsApp, "jobs", "job-1") == "done" })

	b.signIn(s.ts.URL, s.token)
	b.click(`a[data-app="alice/jobs"]`)
	b.click(`.tabs a[data-db="jobs"]`)
	b.waitText(`tr[data-id="job-1"] .badge`, "done")
	b.waitText(`button.count[data-status="done"] .n`, "1")

	// Record every state the row of job-2 shows, with its lease cell.
	b.eval(`(() => {
		window.seen = [];
		const look = () => {
			const row = document.querySelector('tr[data-id="job-2"]');
			if (!row) return;
			const status = row.querySelector(".badge").textContent;
			const lease = row.querySelector("td.lease-cell")?.textContent;
			const last = window.seen[window.seen.length - 1];
			if (!last || last.status !== status) window.seen.push({status, lease});
		};
		new MutationObserver(look).observe(document.getElementById("view"), {subtree: true, childList: true, characterData: true});
		return true;
	})()`, nil)

	// Hold the handler so the new job sits in pending, then let it run.
	s.gate.hold()
	s.put(jobsApp, "jobs", "job-2", `{"kind":"job","status":"pending","attempts":0,"input":"count these four words","delayMs":1500}`)
	b.waitText(`tr[data-id="job-2"] .badge`, "pending")
	b.waitText(`button.count[data-status="pending"] .n`, "1")
	s.gate.release()
	b.waitText(`tr[data-id="job-2"] .badge`, "done")
	b.waitText(`button.count[data-status="done"] .n`, "2")

	var seen []struct{ Status, Lease string }
	b.eval(`window.seen`, &seen)
	var statuses []string
	for _, x := range seen {
		statuses = append(statuses, x.Status)
	}
	if !slices.Equal(statuses, []string{"pending", "running", "done"}) {
		t.Fatalf("the row of job-2 showed %v, want pending, running, done", seen)
	}
	if !strings.HasSuffix(seen[1].Lease, "s left") {
		t.Errorf("while running the lease cell read %q, want a countdown", seen[1].Lease)
	}
	var reloaded bool
	b.eval(`performance.getEntriesByType("navigation").length !== 1 || !window.seen`, &reloaded)
	if reloaded {
		t.Fatal("the page reloaded")
	}

	// The transitions graph counts both jobs' moves.
	b.waitText(`#graph [data-edge="pending->running"] text`, "2")
	b.waitText(`#graph [data-edge="running->done"] text`, "2")
	b.waitText(`#graph [data-edge="new->pending"] text`, "2")

	// The timeline: three revisions, who wrote each and through which path.
	b.click(`tr[data-id="job-2"] td.id a`)
	b.waitCount(`#timeline li.rev`, 3)
	var revs []string
	b.eval(`[...document.querySelectorAll("#timeline li.rev")].map(li => li.innerText)`, &revs)
	want := [][]string{
		{"created as", "pending", "by alice", "through the CLI", "input"},
		{"pending → running", "by onChange handler (for alice)", "through backend.js onChange", "attempts", "claimId", "leaseUntil"},
		{"running → done", "by onChange handler (for alice)", "output", "finishedAt"},
	}
	for i, parts := range want {
		for _, p := range parts {
			if !strings.Contains(revs[i], p) {
				t.Errorf("revision %d lacks %q:\n%s", i+1, p, revs[i])
			}
		}
	}
}

const brokenBackend = `
export const config = { onChange: { maxAttempts: 1 } };
export async function onChange(event, ctx) {
  throw new Error("the printer is on fire");
}
`

const fixedBackend = `
export const config = { onChange: { maxAttempts: 1 } };
export async function onChange(event, ctx) {
  ctx.log("info", "printed " + event.docId + " on attempt " + event.attempt, { seq: event.seq, status: event.doc.status });
}
`

func TestConsoleReplaysADeadEvent(t *testing.T) {
	t.Parallel()
	s := newStack(t, brokenBackend)
	b := newBrowser(t)

	w := s.put(jobsApp, "jobs", "job-1", `{"kind":"job","status":"pending","attempts":0,"input":"print me"}`)
	s.until("a dead event", func() bool { return len(s.deadEvents(jobsApp)) == 1 })
	dead := s.deadEvents(jobsApp)[0]
	if dead.Seq != w.Seq || dead.Attempts != 1 || !strings.Contains(dead.LastError, "printer is on fire") {
		t.Fatalf("dead event = %+v, want seq %d with one attempt and the error", dead, w.Seq)
	}

	b.signIn(s.ts.URL, s.token)
	b.click(`a[data-app="alice/jobs"]`)
	b.waitText(`#view`, "Dead events")
	b.click(`#ops-tab`)
	row := fmt.Sprintf(`#dead tr[data-seq="%d"]`, dead.Seq)
	b.waitText(row+" .error", "the printer is on fire")
	b.waitText(row+" .attempts", "1")
	b.waitText(row, "jobs / job-1")
	b.waitText("#logs", "the printer is on fire") // the failed run is logged
	b.waitText("#schedule", "no scheduled handler")

	// Fix the handler, then replay: the original event is delivered again.
	if _, err := s.e.Deploy(s.ctx, aliceCLI, jobsApp, s.accessJS, fixedBackend); err != nil {
		t.Fatal(err)
	}
	b.click(row + " button.replay")
	b.waitText("#replay-notice", fmt.Sprintf("Event #%d (jobs / job-1) was queued for delivery again", dead.Seq))
	b.waitText("#logs", "printed job-1 on attempt 1")
	b.waitText("#dead", "No dead events")
	b.waitText("#waiting", "Nothing waiting")
	if n := len(s.deadEvents(jobsApp)); n != 0 {
		t.Fatalf("%d dead events after the replay", n)
	}
}

func TestConsoleShowsErrorsInPlainWords(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	b := newBrowser(t)
	b.signIn(s.ts.URL, s.token)

	// An app that does not exist.
	b.open(s.ts.URL + "/#/apps/alice/nope/db/jobs")
	b.waitText(".problem", "Could not load jobs")
	// A database without documents says how to write one.
	b.open(s.ts.URL + "/#/apps/alice/jobs/db/jobs")
	b.waitText("#counts", "No documents in jobs yet")
	b.waitText("#counts", "handoff db put --app alice/jobs --db jobs")
	// A token that stopped working: the console says so and asks again.
	b.eval(`localStorage.setItem("handoff.token", "hnd_revoked"); true`, nil)
	b.open(s.ts.URL + "/")
	b.waitText(".signin .notice", "no longer accepted")
}

// ---- the client module alone

func TestClientModuleLiveQueryAndResume(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	if _, err := s.e.CreateApp(s.ctx, consoleAdmin, "alice/plain", false); err != nil {
		t.Fatal(err)
	}
	const plain = "alice/plain"
	s.put(plain, "tasks", "t1", `{"status":"open"}`)
	s.put(plain, "tasks", "t2", `{"status":"open"}`)
	s.put(plain, "tasks", "t3", `{"status":"closed"}`)

	b := newBrowser(t)
	// Any page of the server's origin will do: the module is imported on its own.
	b.open(s.ts.URL + "/client/handoff.js")
	b.eval(fmt.Sprintf(`(async () => {
		const { connect } = await import("/client/handoff.js");
		const app = connect({ token: %s }).app("alice/plain");
		window.app = app;
		window.results = [];
		window.states = [];
		window.seen = [];
		app.onStatus((s) => window.states.push(s.state));
		window.stopQuery = app.liveQuery("tasks", "status", "open",
			(docs) => window.results.push(docs.map((d) => d._id + "@" + d._rev.split("-")[0])));
		return true;
	})()`, jsString(s.token)), nil)

	step := 0
	expect := func(want ...string) {
		t.Helper()
		step++
		b.waitJS(fmt.Sprintf("live query result %d", step), fmt.Sprintf("window.results.length >= %d", step))
		var got [][]string
		b.eval(`window.results`, &got)
		if len(got) != step {
			t.Fatalf("live query called back %d times, want %d: %v", len(got), step, got)
		}
		if !slices.Equal(got[step-1], want) && !(len(got[step-1]) == 0 && len(want) == 0) {
			t.Fatalf("live query result %d = %v, want %v (all: %v)", step, got[step-1], want, got)
		}
	}
	expect("t1@1", "t2@1") // the snapshot
	s.put(plain, "tasks", "t2", `{"status":"closed"}`)
	expect("t1@1") // t2 left
	s.put(plain, "tasks", "t3", `{"status":"open"}`)
	expect("t1@1", "t3@2") // t3 entered
	s.put(plain, "tasks", "t3", `{"status":"open","note":"still open"}`)
	expect("t1@1", "t3@3") // t3 stayed, newer
	if _, err := s.e.Delete(s.ctx, aliceCLI, plain, "tasks", "t1", ""); err != nil {
		t.Fatal(err)
	}
	expect("t3@3") // deleted docs leave

	// changes() from the start of another database shares the connection.
	b.eval(`(() => { window.stopChanges = window.app.changes({ since: 0, db: "events" },
		(e) => window.seen.push(e.seq + ":" + e.id)); return true; })()`, nil)
	var seqs []int64
	for i := 1; i <= 5; i++ {
		seqs = append(seqs, s.put(plain, "events", fmt.Sprintf("e%d", i), `{"n":1}`).Seq)
	}
	b.waitJS("five changes", "window.seen.length >= 5")
	s.until("one feed connection for both subscribers", func() bool { return s.feeds.Load() == 1 })

	// The server drops every connection; the client reconnects and resumes
	// after the last change it saw.
	s.ts.CloseClientConnections()
	for i := 6; i <= 10; i++ {
		seqs = append(seqs, s.put(plain, "events", fmt.Sprintf("e%d", i), `{"n":1}`).Seq)
	}
	b.waitJS("ten changes", "window.seen.length >= 10")
	s.put(plain, "tasks", "t4", `{"status":"open"}`)
	expect("t3@3", "t4@1") // the live query lives on after the reconnect
	seqs = append(seqs, s.put(plain, "events", "e11", `{"n":1}`).Seq)
	b.waitJS("eleven changes", "window.seen.length >= 11")

	var seen []string
	b.eval(`window.seen`, &seen)
	var want []string
	for i, q := range seqs {
		want = append(want, fmt.Sprintf("%d:e%d", q, i+1))
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("changes() saw %v, want each change once, in order: %v", seen, want)
	}
	var states []string
	b.eval(`window.states`, &states)
	if i := slices.Index(states, "retrying"); i < 0 || !slices.Contains(states[i:], "live") {
		t.Fatalf("feed states %v: want the drop noticed (retrying) and the feed live again", states)
	}
	s.until("one feed connection after the reconnect", func() bool { return s.feeds.Load() == 1 })

	// Stopping every subscriber closes the connection.
	b.eval(`(() => { window.stopQuery(); window.stopChanges(); return true; })()`, nil)
	s.until("no feed connection once nobody listens", func() bool { return s.feeds.Load() == 0 })
}

// ---- the client module's errors

func TestClientModuleErrors(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	var last int64
	for i := range 37 {
		last = s.put(jobsApp, "notes", fmt.Sprintf("n%d", i), `{"kind":"note"}`).Seq
	}
	b := newBrowser(t)
	b.open(s.ts.URL + "/client/handoff.js")
	var out struct {
		Code, Forbidden string
		IsError         bool
		Missing         *string
		DelCode         string
		EmptyRevPut     string
		EmptyRevDel     string
		Cas             string
		Status          int
		Head            int64
	}
	b.eval(fmt.Sprintf(`(async () => {
		const { connect } = await import("/client/handoff.js");
		const app = connect({ token: %s }).app("alice/jobs");
		const db = app.db("jobs");
		const out = { head: await app.head() };
		try {
			await db.put({ kind: "job", status: "running", attempts: 0, input: "x" }, { id: "bad" });
		} catch (e) {
			out.code = e.code; out.forbidden = e.forbidden; out.isError = e instanceof Error; out.status = e.status;
		}
		out.missing = await db.get("nope");
		try { await db.del("nope"); } catch (e) { out.delCode = e.code; }
		await db.put({ kind: "job", status: "pending", attempts: 0, input: "x" }, { id: "cas" });
		try { await db.put({ kind: "job", status: "pending", attempts: 0, input: "y" }, { id: "cas", ifRev: "" }); } catch (e) { out.emptyRevPut = e.code; }
		try { await db.del("cas", { ifRev: "" }); } catch (e) { out.emptyRevDel = e.code; }
		out.cas = (await db.get("cas")).input;
		return out;
	})()`, jsString(s.token)), &out)
	if out.Code != "forbidden" || !out.IsError || out.Status != 403 || !strings.Contains(out.Forbidden, "a new job starts as pending") {
		t.Fatalf("refused put: %+v", out)
	}
	if out.Missing != nil {
		t.Fatalf("get of a missing doc = %v, want null", *out.Missing)
	}
	if out.Head != last {
		t.Fatalf("head() = %d, want the latest seq %d", out.Head, last)
	}
	if out.DelCode != "not_found" {
		t.Fatalf("deleting a missing doc: code %q, want not_found", out.DelCode)
	}
	if out.EmptyRevPut != "invalid" || out.EmptyRevDel != "invalid" || out.Cas != "x" {
		t.Fatalf("writes with an empty ifRev: put %q, del %q, input now %q; want invalid, invalid and the document untouched", out.EmptyRevPut, out.EmptyRevDel, out.Cas)
	}
}

// The example page of docs/console.md works as it ships.
func TestClientExamplePage(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	b := newBrowser(t)
	b.open(s.ts.URL + "/client/example.html")
	b.do("connect", chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), s.token),
		chromedp.SetValue(chromedp.CSS("#app"), jobsApp))
	b.click("#connect button")
	b.waitText("#pending h2", "pending (0)")
	b.do("type a job", chromedp.WaitVisible(chromedp.CSS("#input")), chromedp.SendKeys(chromedp.CSS("#input"), "three little words"))
	b.click("#queue button")
	b.waitText("#done ul", "→ 3 words")
	b.waitText("#done h2", "done (1)")
}

// ---- screenshots for docs/console.md

// TestScreenshots writes docs/screenshots/*.png when HANDOFF_SCREENSHOTS=1:
//
//	HANDOFF_SCREENSHOTS=1 go test ./server -run TestScreenshots
func TestScreenshots(t *testing.T) {
	t.Parallel()
	if os.Getenv("HANDOFF_SCREENSHOTS") != "1" {
		t.Skip("set HANDOFF_SCREENSHOTS=1 to write docs/screenshots/*.png")
	}
	s := newStack(t, "")
	b := newBrowser(t)
	out := filepath.Join("..", "..", "docs", "screenshots")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	shoot := func(name string) {
		t.Helper()
		b.do("settle", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, 0)`))
		time.Sleep(300 * time.Millisecond) // let the last frame paint
		png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, name), png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote docs/screenshots/%s", name)
	}

	// Jobs in every status: done, running (one with an error noted),
	// failed after its lease ran out, and pending.
	inputs := []string{"resize the header image", "count the words of chapter one", "send the weekly digest", "rebuild the search index"}
	for i, in := range inputs {
		s.put(jobsApp, "jobs", fmt.Sprintf("job-%d", i+1), fmt.Sprintf(`{"kind":"job","status":"pending","attempts":0,"input":%q}`, in))
	}
	s.put(jobsApp, "jobs", "job-5", `{"kind":"job","status":"pending","attempts":0,"input":"transcode the talk video","delayMs":600000}`)
	s.put(jobsApp, "jobs", "job-6", `{"kind":"job","status":"pending","attempts":0,"input":"import the customer list","failAttempts":2}`)
	s.until("the first jobs done", func() bool {
		return s.status(jobsApp, "jobs", "job-4") == "done" && s.status(jobsApp, "jobs", "job-5") == "running" && s.status(jobsApp, "jobs", "job-6") == "running"
	})
	s.gate.hold()
	r := s.put(jobsApp, "jobs", "job-7", `{"kind":"job","status":"pending","attempts":0,"input":"export the invoices"}`)
	claim := fmt.Sprintf(`{"kind":"job","status":"running","attempts":1,"input":"export the invoices","claimId":"m2x-7","leaseUntil":%d}`, time.Now().Add(150*time.Millisecond).UnixMilli())
	r = s.putAs(engine.Actor{User: "alice", Handler: "onChange"}, jobsApp, "jobs", "job-7", claim, r.Rev)
	time.Sleep(200 * time.Millisecond)
	failed := strings.Replace(claim, `"status":"running"`, `"status":"failed","lastError":"lease expired: the worker stopped answering"`, 1)
	s.putAs(engine.Actor{User: "alice", Handler: "scheduled"}, jobsApp, "jobs", "job-7", failed, r.Rev)
	s.put(jobsApp, "jobs", "job-8", `{"kind":"job","status":"pending","attempts":0,"input":"thumbnail the new uploads"}`)
	s.put(jobsApp, "jobs", "job-9", `{"kind":"job","status":"pending","attempts":0,"input":"email the receipts"}`)

	// A second app whose handler fails: dead events and logs.
	const mailer = "alice/mailer"
	if _, err := s.e.CreateApp(s.ctx, consoleAdmin, mailer, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.e.Deploy(s.ctx, aliceCLI, mailer, "", `
export const config = { scheduled: { interval: "2s" }, onChange: { maxAttempts: 1 } };
export async function onChange(event, ctx) {
  ctx.log("info", "sending the welcome mail", { to: event.doc.to });
  throw new Error("smtp: connection refused by mail.internal:25");
}
export async function scheduled(event, ctx) {
  ctx.log("debug", "outbox sweep: nothing to resend");
}
`); err != nil {
		t.Fatal(err)
	}
	s.put(mailer, "mails", "welcome-ada", `{"to":"ada@example.com","status":"queued"}`)
	s.put(mailer, "mails", "welcome-grace", `{"to":"grace@example.com","status":"queued"}`)
	s.until("two dead mails", func() bool { return len(s.deadEvents(mailer)) == 2 })

	b.open(s.ts.URL + "/")
	b.waitText("h1", "Sign in to handoff")
	shoot("sign-in.png")

	b.signIn(s.ts.URL, s.token)
	b.waitText(`a[data-app="alice/mailer"]`, "alice/mailer")
	shoot("apps.png")

	b.open(s.ts.URL + "/#/apps/alice/jobs/db/jobs")
	b.waitText(`button.count[data-status="failed"] .n`, "1")
	b.waitText(`button.count[data-status="pending"] .n`, "2")
	b.waitText(`#graph [data-edge="running->failed"] text`, "1")
	shoot("database.png")

	b.click(`tr[data-id="job-2"] td.id a`)
	b.waitCount(`#timeline li.rev`, 3)
	shoot("timeline.png")

	b.open(s.ts.URL + "/#/apps/alice/mailer/ops")
	b.waitCount(`#dead tr[data-seq]`, 2)
	b.waitText("#last-tick", "ago")
	b.waitText("#logs", "outbox sweep")
	shoot("events-and-logs.png")
}
