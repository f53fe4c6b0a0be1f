package appcode

import (
	"context"
	"encoding/json"
	"time"

	"github.com/handoff-run/handoff/store"
)

// DefaultAccessTimeout is the deadline of one access-function call.
const DefaultAccessTimeout = 100 * time.Millisecond

// Compiler turns an app's code into its access function and its
// handlers: the one way code comes into the engine, which knows only this
// interface. Package jsapp implements it on the JavaScript VM; the
// embedding package handoff on tables and handlers written in Go.
type Compiler interface {
	// CompileAccess compiles an access.js source. A syntax error is an
	// *errs.Error with code invalid naming the file, line and column.
	CompileAccess(filename, source string) (AccessFunc, error)
	// CompileBackend compiles a backend.js source, runs its top level and
	// checks its config. Bad code or config is an *errs.Error with code
	// invalid that names the file, line and column, or the config field.
	CompileBackend(filename, source string) (Backend, error)
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
	Handler Handler
	Timeout time.Duration
	// HeapLimit is the memory one call may grow the heap by, in bytes;
	// 0 is the server's default. The operator sets it per app.
	HeapLimit int64
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
