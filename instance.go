package handoff

import (
	"context"
	"log/slog"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/enginehook"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/sqlite"
)

// Options configure an instance. Zero values pick the defaults.
type Options struct {
	// Apps are the apps this program defines. Each is created if missing
	// and its Go code made live: the tables decide every write from open
	// on, and the handlers take the events left waiting by an earlier run.
	Apps []App
	// Clock is the one source of time of the engine: leases, schedules,
	// redeliveries and Write.Now read it. Tests pass a *clock.Virtual and
	// play minutes of handler time in no real time; default the wall
	// clock.
	Clock clock.Clock
	// Logger gets the server's own log: failures of the engine and of app
	// code, with the stack of a panic; default slog.Default().
	Logger *slog.Logger
	// OnDelivery, when set, is told how long each onChange event waited
	// from its commit to the start of its run, for metrics.
	OnDelivery func(wait time.Duration)
}

// Instance is handoff running in this process.
type Instance struct {
	e *engine.Engine
	// st is Open's store, which Close closes; nil when New was given one.
	st store.Store
}

func init() {
	enginehook.Engine = func(in any) *engine.Engine { return in.(*Instance).e }
}

// Open runs handoff on its embedded SQLite store in the folder dir, made
// if missing: every write is on disk when it returns. ctx bounds the
// opening only; the instance runs until Close, which closes the store.
func Open(ctx context.Context, dir string, o Options) (*Instance, error) {
	apps, err := goApps(o.Apps)
	if err != nil {
		return nil, err
	}
	st, err := sqlite.Open(dir)
	if err != nil {
		return nil, err
	}
	in, err := start(ctx, st, o, apps)
	if err != nil {
		st.Close()
		return nil, err
	}
	in.st = st
	return in, nil
}

// New runs handoff on st, such as a PostgreSQL store that several nodes
// share: each node's program defines the same apps. ctx bounds the
// opening only; the instance runs until Close, and st stays the caller's
// to close after it.
func New(ctx context.Context, st store.Store, o Options) (*Instance, error) {
	apps, err := goApps(o.Apps)
	if err != nil {
		return nil, err
	}
	return start(ctx, st, o, apps)
}

// goApps checks the apps, before anything is opened.
func goApps(apps []App) (map[string]*goApp, error) {
	out := map[string]*goApp{}
	for _, a := range apps {
		g, err := newGoApp(a)
		if err != nil {
			return nil, err
		}
		if out[a.Name] != nil {
			return nil, errs.New(errs.Invalid, "app %s is in Options.Apps twice; define each app once", a.Name)
		}
		out[a.Name] = g
	}
	return out, nil
}

// start sets the apps up on st and starts the engine.
func start(ctx context.Context, st store.Store, o Options, apps map[string]*goApp) (*Instance, error) {
	c := &code{apps: apps, log: o.Logger}
	if c.log == nil {
		c.log = slog.Default()
	}
	c.e = engine.New(st, engine.Options{Clock: o.Clock, Logger: c.log, Code: c, OnDelivery: o.OnDelivery})
	in := &Instance{e: c.e}
	if _, err := in.e.Bootstrap(ctx, ""); err != nil {
		return nil, err
	}
	for _, a := range c.apps {
		if err := in.install(ctx, a); err != nil {
			return nil, err
		}
	}
	if err := in.e.Start(ctx); err != nil {
		in.e.Close()
		return nil, err
	}
	return in, nil
}

// admin is who sets the apps up.
var admin = engine.Actor{User: engine.AdminUser, Admin: true, Path: "go"}

// install creates the app and its owner if missing, sets it public or
// not, and makes its stubs the live code unless they already are: nodes
// that open one after the other add no version each.
func (in *Instance) install(ctx context.Context, a *goApp) error {
	if a.owner != engine.AdminUser {
		if _, err := in.e.AddUser(ctx, admin, a.owner); err != nil && !errs.Is(err, errs.Exists) {
			return err
		}
	}
	_, err := in.e.CreateApp(ctx, admin, a.name, a.public)
	if errs.Is(err, errs.Exists) {
		err = in.e.SetPublic(ctx, admin, a.name, a.public)
	}
	if err != nil {
		return err
	}
	access, backend := accessStub(a.name), ""
	if a.onChange != nil || a.scheduled != nil {
		backend = backendStub(a.name)
	}
	live, liveBackend, _, err := in.e.ActiveCode(ctx, admin, a.name)
	if err != nil || live == access && liveBackend == backend {
		return err
	}
	_, err = in.e.Deploy(ctx, admin, a.name, access, backend)
	return err
}

// As reads and writes app's documents as the user named, through the
// tables; user "" is the anonymous. The program vouches for the user: it
// signs its users in itself, so the name needs no token and need not be
// known to the server. The tables see it as Write.User.
func (in *Instance) As(app, user string) *Docs {
	return &Docs{e: in.e, app: app, actor: engine.Actor{User: user, Admin: user == engine.AdminUser, Path: "go"}}
}

// Close stops the handlers, cancelling the runs in progress (their
// events are delivered again at the next open), and closes the store Open
// opened.
func (in *Instance) Close() error {
	in.e.Close()
	st := in.st
	in.st = nil
	if st != nil {
		return st.Close()
	}
	return nil
}
