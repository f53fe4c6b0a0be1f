package engine

import (
	"context"
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/store"
)

// DefaultAccessTimeout is the deadline of one access-function call.
const DefaultAccessTimeout = 100 * time.Millisecond

// Runtime compiles and runs app code. The engine only knows this
// interface; package access implements it on the JavaScript VM.
type Runtime interface {
	// CompileAccess compiles an access.js source. A syntax error is an
	// *errs.Error with code invalid naming the file, line and column.
	CompileAccess(filename, source string) (AccessFunc, error)
	// CheckBackend compiles a backend.js source only to refuse bad code at
	// deploy time.
	CheckBackend(filename, source string) error
}

// AccessFunc is one compiled access.js: the transition table.
type AccessFunc interface {
	// Gates reports whether db has an access function (a named export or
	// the default one).
	Gates(db string) bool
	// Check runs the function for one write. It returns the channels and
	// grants of the new revision, or an *errs.Error: forbidden (with the
	// function's reason) or access_error (the function failed).
	Check(ctx context.Context, in AccessInput) (AccessDecision, error)
}

// AccessInput is what access.js sees: doc, oldDoc, user and what ctx
// checks against.
type AccessInput struct {
	// App is the app's owner/name: whose JavaScript this is, for sharing
	// the cores fairly among apps.
	App string
	DB  string
	// ID is the document's id; Deleted tells a delete. Doc says both too,
	// but a table written in Go should not have to decode it to know.
	ID      string
	Deleted bool
	// Doc is the incoming document with _id and without _rev; on delete
	// {"_id": id, "_deleted": true}.
	Doc json.RawMessage
	// OldDoc is the head the write replaces, with _id and _rev; nil when
	// absent or deleted.
	OldDoc json.RawMessage
	// User is nil for an anonymous write.
	User *AccessUser
	// Handler is the backend handler making the write, "" for clients.
	// ctx.requireBackend checks it; only the server sets it.
	Handler string
	Timeout time.Duration
	// Now is the clock's time when the write began.
	Now time.Time
	// ReadChannels are the channels the writer may read, for
	// ctx.requireAccess.
	ReadChannels map[string]bool
}

// AccessUser is the user object of access.js.
type AccessUser struct {
	ID      string   `json:"id"`
	Roles   []string `json:"roles"`
	IsOwner bool     `json:"isOwner"`
	Device  string   `json:"device,omitempty"`
}

// AccessDecision is what a passing access function returned.
type AccessDecision struct {
	Channels []string
	Grants   []store.Grant
}

// check refuses names that a store cannot keep: every store must hold
// the same decisions, and PostgreSQL's text holds no NUL or invalid UTF-8.
func (d AccessDecision) check() error {
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
	access  AccessFunc  // nil when the version has no access.js
	backend Backend     // nil when it has no backend.js (or none runs here)
	broken  bool        // some of it failed to load
	static  staticFiles // public/, served at the root of the app's site (static.go)
}

// backend returns the app's compiled backend.js, or nil.
func (app *appState) backend() Backend {
	if app.code == nil {
		return nil
	}
	return app.code.backend
}

// gate returns the access function for db, or nil when db has none.
func (app *appState) gate(db string) AccessFunc {
	if app.code == nil || app.code.access == nil || !app.code.access.Gates(db) {
		return nil
	}
	return app.code.access
}

func (app *appState) accessTimeout() time.Duration {
	if app.AccessTimeout > 0 {
		return app.AccessTimeout
	}
	return DefaultAccessTimeout
}
