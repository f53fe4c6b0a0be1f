package identity

import (
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// Actor is who makes a call. The HTTP layer builds it from a verified
// credential; backend handlers build it from server-side state, so no
// client can claim to be a handler.
type Actor struct {
	User   string // "" when anonymous
	Admin  bool
	Device string
	// App confines the actor to one app ("owner/name"): set for a device
	// scoped to the app and for every visitor of the app (Device ""). It
	// is refused everywhere else.
	App string
	// Handler is set only for writes made by the app's own backend
	// ("onChange", "scheduled", "fetch").
	Handler appcode.Handler
	// Path says how the call arrived, for the ledger: "http", "cli",
	// "import" or the handler's name.
	Path string
	// Depth counts the onChange runs that led to this write: the loop
	// guard stops delivering events past MaxEventDepth.
	Depth int
	// Origin is the seq of the write whose chain of onChange runs made
	// this write, which spends the chain's fan-out budget; 0 for a write
	// that starts a chain.
	Origin int64
	// session is the hash of the bearer token the actor authenticated
	// with: a long-lived request (the live feed) checks it again, and a
	// sign-out revokes exactly it. Only Authenticate sets it, so nothing
	// outside this package can name a session it did not present.
	session string
	// deviceKey is the public key of the device that signed the request,
	// so a recheck tells the device from a new one of the same name.
	deviceKey string
}

// SessionHash is the stored hash of the bearer token the actor signed in
// with, or nil for any other actor (a device, a handler, anonymous).
func (a Actor) SessionHash() []byte {
	if a.session == "" {
		return nil
	}
	return []byte(a.session)
}

// Writer is the actor as the ledger records a revision's writer.
func (a Actor) Writer() store.Writer {
	return store.Writer{User: a.User, Device: a.Device, Handler: string(a.Handler)}
}

// LedgerPath is how the actor's call arrived, as the ledger records it:
// the handler's name for a handler, else the client's label.
func (a Actor) LedgerPath() string {
	if a.Handler != "" {
		return string(a.Handler)
	}
	if a.Path == "" {
		return "http"
	}
	return a.Path
}

// ClientPath keeps the client-declared paths that are only labels; any
// other value becomes "http", so a client can never look like a handler
// in the ledger.
func ClientPath(p string) string {
	switch p {
	case "cli", "import", "console":
		return p
	}
	return "http"
}

// Visitor reports whether the actor is a visitor of an app (a user who
// signed up on the app's page), not a user of the server.
func (a Actor) Visitor() bool { return a.App != "" && a.Device == "" }

// Scoped refuses an actor confined to another app than ref ("" for
// anything outside every app: app creation, users, devices).
func (a Actor) Scoped(ref string) error {
	if a.App == "" || a.App == ref {
		return nil
	}
	if a.Visitor() {
		msg := "visitor " + a.User + " may only use " + a.App + "; sign in on the page of the app you mean to use"
		if ref == "" {
			msg = "visitor " + a.User + " may only use " + a.App + ", not manage the server; use a user's token (HANDOFF_TOKEN)"
		}
		return &errs.Error{Code: errs.Forbidden, Reason: "visitor of another app", Message: msg}
	}
	msg := "device " + a.Device + " may only be used with " + a.App
	if ref != "" {
		msg += "; add a device for " + ref + " with `handoff device add NAME --app " + ref + "`"
	}
	return &errs.Error{Code: errs.Forbidden, Reason: "device scoped to another app", Message: msg}
}
