package engine

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// loadCode compiles an app's active code version. A version that no
// longer compiles (a runtime upgrade) is logged and the app falls back to
// refusing writes to gated databases rather than opening them.
func (e *Engine) loadCode(ctx context.Context, appID int64, ref string) (*appCode, error) {
	cv, err := e.st.ActiveCode(ctx, appID)
	if err != nil {
		return nil, internal(err)
	}
	if cv == nil {
		return nil, nil
	}
	// Deploy compiled this version a moment ago, or it was live before a
	// change of settings: use that, not a second copy of every runtime.
	if v, ok := e.fresh.LoadAndDelete(appID); ok && v.(*appCode).version == cv.Version {
		return v.(*appCode), nil
	}
	c := &appCode{version: cv.Version, static: newStaticFiles(cv.Files, cv.Created)}
	if cv.Backend != "" {
		if c.backend, err = e.code.CompileBackend(appcode.BackendFile, cv.Backend); err != nil {
			// Events stay in the outbox until a version that compiles is
			// live: nothing is lost, nothing runs broken code.
			e.log.Error("active backend.js does not compile", "app", ref, "version", cv.Version, "err", err)
			c.backend, c.broken = nil, true
		}
	}
	if cv.Access == "" {
		return c, nil
	}
	if c.access, err = e.code.CompileAccess(appcode.AccessFile, cv.Access); err != nil {
		if errs.Is(err, errs.Unavailable) { // this server runs no code
			c.access = brokenAccess{errs.New(errs.Unavailable, "app %s has access.js (version %d) but this server runs no app code; serve it with `handoff serve`", ref, cv.Version)}
			return c, nil
		}
		e.log.Error("active access.js does not compile", "app", ref, "version", cv.Version, "err", err)
		c.access = brokenAccess{errs.New(errs.AccessError, "app %s: access.js version %d does not compile (%v); deploy a fixed version or roll back", ref, cv.Version, err)}
		c.broken = true
	}
	return c, nil
}

// noCode is the compiler of an engine given none: it refuses all code.
type noCode struct{}

var errNoCode = errs.New(errs.Unavailable, "this server runs no app code; serve the app with `handoff serve`")

func (noCode) CompileAccess(string, string) (appcode.AccessFunc, error) { return nil, errNoCode }
func (noCode) CompileBackend(string, string) (appcode.Backend, error)   { return nil, errNoCode }

// brokenAccess stands in for code that cannot run: it closes every
// database to writes (never opens them) until a fixed version is live.
type brokenAccess struct{ err error }

func (brokenAccess) Gates(string) bool { return true }
func (b brokenAccess) Check(context.Context, appcode.AccessInput) (appcode.AccessDecision, error) {
	return appcode.AccessDecision{}, b.err
}

// CodeInfo describes one deployed version.
type CodeInfo struct {
	Version    int       `json:"version"`
	Author     string    `json:"author"`
	Created    time.Time `json:"created"`
	Active     bool      `json:"active"`
	HasAccess  bool      `json:"access,omitempty"`
	HasBackend bool      `json:"backend,omitempty"`
	Files      int       `json:"files,omitempty"` // static files deployed with it
}

// Deploy stores access.js and backend.js as a new version and makes it
// live. Code that does not compile is refused with its file, line and
// column, and the live version stays.
func (e *Engine) Deploy(ctx context.Context, a Actor, appRef string, accessJS, backendJS string) (CodeInfo, error) {
	return e.DeployCode(ctx, a, appRef, Code{Access: accessJS, Backend: backendJS})
}

// DeployCode is Deploy with the static files of the app folder's public/
// (static.go), checked for their paths and sizes.
func (e *Engine) DeployCode(ctx context.Context, a Actor, appRef string, c Code) (CodeInfo, error) {
	accessJS, backendJS := c.Access, c.Backend
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return CodeInfo{}, err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return CodeInfo{}, err
	}
	if accessJS == "" && backendJS == "" && len(c.Files) == 0 {
		return CodeInfo{}, errs.New(errs.Invalid, "nothing to deploy: the folder needs %s, %s or a %s/ folder", appcode.AccessFile, appcode.BackendFile, appcode.StaticDir)
	}
	if err := checkStaticFiles(c.Files); err != nil {
		return CodeInfo{}, err
	}
	if e.vetCode != nil && e.code != nil {
		for _, f := range []struct{ name, src string }{{appcode.AccessFile, accessJS}, {appcode.BackendFile, backendJS}} {
			if f.src == "" {
				continue
			}
			if err := e.vetCode(ctx, f.name, f.src); err != nil {
				return CodeInfo{}, err
			}
		}
	}
	code := &appCode{}
	if accessJS != "" {
		if code.access, err = e.code.CompileAccess(appcode.AccessFile, accessJS); err != nil {
			return CodeInfo{}, err
		}
	}
	if backendJS != "" {
		if code.backend, err = e.code.CompileBackend(appcode.BackendFile, backendJS); err != nil {
			return CodeInfo{}, err
		}
	}
	now := e.clock.Now()
	v, err := e.st.SaveCode(ctx, app.ID, store.CodeVersion{Access: accessJS, Backend: backendJS, Files: c.Files, Author: a.User, Created: now})
	if err != nil {
		return CodeInfo{}, internal(err)
	}
	code.version = v
	code.static = newStaticFiles(c.Files, now)
	e.fresh.Store(app.ID, code)
	e.codeChanged(ctx, appRef)
	return CodeInfo{Version: v, Author: a.User, Created: now.UTC(), Active: true, HasAccess: accessJS != "", HasBackend: backendJS != "", Files: len(c.Files)}, nil
}

