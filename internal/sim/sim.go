// Package sim runs a whole handoff app on a virtual clock for
// deterministic scenario tests: the engine on a real SQLite store in a
// temporary directory, access.js and backend.js on the JavaScript VM, and
// every clock (the engine's, Date.now(), setTimeout, run limits) reading
// one clock.Virtual that moves only when the test moves it.
//
// A test puts documents, then plays protocol time with RunFor or
// RunUntil. Those never jump past a timer: they let the system come to
// rest (Settle), move the clock to the next armed timer, and repeat, so a
// 30 s lease, a 5 s sweep and a 10 s backoff each fire at their own
// virtual instant, whatever the real machine's speed.
//
// Rest is the engine's own count of work in progress on the virtual
// clock (Engine.WaitIdle), so environments in parallel tests do not see
// each other.
package sim

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/internal/access"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appdir"
	"github.com/handoff-run/handoff/internal/backend"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store/sqlite"
)

// TB is what an Env needs of its caller: a *testing.T in Go tests, and
// the runner of an app's own *.test.js files, which turns Fatalf into the
// failure of one JavaScript test rather than of a Go one.
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// DefaultStart is where the virtual clock starts unless Options.Start
// says otherwise: a round time, so schedules tick on round seconds.
var DefaultStart = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// Options configure an Env. Zero values pick the defaults.
type Options struct {
	// Dir is the app's folder (access.js and/or backend.js), read with
	// appdir.Read and deployed before the engine starts. Required.
	Dir string
	// Code, when set, is the folder's code already read: a run of many
	// tests bundles the folder once, not once a test.
	Code *appdir.Code
	// App is "owner/name"; default "alice/app". The owner is created as a
	// user.
	App string
	// Start is the virtual clock's first instant; default DefaultStart.
	Start time.Time
	// AccessTimeout is the app's access.js deadline. That deadline is a
	// CPU budget on real time (it stops runaway code, it is no protocol
	// timeout), and -race on a loaded machine can make a tiny access call
	// take far longer than the 100 ms default; default 10 s.
	AccessTimeout time.Duration
	// OnChange, when set, wraps every onChange delivery; next runs
	// backend.js. Tests use it to deliver one event twice at once, say.
	OnChange func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext, next NextFunc) error
	// Public makes the app public: users who are not members, and the
	// anonymous, reach access.js, which decides.
	Public bool
	// Transport answers the handlers' outbound fetch (backend.Options);
	// nil leaves them on the network.
	Transport http.RoundTripper
	// OnAccess, when set, sees every access.js decision: its input and
	// the error, nil when the write was allowed.
	OnAccess func(in appcode.AccessInput, err error)
	// Ctx, when set, bounds the environment's calls and its play of
	// virtual time: once it ends, RunFor and RunUntil fail.
	Ctx context.Context
	// SettleCap is how long (real time) Settle may wait for the system to
	// come to rest before failing the test; default 10 s.
	SettleCap time.Duration
}

// Env is one running app on a virtual clock.
type Env struct {
	T      TB
	Ctx    context.Context
	Engine *engine.Engine
	Clock  *clock.Virtual
	Store  *Store
	App    string
	Start  time.Time
	// Admin is the server admin; Owner the app's owner, who writes as the
	// CLI does.
	Admin, Owner engine.Actor

	rec *recorder
	cap time.Duration
}

