package engine

import (
	"strings"
	"time"
	"unicode/utf8"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
)

// checkDecision refuses names that a store cannot keep: every store must hold
// the same decisions, and PostgreSQL's text holds no NUL or invalid UTF-8.
func checkDecision(d appcode.AccessDecision) error {
	bad := func(what, name string) error {
		return errs.New(errs.AccessError, "access.js returned the %s %q, which holds NUL or is not valid UTF-8; return names of printable text", what, name)
	}
	ok := func(s string) bool { return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 }
	for _, c := range d.Channels {
		if !ok(c) {
			return bad("channel", c)
		}
	}
	for _, g := range d.Grants {
		if !ok(g.Principal) {
			return bad(g.Kind+" name", g.Principal)
		}
		if !ok(g.Channel) && g.Kind == "member" {
			return bad("role", g.Channel)
		}
		if !ok(g.Channel) {
			return bad("channel", g.Channel)
		}
	}
	return nil
}

// appCode is an app's active code, compiled.
type appCode struct {
	version int
	access  appcode.AccessFunc // nil when the version has no access.js
	backend appcode.Backend    // nil when it has no backend.js (or none runs here)
	broken  bool               // some of it failed to load
	static  staticFiles        // public/, served at the root of the app's site (static.go)
}

// backend returns the app's compiled backend.js, or nil.
func (app *appState) backend() appcode.Backend {
	if app.code == nil {
		return nil
	}
	return app.code.backend
}

// gate returns the access function for db, or nil when db has none.
func (app *appState) gate(db string) appcode.AccessFunc {
	if app.code == nil || app.code.access == nil || !app.code.access.Gates(db) {
		return nil
	}
	return app.code.access
}

func (app *appState) accessTimeout() time.Duration {
	if app.AccessTimeout > 0 {
		return app.AccessTimeout
	}
	return appcode.DefaultAccessTimeout
}
