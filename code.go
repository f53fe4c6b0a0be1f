package handoff

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
)

// The engine keeps an app's live code as source text in its store and
// compiles it whenever it loads the app, through appcode.Compiler. A Go
// app's live code is a stub that names the
// app, and compiling it here finds the app among this instance's.
//
// The stub is also JavaScript that refuses every write: a server without
// the Go code (`handoff serve` on the same folder) keeps the app's
// databases closed rather than open them to the default rule.

const stubMark = "// handoff: Go app "

func accessStub(name string) string {
	return stubMark + name + `
// Its transition tables are Go functions of the program that embeds
// handoff (package github.com/handoff-run/handoff); without them every
// write is refused.
export default function () {
  throw { forbidden: "this app's transition tables are Go code: write through the program that defines them" };
}
`
}

func backendStub(name string) string {
	return stubMark + name + `
// Its handlers are Go functions of the program that embeds handoff;
// without them none runs, and its events wait in the outbox.
`
}

// goApp is an App as checked at open, copied so that the program cannot
// change it under the engine.
type goApp struct {
	name, owner string
	public      bool
	tables      map[string]Table
	onChange    func(context.Context, Change, *Docs) error
	scheduled   func(context.Context, Tick, *Docs) error
	cfg         appcode.BackendConfig
}

func newGoApp(a App) (*goApp, error) {
	if err := a.check(); err != nil {
		return nil, err
	}
	owner, _, _ := strings.Cut(a.Name, "/")
	return &goApp{name: a.Name, owner: owner, public: a.Public, tables: maps.Clone(a.Tables),
		onChange: a.OnChange.Handle, scheduled: a.Scheduled.Handle, cfg: a.config()}, nil
}

// code compiles the stubs of this instance's apps.
type code struct {
	apps map[string]*goApp // by name; not changed once the instance is open
	e    *engine.Engine
	log  *slog.Logger
}

var (
	_ appcode.Compiler = (*code)(nil)
)

func (c *code) app(source string) (*goApp, error) {
	first, _, _ := strings.Cut(source, "\n")
	name, ok := strings.CutPrefix(first, stubMark)
	if !ok {
		return nil, errs.New(errs.Invalid, "the app's live code is JavaScript, which a program embedding handoff does not run; define the app as a handoff.App, or serve it with `handoff serve`")
	}
	a := c.apps[name]
	if a == nil {
		return nil, errs.New(errs.Invalid, "app %s is Go code that this program does not define; pass it in Options.Apps", name)
	}
	return a, nil
}

func (c *code) CompileAccess(_, source string) (appcode.AccessFunc, error) {
	a, err := c.app(source)
	if err != nil {
		return nil, err
	}
	return tables{a, c.log}, nil
}

func (c *code) CompileBackend(_, source string) (appcode.Backend, error) {
	a, err := c.app(source)
	if err != nil {
		return nil, err
	}
	return &handlers{app: a, e: c.e, log: c.log}, nil
}

