// Package backend runs backend.js, the app's server-side handlers, on the
// JavaScript VM (docs/architecture.md, "backend.js and delivery"), for
// package jsapp's appcode.Compiler: the
// engine decides when an event is delivered or a tick is due and what a
// handler's writes may do (appcode.HandlerContext); this package only turns
// that into a call of the user's onChange, scheduled or fetch, with the
// ctx, console, timers and web globals that code expects, and reports how
// the call ended.
//
// The files follow the life of a call:
//
//   - backend.go: compiling a module into a Backend with its pools.
//   - config.go: reading and checking the `config` export.
//   - handlers.go: OnChange and Scheduled, and what their errors say.
//   - runtime.go: the Go-side state of each runtime and of its current call.
//   - ctx.go, dberror.go: the handler's ctx (db, log, app, secrets) and the
//     Errors its db methods reject with.
//   - timers.go, console.go: the globals setTimeout/clearTimeout and console.
//   - fetch_handler.go: Fetch, the app's HTTP lane (fetch(request, ctx)).
//   - web.go, web.js: Headers, Request, Response, TextEncoder/Decoder and
//     crypto (HMAC, digests); fetch_out.go and fetch_config.go: the global
//     fetch and config.fetch, its allow list and limits.
package backend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/jsvm"
	"github.com/handoff-run/handoff/internal/suggest"
)

// Options configure a Compiler. The zero value runs on real time.
type Options struct {
	// Now is the server clock: Date.now() and new Date() read it.
	// Default time.Now.
	Now func() time.Time

	// AfterFunc makes the server clock's timers. It arms the run limit of
	// every call and every setTimeout, so a virtual clock can play a
	// 15-minute limit or a 30 s wait in no real time. It must call f once
	// after d unless stop is called first; stop reports whether it
	// prevented f. Nil means real time.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)

	// Busy, when set, hears of the handlers' work in progress for a
	// virtual clock (jsvm.Options.Busy): a handler awaiting only its
	// timers is no work, so a test can tell when to move the clock.
	Busy func(n int)

	// Setup installs extra globals in each new runtime, after handoff's
	// own and before the module runs. Tests use it for stand-ins of user
	// work (a global resize, say).
	Setup func(vm *jsvm.VM) error

	// Logger receives what has no handler call to go to: console output
	// while the module loads, and deploy-time warnings. Default
	// slog.Default().
	Logger *slog.Logger

	// Transport, when set, carries every handler's outbound fetch instead
	// of the network, after config.fetch.allow has passed the URL: app
	// tests answer with a stub so nothing leaves the machine.
	Transport http.RoundTripper

	// Gate shares the cores among the apps' handlers: a handler may
	// compute for as long as its run limit, so without it one app's busy
	// handlers could hold every core. Default jsvm.DefaultGate().
	Gate *jsvm.Gate
}

// Compiler compiles backend.js into Backends.
type Compiler struct{ o Options }

// New returns a Compiler.
func New(o Options) *Compiler {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Gate == nil {
		o.Gate = jsvm.DefaultGate()
	}
	return &Compiler{o: o}
}

// handlerNames are the exports handoff calls.
var handlerNames = []string{string(appcode.OnChange), string(appcode.Scheduled), string(appcode.Fetch)}

// Backend is one compiled backend.js. It owns two pools of runtimes: one
// of config.onChange.concurrency runtimes for onChange, and one runtime
// for scheduled, which also read the config at deploy. Keeping scheduled
// apart means a tick never waits behind a burst of events, and the
// runtime that was loaded to read the config is kept rather than thrown
// away, so a deploy loads the module exactly concurrency+1 times.
type Backend struct {
	c        *Compiler
	file     string
	cfg      appcode.BackendConfig
	handlers []string   // exported handler functions, of handlerNames
	tick     *jsvm.Pool // 1 runtime: config, scheduled
	change   *jsvm.Pool // Concurrency runtimes: onChange; nil without onChange
	serve    *jsvm.Pool // fetchConcurrency runtimes: fetch; nil without fetch
}

var _ appcode.Backend = (*Backend)(nil)

// configDeadline bounds reading the config and the handler exports at
// deploy: plain property reads, unless a getter misbehaves.
const configDeadline = time.Second

