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
// Settle watches process-wide signals (the goroutine count among them),
// so tests that use an Env should not call t.Parallel: another test's
// work would only delay this one's rest, but a busy neighbour could keep
// it from ever coming.
package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/handoff-run/handoff/access"
	"github.com/handoff-run/handoff/appdir"
	"github.com/handoff-run/handoff/backend"
	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/engine"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
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
	// SettlePoll is the real time between two looks for rest; five
	// unchanged looks in a row are rest. Default DefaultSettlePoll, which
	// suits -race on a loaded machine; a run without -race can look more
	// often and play long scenarios faster.
	SettlePoll time.Duration
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

	rec      *recorder
	cap      time.Duration
	syscalls uint64 // goroutines in a system call for good (inSyscalls)
	poll     time.Duration
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
	if o.SettlePoll == 0 {
		o.SettlePoll = DefaultSettlePoll
	}
	if o.SettleCap == 0 {
		o.SettleCap = 10 * time.Second
	}
	owner, _, ok := strings.Cut(o.App, "/")
	if !ok {
		t.Fatalf("sim: App %q is not owner/name", o.App)
	}
	code, err := appdir.Read(o.Dir)
	if err != nil {
		t.Fatalf("sim: reading the app folder: %v", err)
	}

	syscalls := inSyscalls()
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
	rec := &recorder{clk: clk, onChange: o.OnChange, inner: backend.New(backend.Options{
		Now: clk.Now,
		AfterFunc: func(d time.Duration, f func()) func() bool {
			return clk.AfterFunc(d, f).Stop
		},
		Logger:    testLogger(t),
		Transport: o.Transport,
	})}
	e := engine.New(st, engine.Options{
		Clock:    clk,
		Runtime:  accessRuntime{Runtime: access.New(access.Options{Now: clk.Now}), st: st, seen: o.OnAccess},
		Backends: rec,
		Logger:   testLogger(t),
	})
	env := &Env{T: t, Ctx: ctx, Engine: e, Clock: clk, Store: st, App: o.App, Start: o.Start,
		Admin: engine.Actor{User: engine.AdminUser, Admin: true, Path: "cli"},
		Owner: engine.Actor{User: owner, Path: "cli"}, rec: rec, cap: o.SettleCap, syscalls: syscalls, poll: o.SettlePoll}
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

// Quiescence.
//
// Handlers run on goroutines of their own: when the clock moves, a timer
// wakes the scheduler or a sleeping handler, which then reads, writes and
// arms its next timers in real time. Before moving the clock again the
// harness must know that all of that is over, or the next timer would
// fire while a handler still has to arm an earlier one, and the handler
// would see a later Date.now() than its own. Nothing in the engine says
// "everything is idle", so Settle observes it. Over a short real-time
// window these must all stand still: the engine's activity counter
// (commits, claims, runs, ticks); every store call and access.js call,
// none of them in progress (a commit waiting for its fsync, a decision
// being computed); the clock's armed timers; and the number of goroutines
// (a timer's callback not run yet, a runtime being replaced). And every
// check must catch an instant when all other goroutines are blocked (see
// alone): a woken goroutine still waiting for a CPU, or one computing
// while the OS has its thread off the CPU, moves no counter, and on a
// loaded machine either can last longer than any window.
//
// This polling is the only real-time waiting in the harness, and it is
// never a stand-in for protocol time: protocol time moves only through
// the virtual clock, and the window only has to outlast one goroutine
// hand-off, which is why it is milliseconds long and starts over whenever
// anything moves.

const (
	// DefaultSettlePoll is Options.SettlePoll's default.
	DefaultSettlePoll = 2 * time.Millisecond
	settleStable      = 5 // consecutive unchanged checks: a window of ~10 ms
)

type fingerprint struct {
	goroutines int
	activity   uint64
	calls      uint64
	inflight   int64
	pending    int
	next       time.Time
}

func (env *Env) fingerprint() fingerprint {
	next, _ := env.Clock.NextAt()
	return fingerprint{
		goroutines: runtime.NumGoroutine(),
		activity:   env.Engine.Activity(),
		calls:      env.Store.calls.Load(),
		inflight:   env.Store.inflight.Load(),
		pending:    env.Clock.Pending(),
		next:       next,
	}
}