// New builds the environment, deploys o.Dir and starts the engine. Its
// cleanup stops the engine and closes the store.
func New(t TB, o Options) *Env {
	t.Helper()
	if o.App == "" {
		o.App = "alice/app"
	}
	if o.Start.IsZero() {
		o.Start = DefaultStart
	}
	if o.AccessTimeout == 0 {
		o.AccessTimeout = 10 * time.Second
	}
	if o.SettleCap == 0 {
		o.SettleCap = 10 * time.Second
	}
	owner, _, ok := strings.Cut(o.App, "/")
	if !ok {
		t.Fatalf("sim: App %q is not owner/name", o.App)
	}
	var code appdir.Code
	if o.Code != nil {
		code = *o.Code
	} else {
		var err error
		if code, err = appdir.Read(o.Dir); err != nil {
			t.Fatalf("sim: reading the app folder: %v", err)
		}
	}

	ctx := o.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	raw, err := sqlite.OpenUnsynced(t.TempDir())
	if err != nil {
		t.Fatalf("sim: opening the store: %v", err)
	}
	st := &Store{Store: raw}
	clk := clock.NewVirtual(o.Start)
	rec := &recorder{clk: clk, onChange: o.OnChange}
	js := jsapp.New(jsapp.Options{Access: access.Options{Now: clk.Now}, Backend: backend.Options{
		Now: clk.Now,
		AfterFunc: func(d time.Duration, f func()) func() bool {
			return clk.AfterFunc(d, f).Stop
		},
		Busy:      clk.Busy,
		Logger:    testLogger(t),
		Transport: o.Transport,
	}})
	e := engine.New(st, engine.Options{
		Clock:  clk,
		Code:   compiler{Compiler: js, seen: o.OnAccess, rec: rec},
		Logger: testLogger(t),
	})
	env := &Env{T: t, Ctx: ctx, Engine: e, Clock: clk, Store: st, App: o.App, Start: o.Start,
		Admin: engine.Actor{User: engine.AdminUser, Admin: true, Path: "cli"},
		Owner: engine.Actor{User: owner, Path: "cli"}, rec: rec, cap: o.SettleCap}
	// Cleanups run last-in first-out: the engine stops before the store
	// closes.
	t.Cleanup(func() { raw.Close() })

	if _, err := e.Bootstrap(ctx, ""); err != nil {
		t.Fatalf("sim: bootstrap: %v", err)
	}
	if owner != engine.AdminUser {
		if _, err := e.AddUser(ctx, env.Admin, owner); err != nil {
			t.Fatalf("sim: adding user %s: %v", owner, err)
		}
	}
	// The harness's own app takes Flush's writes; it has no code.
	if _, err := e.CreateApp(ctx, env.Admin, engine.AdminUser+"/sim-flush", false); err != nil {
		t.Fatalf("sim: creating the flush app: %v", err)
	}
	fa, err := raw.App(ctx, engine.AdminUser, "sim-flush")
	if err != nil {
		t.Fatal(err)
	}
	st.flushApp = fa.ID
	if _, err := e.CreateApp(ctx, env.Admin, o.App, o.Public); err != nil {
		t.Fatalf("sim: creating app %s: %v", o.App, err)
	}
	if err := e.SetAccessTimeout(ctx, env.Admin, o.App, o.AccessTimeout); err != nil {
		t.Fatalf("sim: setting the access timeout: %v", err)
	}
	if _, err := e.Deploy(ctx, env.Admin, o.App, code.Access, code.Backend); err != nil {
		t.Fatalf("sim: deploying %s: %v", o.Dir, err)
	}
	if err := e.Start(ctx); err != nil {
		t.Fatalf("sim: starting the engine: %v", err)
	}
	t.Cleanup(e.Close)
	env.Settle()
	return env
}

// WriteApp writes an app folder in a temporary directory: files maps
// names (access.js, backend.js) to their source. It returns the folder.
func WriteApp(t TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// testLogger sends the server's own log (not the app's) at warn and above
// to the test's log, and drops it once the test is over.
func testLogger(t TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct {
	mu   sync.Mutex
	t    TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Logf("server log: %s", strings.TrimSpace(string(p)))
	}
	return len(p), nil
}

func (w *testWriter) close() { w.mu.Lock(); w.done = true; w.mu.Unlock() }

var _ io.Writer = (*testWriter)(nil)

// Now is the virtual time.
func (env *Env) Now() time.Time { return env.Clock.Now() }

// Elapsed is the virtual time since the environment started.
func (env *Env) Elapsed() time.Duration { return env.Clock.Now().Sub(env.Start) }