// CompileBackend compiles source, loads it, and checks its config and
// exports. Everything the user can get wrong is an *errs.Error with code
// invalid that names the file and the line and column or the field.
func (c *Compiler) CompileBackend(filename, source string) (appcode.Backend, error) {
	prog, err := jsvm.Compile(filename, source)
	if err != nil {
		return nil, codeError(err)
	}
	b := &Backend{c: c, file: filename}
	b.tick, err = jsvm.NewPool(prog, b.poolOptions(1, configDeadline))
	if err != nil {
		return nil, codeError(err)
	}
	if err := b.inspect(); err != nil {
		b.tick.Close()
		return nil, err
	}
	if b.Has(appcode.OnChange) {
		b.change, err = jsvm.NewPool(prog, b.poolOptions(b.cfg.OnChange.Concurrency, b.cfg.OnChange.Timeout))
		if err != nil {
			b.tick.Close()
			return nil, codeError(err)
		}
	}
	if b.Has(appcode.Fetch) {
		b.serve, err = jsvm.NewPool(prog, b.poolOptions(fetchConcurrency, appcode.FetchRunTimeout))
		if err != nil {
			b.Close()
			return nil, codeError(err)
		}
	}
	return b, nil
}

func (b *Backend) poolOptions(size int, deadline time.Duration) jsvm.Options {
	return jsvm.Options{
		Size:      size,
		Deadline:  deadline,
		Now:       b.c.o.Now,
		AfterFunc: b.c.o.AfterFunc,
		Busy:      b.c.o.Busy,
		Setup:     b.setup,
		Gate:      b.c.o.Gate,
	}
}

// inspect reads the config and checks the handler exports on the tick
// pool's runtime.
func (b *Backend) inspect() error {
	ctx := context.Background()
	cfg, scheduled, err := b.readConfig(ctx)
	if err != nil {
		return err
	}
	b.cfg = cfg
	for _, name := range b.tick.Exports() {
		if err := b.checkExport(ctx, name); err != nil {
			return err
		}
	}
	if b.Has(appcode.Scheduled) && cfg.Scheduled.Interval == 0 {
		return errs.New(errs.Invalid, `%s exports scheduled but has no config.scheduled.interval: scheduled needs config.scheduled.interval, e.g. "30s" (export const config = {scheduled: {interval: "30s"}})`, b.file)
	}
	if !b.Has(appcode.Scheduled) && scheduled {
		return errs.New(errs.Invalid, "%s sets config.scheduled but exports no scheduled function, so nothing would tick; export one (export async function scheduled(event, ctx) { ... }) or remove config.scheduled", b.file)
	}
	return nil
}

// checkExport records handler exports and refuses every other export but
// config: a near miss of a handler's name (onchange, schedule) would
// otherwise deploy fine and never run. Helpers the handlers use need no
// export, so refusing the rest costs nothing.
func (b *Backend) checkExport(ctx context.Context, name string) error {
	if name == "config" {
		return nil
	}
	if !slices.Contains(handlerNames, name) {
		if near := suggest.Closest(name, handlerNames); near != "" {
			return errs.New(errs.Invalid, "%s exports %s, which handoff never calls; did you mean %s?", b.file, name, near)
		}
		return errs.New(errs.Invalid, "%s exports %s, which handoff never calls: it calls only %s and reads config; stop exporting %s (a helper the handlers use needs no export)", b.file, exportName(name), strings.Join(handlerNames, ", "), exportName(name))
	}
	return b.tick.Value(ctx, name, func(vm *jsvm.VM, v goja.Value) error {
		if _, ok := goja.AssertFunction(v); !ok {
			return errs.New(errs.Invalid, "%s: export %s is %s, not a function; export one, e.g. export async function %s(event, ctx) { ... }", b.file, name, describe(v), name)
		}
		b.handlers = append(b.handlers, name)
		return nil
	})
}

// exportName words an export for a message: a default export has no name.
func exportName(name string) string {
	if name == "default" {
		return "a default export"
	}
	return name
}

// codeError turns a module that does not compile or load into the deploy
// refusal. jsvm's errors already name the file, line and column.
func codeError(err error) error {
	var ce *jsvm.CompileError
	var je *jsvm.JSError
	var le *jsvm.LimitError
	if errors.As(err, &ce) || errors.As(err, &je) || errors.As(err, &le) {
		return errs.New(errs.Invalid, "%v; fix the code and deploy again", err)
	}
	return fmt.Errorf("loading backend.js: %w", err)
}

// Config is the checked config export, defaults filled in.
func (b *Backend) Config() appcode.BackendConfig { return b.cfg }

// Has reports whether the module exports handler as a function.
func (b *Backend) Has(handler appcode.Handler) bool {
	return slices.Contains(b.handlers, string(handler))
}

// Close releases the runtimes; calls still running finish first.
func (b *Backend) Close() {
	b.tick.Close()
	if b.change != nil {
		b.change.Close()
	}
	if b.serve != nil {
		b.serve.Close()
	}
}