var (
	schedMu      sync.Mutex
	schedSamples = []metrics.Sample{
		{Name: "/sched/goroutines/running:goroutines"},
		{Name: "/sched/goroutines/runnable:goroutines"},
		{Name: "/sched/goroutines/not-in-go:goroutines"},
	}
)

// alone reports whether, at some instant within about a millisecond, the
// calling goroutine was the only one executing, none was waiting for a
// CPU and no more than base were in a system call: every other goroutine
// was blocked. A goroutine that a timer or a commit has just woken is
// runnable, and one computing counts as running even while the OS has its
// thread off the CPU, so this sees work that moves no counter yet. Idle
// processors spinning for work also count as running for a moment, hence
// the retries. It reports true when the runtime does not publish these
// metrics.
func alone(base uint64) bool {
	schedMu.Lock()
	defer schedMu.Unlock()
	for range 20 {
		metrics.Read(schedSamples)
		for _, s := range schedSamples {
			if s.Value.Kind() != metrics.KindUint64 {
				return true
			}
		}
		if schedSamples[0].Value.Uint64() <= 1 && schedSamples[1].Value.Uint64() == 0 && schedSamples[2].Value.Uint64() <= base {
			return true
		}
		// Not runtime.Gosched: a yield wakes an idle processor to look
		// for work, and that processor counts as running.
		time.Sleep(50 * time.Microsecond)
	}
	return false
}

// inSyscalls is how many goroutines sit in a system call for good before
// the environment starts: os/signal's receiver, in a process that asked
// for signals (a command that stops on Ctrl-C), waits in one forever. The
// least of a few samples leaves out a passing call.
func inSyscalls() uint64 {
	schedMu.Lock()
	defer schedMu.Unlock()
	least := uint64(math.MaxUint64)
	for range 10 {
		metrics.Read(schedSamples)
		if v := schedSamples[2].Value; v.Kind() == metrics.KindUint64 {
			least = min(least, v.Uint64())
		} else {
			return 0
		}
		time.Sleep(50 * time.Microsecond)
	}
	return least
}

// Settle waits until the system is at rest at the current virtual time:
// nothing in progress and nothing moving for settleStable consecutive
// checks. Ops that the store queued without waiting (event settlements,
// log lines) are then flushed, and rest is confirmed again.
// It fails the test if rest does not come within Options.SettleCap of
// real time.
func (env *Env) Settle() {
	env.T.Helper()
	deadline := time.Now().Add(env.cap)
	for {
		env.waitStable(deadline)
		if !env.Store.needsFlush() {
			return
		}
		if err := env.Store.Flush(env.Ctx, env.Clock.Now()); err != nil {
			env.T.Fatal(err)
		}
	}
}

func (env *Env) waitStable(deadline time.Time) {
	env.T.Helper()
	last := env.fingerprint()
	stable := 0
	for stable < settleStable {
		pause(env.poll)
		fp := env.fingerprint()
		if fp == last && fp.inflight == 0 && alone(env.syscalls) {
			stable++
			continue
		}
		last, stable = fp, 0
		if time.Now().After(deadline) {
			env.T.Fatalf("sim: the system did not come to rest within %v of real time at virtual %v (+%v): %+v",
				env.cap, env.Now().Format(time.RFC3339Nano), env.Elapsed(), fp)
		}
	}
}

// pause waits d. A sleep shorter than the timer's granularity (about a
// millisecond) would last that long, so a shorter pause spins on the
// clock instead; it does not yield, since a yield wakes an idle processor
// that then counts as running (see alone).
func pause(d time.Duration) {
	if d >= time.Millisecond {
		time.Sleep(d)
		return
	}
	for start := time.Now(); time.Since(start) < d; {
	}
}

