// Package runner runs every app's handlers on this node: one deliverer of
// onChange events from the store's outbox and one scheduler of ticks per
// app with a backend (docs/architecture.md, "backend.js and delivery").
// It depends on the store's outbox and ticks, the clock, the apps'
// compiled code and a logger; what a handler's writes may do is its
// Host's (the engine's) business.
package runner

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// App is an app as the runner sees it: its live code, and the host's own
// state of it, handed back in the Host's calls.
type App struct {
	ID      int64
	Ref     string // owner/name
	Owner   string
	Version int             // the live code version; 0 when none
	Backend appcode.Backend // nil when the live version has no backend.js
	State   any
}

// Acting is who a handler acts as, for the Host to turn into the actor of
// its writes.
type Acting struct {
	Handler appcode.Handler
	// Writer is the writer of the revision an onChange reacts to, or the
	// app's owner for a scheduled tick.
	Writer store.Writer
	// Depth counts the onChange writes that led here (the loop guard);
	// Origin is the seq of the write that began the chain (the fan-out
	// budget), 0 when none.
	Depth  int
	Origin int64
}

// Host is what the runner asks of the engine that owns the apps.
type Host interface {
	// App returns the app's live state.
	App(ctx context.Context, ref string) (App, error)
	// HandlerContext returns what a handler of app runs with: its
	// ctx.db, acting as as.
	HandlerContext(app App, as Acting) appcode.HandlerContext
	// Log records a line of the app's log.
	Log(app App, source, level, message string, fields json.RawMessage)
}

// Options configure a Runner.
type Options struct {
	Store  store.Store
	Clock  clock.Clock
	Logger *slog.Logger
	Host   Host
	// Node names this node in the hold of a scheduled tick.
	Node string
	// PollEvery is how often each app's deliverer looks for due events
	// when nothing woke it (default 2 s).
	PollEvery time.Duration
	// OnDelivery, when set, is told how long each event waited from its
	// commit to the start of its run.
	OnDelivery func(wait time.Duration)
}

// Runner runs every app's backend on this node, from Start to Close.
type Runner struct {
	st      store.Store
	caps    store.Capabilities
	clock   clock.Clock
	log     *slog.Logger
	host    Host
	node    string
	poll    time.Duration
	observe func(time.Duration)
	// busy counts the runner's work on a clock that keeps count
	// (clock.Counter; nil on the real clock): every signal from its send
	// until the look it wakes is over, every run, every stop until what
	// it stopped has ended (work.go).
	busy func(n int)

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// closed is set when Close begins. After it nothing new joins wg: a
	// write may still commit then (a handler's ctx.db call in flight, a
	// request), and a goroutine it started would outlive Close.
	closed bool
	apps   map[int64]*appRunner
	// unknown are apps this node runs nothing for whose settings changed
	// on some node: discover looks whether they now have a backend.
	unknown  map[int64]bool
	discover chan struct{}
}