// ActiveCode returns the sources of the app's live version ("" and 0
// when none was deployed).
func (e *Engine) ActiveCode(ctx context.Context, a Actor, appRef string) (access, backend string, version int, err error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return "", "", 0, err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return "", "", 0, err
	}
	cv, err := e.st.ActiveCode(ctx, app.ID)
	if err != nil {
		return "", "", 0, internal(err)
	}
	if cv == nil {
		return "", "", 0, nil
	}
	return cv.Access, cv.Backend, cv.Version, nil
}

// CodeVersions lists an app's deployed versions, oldest first.
func (e *Engine) CodeVersions(ctx context.Context, a Actor, appRef string) ([]CodeInfo, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return nil, err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return nil, err
	}
	vs, err := e.st.CodeVersions(ctx, app.ID)
	if err != nil {
		return nil, internal(err)
	}
	out := make([]CodeInfo, len(vs))
	for i, v := range vs {
		out[i] = CodeInfo{Version: v.Version, Author: v.Author, Created: v.Created.UTC(), Active: v.Active}
	}
	return out, nil
}

// Rollback makes an earlier version live again.
func (e *Engine) Rollback(ctx context.Context, a Actor, appRef string, version int) error {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return err
	}
	// Versions count up from 1 in a 32-bit column: anything else does not
	// exist, and the store would refuse to look it up.
	err = store.ErrNotFound
	if version >= 1 && version <= math.MaxInt32 {
		err = e.st.ActivateCode(ctx, app.ID, version)
	}
	if errors.Is(err, store.ErrNotFound) {
		return errs.New(errs.NotFound, "app %s has no code version %d; list them with `handoff app versions --app %s`", appRef, version, appRef)
	}
	if err != nil {
		return internal(err)
	}
	e.codeChanged(ctx, appRef)
	return nil
}

// codeChanged drops the cached code and lets the app's runner pick up the
// new version's handlers and schedule.
func (e *Engine) codeChanged(ctx context.Context, appRef string) {
	e.forgetApp(appRef)
	if app, err := e.app(ctx, appRef); err == nil {
		e.runner.Reload(app.forRunner())
	}
}

// DefaultMaxJSMemory is Options.MaxJSMemory's default, in MiB.
const DefaultMaxJSMemory = 512

// minJSMemory is the smallest per-app limit, in MiB: below it, loading an
// ordinary module can fail.
const minJSMemory = 16

// SetJSMemory sets how many MiB one call of the app's JavaScript may grow
// the heap by; 0 restores the server's default. The memory is the
// server's, so only a server admin may change it.
func (e *Engine) SetJSMemory(ctx context.Context, a Actor, appRef string, mib int) error {
	if !a.Admin {
		return errs.New(errs.Forbidden, "only a server admin may change an app's memory limit; ask one to run `handoff app set --app %s --js-memory MIB`", appRef)
	}
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return err
	}
	limit := e.maxJS
	if limit <= 0 {
		limit = DefaultMaxJSMemory
	}
	if mib != 0 && (mib < minJSMemory || mib > limit) {
		return errs.New(errs.Invalid, "a memory limit of %d MiB is out of range; use %d to %d (the server's cap, `handoff serve --js-memory`), or 0 for the default", mib, minJSMemory, limit)
	}
	if err := e.st.SetJSMemory(ctx, app.ID, mib); err != nil {
		return internal(err)
	}
	e.forgetApp(appRef)
	return nil
}

// heapLimit is the app's own limit for one call, in bytes; 0 for the default.
func (app *appState) heapLimit() int64 { return int64(app.JSMemory) << 20 }

// SetAccessTimeout changes the deadline of the app's access function.
func (e *Engine) SetAccessTimeout(ctx context.Context, a Actor, appRef string, d time.Duration) error {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return err
	}
	if d < 0 || d > time.Minute {
		return errs.New(errs.Invalid, "access timeout %v is out of range; use 1ms to 1m, or 0 for the default %v", d, appcode.DefaultAccessTimeout)
	}
	if err := e.st.SetAccessTimeout(ctx, app.ID, d); err != nil {
		return internal(err)
	}
	e.forgetApp(appRef)
	return nil
}