// RunFor plays d of virtual time: it settles, then moves the clock to the
// earlier of the next armed timer and the end, and repeats until the end
// is reached and settled. Every timer fires at its own virtual instant.
func (env *Env) RunFor(d time.Duration) {
	env.T.Helper()
	end := env.Now().Add(d)
	for {
		env.Settle()
		env.checkCtx()
		now := env.Now()
		if !now.Before(end) {
			return
		}
		env.step(end)
	}
}

// RunUntil plays virtual time like RunFor until cond holds at rest, and
// returns the virtual time it took. It fails the test if cond does not
// hold within max of virtual time. cond runs on the test's goroutine
// while the system is at rest.
func (env *Env) RunUntil(cond func() bool, max time.Duration) time.Duration {
	env.T.Helper()
	start := env.Now()
	end := start.Add(max)
	for {
		env.Settle()
		if cond() {
			return env.Now().Sub(start)
		}
		env.checkCtx()
		if !env.Now().Before(end) {
			env.T.Fatalf("sim: condition not met after %v of virtual time (now %s)", max, env.Now().Format(time.RFC3339Nano))
		}
		env.step(end)
	}
}

// checkCtx fails the test once Options.Ctx has ended: a test stopped
// for running too long must not keep playing virtual time.
func (env *Env) checkCtx() {
	env.T.Helper()
	if err := env.Ctx.Err(); err != nil {
		env.T.Fatalf("sim: stopped at virtual %s (+%v): %v", env.Now().Format(time.RFC3339Nano), env.Elapsed(), context.Cause(env.Ctx))
	}
}

// step moves the clock to the next armed timer, or to end if that comes
// first.
func (env *Env) step(end time.Time) {
	target := end
	if next, ok := env.Clock.NextAt(); ok && next.Before(end) {
		target = next
	}
	env.Clock.AdvanceTo(target)
}

// Documents.

// Doc is a document as a map, with _id and _rev.
type Doc = map[string]any

func (env *Env) marshal(v any) []byte {
	env.T.Helper()
	if b, ok := v.([]byte); ok {
		return b
	}
	if b, ok := v.(json.RawMessage); ok {
		return b
	}
	b, err := json.Marshal(v)
	if err != nil {
		env.T.Fatalf("sim: encoding %v: %v", v, err)
	}
	return b
}

// Put writes doc (a map, struct or JSON) as the owner through the CLI
// path and fails the test if the write is refused.
func (env *Env) Put(db, id string, doc any) appcode.WriteResult {
	env.T.Helper()
	r, err := env.PutAs(env.Owner, db, id, doc, appcode.PutOptions{})
	if err != nil {
		env.T.Fatalf("sim: put %s/%s: %v", db, id, err)
	}
	return r
}

// PutAs writes doc as a and returns the engine's answer.
func (env *Env) PutAs(a engine.Actor, db, id string, doc any, o appcode.PutOptions) (appcode.WriteResult, error) {
	return env.Engine.Put(env.Ctx, a, env.App, db, id, env.marshal(doc), o)
}

// Get reads a live document as the owner; nil when absent or deleted.
func (env *Env) Get(db, id string) Doc {
	env.T.Helper()
	raw, err := env.Engine.Get(env.Ctx, env.Owner, env.App, db, id)
	if err != nil {
		if errs.Is(err, errs.NotFound) {
			return nil
		}
		env.T.Fatalf("sim: get %s/%s: %v", db, id, err)
	}
	return Decode(env.T, raw)
}

// Decode parses a JSON object.
func Decode(t TB, raw json.RawMessage) Doc {
	t.Helper()
	var d Doc
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("sim: decoding %s: %v", raw, err)
	}
	return d
}

// Revision is one ledger entry with its document decoded.
type Revision struct {
	engine.Entry
	Body Doc
}

// History lists a document's revisions, oldest first.
func (env *Env) History(db, id string) []Revision {
	env.T.Helper()
	es, err := env.Engine.History(env.Ctx, env.Owner, env.App, db, id)
	if err != nil {
		env.T.Fatalf("sim: history of %s/%s: %v", db, id, err)
	}
	out := make([]Revision, len(es))
	for i, e := range es {
		out[i] = Revision{Entry: e, Body: Decode(env.T, e.Doc)}
	}
	return out
}