// Start begins running the apps' handlers; apps lists those to run from
// the start (those with a backend). Events committed before Start wait
// in the outbox and are delivered then.
func Start(ctx context.Context, o Options, apps []App) *Runner {
	if o.PollEvery <= 0 {
		o.PollEvery = pollEvery
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &Runner{st: o.Store, caps: o.Store.Capabilities(), clock: o.Clock, log: o.Logger, host: o.Host, node: o.Node,
		poll: o.PollEvery, observe: o.OnDelivery, busy: clock.Counter(o.Clock),
		ctx: rctx, cancel: cancel, apps: map[int64]*appRunner{}, unknown: map[int64]bool{}, discover: make(chan struct{}, 1)}
	r.wg.Add(1)
	go r.discoverLoop()
	for _, a := range apps {
		r.ensure(a)
	}
	return r
}

// Close stops the runner: no new batch or tick starts, and running ones
// are cancelled. Undelivered events stay in the outbox.
func (r *Runner) Close() {
	if r == nil {
		return
	}
	r.mu.Lock()
	r.closed = true
	r.mu.Unlock()
	r.cancel()
	r.wg.Wait()
}

// track adds n to what Close waits for, unless Close has begun.
func (r *Runner) track(n int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.wg.Add(n)
	return true
}

// TickRunning reports whether the app's scheduled handler is running on
// this node.
func (r *Runner) TickRunning(appID int64) bool {
	if r == nil {
		return false
	}
	r.mu.Lock()
	ar := r.apps[appID]
	r.mu.Unlock()
	if ar == nil {
		return false
	}
	ar.mu.Lock()
	defer ar.mu.Unlock()
	return ar.tick.running
}

// ensure returns the app's runner, starting it on first use.
func (r *Runner) ensure(app App) *appRunner {
	r.mu.Lock()
	defer r.mu.Unlock()
	ar := r.apps[app.ID]
	if ar == nil {
		// After Close the app gets a runner with no loops: what it is
		// sent stays queued, and nothing runs.
		ar = &appRunner{r: r, id: app.ID, ref: app.Ref, wake: make(chan struct{}, 1), reload: make(chan struct{}, 1),
			fire: make(chan time.Time)}
		r.apps[app.ID] = ar
		if r.closed {
			return ar
		}
		r.working(2) // the first look of each loop (work.go)
		r.wg.Add(2)
		go func() { defer r.wg.Done(); ar.deliver() }()
		go func() { defer r.wg.Done(); ar.schedule() }()
	}
	return ar
}

// Poke tells the app's deliverer that an event was committed unclaimed,
// or made due again.
func (r *Runner) Poke(app App) {
	if r == nil {
		return
	}
	ar := r.ensure(app)
	ar.mu.Lock()
	// Again after the commit: a claim between the write's reservation
	// and its commit came back short without it.
	ar.markBacklog()
	ar.mu.Unlock()
	r.signal(ar.wake)
}

// Reload tells the app's runner that its code changed.
func (r *Runner) Reload(app App) {
	if r == nil {
		return
	}
	ar := r.ensure(app)
	r.signal(ar.wake)
	r.signal(ar.reload)
}

// Changed tells the runner that an app's settings changed, here or on
// another node: its runner re-reads the code and the schedule. It must
// not block (the store calls it).
func (r *Runner) Changed(appID int64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	ar := r.apps[appID]
	if ar == nil {
		r.unknown[appID] = true
	}
	r.mu.Unlock()
	if ar == nil {
		r.signal(r.discover)
		return
	}
	r.signal(ar.wake)
	r.signal(ar.reload)
}

// discoverLoop starts the runners of apps that got a backend on another
// node: created or deployed there after this node started.
func (r *Runner) discoverLoop() {
	defer r.wg.Done()
	var woken int
	for {
		r.done(woken)
		woken = 0
		select {
		case <-r.ctx.Done():
			return
		case <-r.discover:
			woken++
		}
		r.mu.Lock()
		ids := r.unknown
		r.unknown = map[int64]bool{}
		r.mu.Unlock()
		if err := r.discoverApps(ids); err != nil && r.ctx.Err() == nil {
			r.log.Error("looking for apps deployed on other nodes", "err", err)
			r.mu.Lock()
			for id := range ids {
				r.unknown[id] = true
			}
			r.mu.Unlock()
			time.AfterFunc(time.Second, func() { r.signal(r.discover) })
		}
	}
}

func (r *Runner) discoverApps(ids map[int64]bool) error {
	apps, err := r.st.Apps(r.ctx)
	if err != nil {
		return err
	}
	for _, a := range apps {
		if !ids[a.ID] {
			continue
		}
		st, err := r.host.App(r.ctx, a.Owner+"/"+a.Name)
		if err != nil {
			return err
		}
		if st.Backend != nil {
			r.ensure(st)
		}
	}
	return nil
}

// appRunner is one app's deliverer and scheduler.
type appRunner struct {
	r      *Runner
	id     int64
	ref    string
	wake   chan struct{}  // an event was committed, a slot freed up, or the code changed
	reload chan struct{}  // the code changed: the scheduler re-reads its interval
	fire   chan time.Time // a tick's time came (schedule.go)

	// code is the version whose onChange runs are going; stop ends them
	// when another version goes live. Only the deliverer sets them, under
	// mu; a write taking a slot reads them (direct.go).
	version int
	runs    context.Context
	stopOld context.CancelFunc

	mu       sync.Mutex
	inflight int // runs in flight, each in a slot
	// reserved are slots taken by writes whose commits may claim their
	// events for this node (direct.go).
	reserved int
	// committed notes when the commits of events handed over directly
	// returned, for Options.OnDelivery.
	committed map[int64]time.Time
	// starved: a claim found no room, so the next run to end must wake
	// the deliverer.
	starved bool
	// waiting are claimed events that wait for a slot, oldest first
	// (waiting.go); a run that ends takes the first.
	waiting []waitingRun
	// backlog: an event may be due in the outbox, unclaimed, since
	// backlogGen last changed (waiting.go).
	backlog    bool
	backlogGen uint64
	// behind are the documents whose events this node's commits left in
	// the outbox behind an earlier event of theirs that this node holds:
	// they fall due when that one settles (waiting.go).
	behind map[docKey]bool
	// held are the claimed events not yet settled, whose leases renewal
	// renews (leases.go).
	held     map[int64]docKey
	heldDocs map[docKey]int // how many of held are of each document
	renewal  clock.Timer
	tick     tickStatus
	// running counts the runs in flight of each code version, and
	// stopped ends the work of stopping a version once its last run has
	// ended (work.go).
	running map[int]int
	stopped map[int]func()
}

// tickStatus is what the console shows of the scheduled handler.
type tickStatus struct {
	running bool
	last    *store.Tick
}

// current returns the app's state with its live code.
func (ar *appRunner) current() (App, appcode.Backend, error) {
	app, err := ar.r.host.App(ar.r.ctx, ar.ref)
	if err != nil {
		return App{}, nil, err
	}
	return app, app.Backend, nil
}
