package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/runner"
)

// The apps' handlers run in package runner: onChange from the outbox and
// scheduled on its interval. The engine is its Host: it names an app's
// live code, gives each handler its ctx.db, and keeps the app's log.

// Start begins delivering events and ticking schedules for every app with
// a backend, until Close. Writes committed before Start wait in the
// outbox and are delivered then.
func (e *Engine) Start(ctx context.Context) error {
	if e.runner != nil {
		return errors.New("engine already started")
	}
	apps, err := e.st.Apps(ctx)
	if err != nil {
		return internal(err)
	}
	var live []runner.App
	for _, a := range apps {
		st, err := e.app(ctx, a.Owner+"/"+a.Name)
		if err != nil {
			return err
		}
		if st.backend() != nil {
			live = append(live, st.forRunner())
		}
	}
	e.runner = runner.Start(ctx, runner.Options{Store: e.st, Clock: e.clock, Logger: e.log, Host: runnerHost{e},
		Node: e.node, PollEvery: e.poll, OnDelivery: e.observe}, live)
	e.live.Store(e.runner)
	return nil
}

// Close stops the runner: no new batch or tick starts, and running ones
// are cancelled. Undelivered events stay in the outbox.
func (e *Engine) Close() { e.runner.Close() }

// forRunner is the app as the runner sees it.
func (app *appState) forRunner() runner.App {
	ra := runner.App{ID: app.ID, Ref: app.ref(), Owner: app.Owner, Backend: app.backend(), State: app}
	if app.code != nil {
		ra.Version = app.code.version
	}
	return ra
}

// runnerHost is the engine as the runner's Host.
type runnerHost struct{ e *Engine }

func (h runnerHost) App(ctx context.Context, ref string) (runner.App, error) {
	st, err := h.e.app(ctx, ref)
	if err != nil {
		return runner.App{}, err
	}
	return st.forRunner(), nil
}

// HandlerContext: an onChange acts as the writer of the revision it
// reacts to. The admin's writes are the admin's: the flag is not stored
// with the revision, but the admin user is the only one that has it. A
// scheduled tick acts as the app's owner.
func (h runnerHost) HandlerContext(app runner.App, as runner.Acting) appcode.HandlerContext {
	w := as.Writer
	admin := as.Handler == appcode.OnChange && w.User == AdminUser && w.Device == ""
	return &handlerCtx{e: h.e, app: app.State.(*appState),
		actor: Actor{User: w.User, Device: w.Device, Admin: admin, Handler: as.Handler, Depth: as.Depth, Origin: as.Origin}}
}

func (h runnerHost) Log(app runner.App, source, level, message string, fields json.RawMessage) {
	h.e.appLog(app.State.(*appState), source, level, message, fields)
}
