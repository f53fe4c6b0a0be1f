package engine

import (
	"context"
	"errors"
	"sync"

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
}

// Start begins delivering events and ticking schedules for every app with
// a backend, and for every app with events waiting, until Close. Writes
// committed before Start wait in the outbox and are delivered then.
func (e *Engine) Start(ctx context.Context) error {
	if e.runner != nil {
		return errors.New("engine already started")
	}
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &runner{e: e, ctx: rctx, cancel: cancel, apps: map[int64]*appRunner{}}
	e.runner = r
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
	wake   chan struct{} // an event was committed, a batch ended, or the code changed
	reload chan struct{} // the code changed: the scheduler re-reads its interval

	mu       sync.Mutex
	inflight int
	tick     tickStatus
}

// tickStatus is what the console shows of the scheduled handler.
type tickStatus struct {
	running bool
	last    *store.Tick
}

// current returns the app's state with its live code.
func (ar *appRunner) current() (*appState, Backend, error) {
	app, err := ar.r.e.app(ar.r.ctx, ar.ref)
	if err != nil {
		return nil, nil, err
	}
	return app, app.backend(), nil
}
