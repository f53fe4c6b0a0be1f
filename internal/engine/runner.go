package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// runner runs every app's backend on this server: one deliverer of
// onChange events and one scheduler of ticks per app with a backend.
type runner struct {
	e      *Engine
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	apps map[int64]*appRunner
	// unknown are apps this node runs nothing for whose settings changed
	// on some node: discover looks whether they now have a backend.
	unknown  map[int64]bool
	discover chan struct{}
}

// Start begins delivering events and ticking schedules for every app with
// a backend, and for every app with events waiting, until Close. Writes
// committed before Start wait in the outbox and are delivered then.
func (e *Engine) Start(ctx context.Context) error {
	if e.runner != nil {
		return errors.New("engine already started")
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &runner{e: e, ctx: rctx, cancel: cancel, apps: map[int64]*appRunner{},
		unknown: map[int64]bool{}, discover: make(chan struct{}, 1)}
	e.runner = r
	e.live.Store(r)
	r.wg.Add(1)
	go r.discoverLoop()
	apps, err := e.st.Apps(ctx)
	if err != nil {
		return internal(err)
	}
	for _, a := range apps {
		st, err := e.app(ctx, a.Owner+"/"+a.Name)
		if err != nil {
			return err
		}
		if st.backend() != nil {
			r.ensure(st)
		}
	}
	return nil
}

// Close stops the runner: no new batch or tick starts, and running ones
// are cancelled. Undelivered events stay in the outbox.
func (e *Engine) Close() {
	if e.runner == nil {
		return
	}
	e.runner.cancel()
	e.runner.wg.Wait()
}

// ensure returns the app's runner, starting it on first use.
func (r *runner) ensure(app *appState) *appRunner {
	r.mu.Lock()
	defer r.mu.Unlock()
	ar := r.apps[app.ID]
	if ar == nil {
		ar = &appRunner{r: r, id: app.ID, ref: app.ref(), wake: make(chan struct{}, 1), reload: make(chan struct{}, 1)}
		r.apps[app.ID] = ar
		r.wg.Add(2)
		go func() { defer r.wg.Done(); ar.deliver() }()
		go func() { defer r.wg.Done(); ar.schedule() }()
	}
	return ar
}

// poke tells the app's deliverer that an event was committed.
func (r *runner) poke(app *appState) {
	if r == nil {
		return
	}
	signal(r.ensure(app).wake)
}

// reload tells the app's runner that its code changed.
func (r *runner) reload(app *appState) {
	if r == nil {
		return
	}
	ar := r.ensure(app)
	signal(ar.wake)
	signal(ar.reload)
}

// changed tells the runner that an app's settings changed, here or on
// another node: its runner re-reads the code and the schedule. It must
// not block (the store calls it).
func (r *runner) changed(appID int64) {
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
		signal(r.discover)
		return
	}
	signal(ar.wake)
	signal(ar.reload)
}

// discoverLoop starts the runners of apps that got a backend on another
// node: created or deployed there after this node started.
func (r *runner) discoverLoop() {
	defer r.wg.Done()
	for {
		select {
		case <-r.ctx.Done():
			return
		case <-r.discover:
		}
		r.mu.Lock()
		ids := r.unknown
		r.unknown = map[int64]bool{}
		r.mu.Unlock()
		if err := r.discoverApps(ids); err != nil && r.ctx.Err() == nil {
			r.e.log.Error("looking for apps deployed on other nodes", "err", err)
			r.mu.Lock()
			for id := range ids {
				r.unknown[id] = true
			}
			r.mu.Unlock()
			time.AfterFunc(time.Second, func() { signal(r.discover) })
		}
	}
}

func (r *runner) discoverApps(ids map[int64]bool) error {
	apps, err := r.e.st.Apps(r.ctx)
	if err != nil {
		return err
	}
	for _, a := range apps {
		if !ids[a.ID] {
			continue
		}
		st, err := r.e.app(r.ctx, a.Owner+"/"+a.Name)
		if err != nil {
			return err
		}
		if st.backend() != nil {
			r.ensure(st)
		}
	}
	return nil
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// appRunner is one app's deliverer and scheduler.
type appRunner struct {
	r      *runner
	id     int64
	ref    string
	wake   chan struct{} // an event was committed, a slot freed up, or the code changed
	reload chan struct{} // the code changed: the scheduler re-reads its interval

	// code is the version whose onChange runs are going; stop ends them
	// when another version goes live. Only the deliverer sets them, under
	// mu; a write taking a slot reads them (direct.go).
	code    *appCode
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
	// starved: a claim found every slot taken, so the next run to end
	// must wake the deliverer.
	starved bool
	// held are the claimed events not yet settled, whose leases renewal
	// renews (leases.go).
	held    map[int64]bool
	renewal clock.Timer
	tick    tickStatus
}

// tickStatus is what the console shows of the scheduled handler.
type tickStatus struct {
	running bool
	last    *store.Tick
}

// sameCode reports whether two loads of an app's code are one version.
func sameCode(a, b *appCode) bool {
	return a == b || a != nil && b != nil && a.version == b.version
}

// current returns the app's state with its live code.
func (ar *appRunner) current() (*appState, appcode.Backend, error) {
	app, err := ar.r.e.app(ar.r.ctx, ar.ref)
	if err != nil {
		return nil, nil, err
	}
	return app, app.backend(), nil
}