// panicked turns a panic of app code into an error, as a JavaScript
// throw is one: a bug in one table or handler must not stop the server.
// The stack goes to the server's log.
func panicked(log *slog.Logger, app, what string, v any) error {
	log.Error("app code panicked", "app", app, "in", what, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	return fmt.Errorf("the %s of app %s panicked: %v; fix it (the server's log has the stack)", what, app, v)
}

// tables is an app's Tables as the engine's access function.
type tables struct {
	app *goApp
	log *slog.Logger
}

func (t tables) Gates(db string) bool { return t.app.tables[db] != nil }

func (t tables) Check(_ context.Context, in appcode.AccessInput) (dec appcode.AccessDecision, err error) {
	w := &Write{DB: in.DB, ID: in.ID, Doc: Doc(in.Doc), Old: Doc(in.OldDoc), Deleted: in.Deleted,
		Handler: string(in.Handler), Now: in.Now, readable: in.ReadChannels}
	if in.User != nil {
		u := User(*in.User)
		w.User = &u
	}
	defer func() {
		if v := recover(); v != nil {
			err = errs.New(errs.AccessError, "%v", panicked(t.log, t.app.name, "transition table of "+in.DB, v))
		}
	}()
	d, err := t.app.tables[in.DB](w)
	switch {
	case errs.Is(err, errs.Forbidden):
		return appcode.AccessDecision{}, err
	case err != nil:
		return appcode.AccessDecision{}, errs.New(errs.AccessError, "the transition table of %q failed: %v; fix the table, or refuse with handoff.Forbid", in.DB, err)
	}
	return d.engine(), nil
}

// engine converts a decision to the channels and grants the store keeps,
// as access.js's return value is converted: empty and repeated names
// dropped, maps in key order so equal decisions are equal revisions.
func (d Decision) engine() appcode.AccessDecision {
	out := appcode.AccessDecision{Channels: names(d.Channels)}
	add := func(kind, principal string, channels []string) {
		for _, c := range names(channels) {
			out.Grants = append(out.Grants, store.Grant{Kind: kind, Principal: principal, Channel: c})
		}
	}
	add("public", "", d.Grant.Public)
	for _, u := range slices.Sorted(maps.Keys(d.Grant.Users)) {
		add("user", u, d.Grant.Users[u])
	}
	for _, r := range slices.Sorted(maps.Keys(d.Grant.Roles)) {
		add("role", r, d.Grant.Roles[r])
	}
	for _, role := range slices.Sorted(maps.Keys(d.Members)) {
		for _, u := range names(d.Members[role]) {
			out.Grants = append(out.Grants, store.Grant{Kind: "member", Principal: u, Channel: role})
		}
	}
	return out
}

func names(l []string) []string {
	out := make([]string, 0, len(l))
	for _, s := range l {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// handlers is an app's OnChange and Scheduled as the engine's backend.
type handlers struct {
	app *goApp
	e   *engine.Engine
	log *slog.Logger
}

func (h *handlers) Config() appcode.BackendConfig { return h.app.cfg }
func (h *handlers) Close()                        {}

func (h *handlers) Has(handler appcode.Handler) bool {
	switch string(handler) {
	case HandlerOnChange:
		return h.app.onChange != nil
	case HandlerScheduled:
		return h.app.scheduled != nil
	}
	return false
}

// docs is what a run reads and writes with: its writes go through the
// run's own context, which carries the chain of onChange runs they
// continue (the loop guard and the fan-out budget); its reads see every
// document of the app, as a handler's do.
func (h *handlers) docs(handler string, hc appcode.HandlerContext) *Docs {
	return &Docs{e: h.e, app: h.app.name, actor: engine.Actor{User: h.app.owner, Handler: appcode.Handler(handler)}, hc: hc}
}

func (h *handlers) OnChange(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicked(h.log, h.app.name, "onChange handler", v)
		}
	}()
	c := Change{DB: ev.DB, ID: ev.DocID, Doc: Doc(ev.Doc), Old: Doc(ev.OldDoc), Deleted: ev.Deleted, Seq: ev.Seq, Attempt: ev.Attempt}
	return h.app.onChange(ctx, c, h.docs(HandlerOnChange, hc))
}

func (h *handlers) Scheduled(ctx context.Context, ev appcode.TickEvent, hc appcode.HandlerContext) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicked(h.log, h.app.name, "scheduled handler", v)
		}
	}()
	return h.app.scheduled(ctx, Tick{Planned: time.UnixMilli(ev.ScheduledTime).UTC()}, h.docs(HandlerScheduled, hc))
}

// Fetch is never called: Has("fetch") is false, so the engine answers
// not found first.
func (h *handlers) Fetch(context.Context, appcode.FetchRequest, appcode.HandlerContext) (appcode.FetchResponse, error) {
	return appcode.FetchResponse{}, errs.New(errs.NotFound, "app %s is Go code and has no fetch handler; serve requests from the program that embeds it", h.app.name)
}