// Ledger lists every revision of the app (db "" for all databases) in
// commit order.
func (env *Env) Ledger(db string) []Revision {
	env.T.Helper()
	var out []Revision
	var since int64
	for {
		c, err := env.Engine.Changes(env.Ctx, env.Owner, env.App, db, since, engine.MaxLimit)
		if err != nil {
			env.T.Fatalf("sim: changes of %s: %v", env.App, err)
		}
		for _, e := range c.Changes {
			out = append(out, Revision{Entry: e, Body: Decode(env.T, e.Doc)})
		}
		if len(c.Changes) == 0 || c.Last == since {
			return out
		}
		since = c.Last
	}
}

// Logs lists every line of the app's log. Lines are stored without
// waiting, so it flushes the store first.
func (env *Env) Logs() []engine.LogLine {
	env.T.Helper()
	if err := env.Store.Flush(env.Ctx, env.Now()); err != nil {
		env.T.Fatal(err)
	}
	var out []engine.LogLine
	var after int64
	for {
		ls, err := env.Engine.Logs(env.Ctx, env.Admin, env.App, after, engine.MaxLimit)
		if err != nil {
			env.T.Fatalf("sim: logs of %s: %v", env.App, err)
		}
		out = append(out, ls...)
		if len(ls) < engine.MaxLimit {
			return out
		}
		after = ls[len(ls)-1].ID
	}
}

// LogsContaining lists the log lines whose message contains s.
func (env *Env) LogsContaining(s string) []engine.LogLine {
	env.T.Helper()
	var out []engine.LogLine
	for _, l := range env.Logs() {
		if strings.Contains(l.Message, s) {
			out = append(out, l)
		}
	}
	return out
}

// Events lists the app's waiting events, or its dead ones. Settlements
// are stored without waiting, so it flushes the store first.
func (env *Env) Events(dead bool) []engine.EventInfo {
	env.T.Helper()
	if err := env.Store.Flush(env.Ctx, env.Now()); err != nil {
		env.T.Fatal(err)
	}
	var out []engine.EventInfo
	var after int64
	for {
		evs, err := env.Engine.Events(env.Ctx, env.Admin, env.App, dead, after, engine.MaxLimit)
		if err != nil {
			env.T.Fatalf("sim: events of %s: %v", env.App, err)
		}
		out = append(out, evs...)
		if len(evs) < engine.MaxLimit {
			return out
		}
		after = evs[len(evs)-1].Seq
	}
}

// Schedule reports the app's scheduled handler.
func (env *Env) Schedule() engine.ScheduleInfo {
	env.T.Helper()
	info, err := env.Engine.Schedule(env.Ctx, env.Admin, env.App)
	if err != nil {
		env.T.Fatalf("sim: schedule of %s: %v", env.App, err)
	}
	return info
}

// Runs lists every handler call the engine made, in the order they
// started.
func (env *Env) Runs() []Run { return env.rec.all() }

// OnChangeRuns lists the onChange runs of one document.
func (env *Env) OnChangeRuns(db, id string) []Run {
	return slices.DeleteFunc(env.rec.all(), func(r Run) bool {
		return r.Handler != appcode.OnChange || r.DB != db || r.DocID != id
	})
}

// Ticks lists the scheduled runs.
func (env *Env) Ticks() []Run {
	return slices.DeleteFunc(env.rec.all(), func(r Run) bool { return r.Handler != appcode.Scheduled })
}

// String describes a run for failure messages.
func (r Run) String() string {
	if r.Handler == appcode.Scheduled {
		return fmt.Sprintf("scheduled(planned %s) %s..%s err=%v", r.Planned.Format(time.TimeOnly), r.Start.Format(time.TimeOnly+".000"), r.End.Format(time.TimeOnly+".000"), r.Err)
	}
	return fmt.Sprintf("onChange(%s/%s seq %d attempt %d) %s..%s err=%v", r.DB, r.DocID, r.Seq, r.Attempt,
		r.Start.Format(time.TimeOnly+".000"), r.End.Format(time.TimeOnly+".000"), r.Err)
}
