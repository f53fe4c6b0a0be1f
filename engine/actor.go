package engine

import "github.com/handoff-run/handoff/store"

// Actor is who makes a call. The HTTP layer builds it from a verified
// credential; backend handlers build it from server-side state, so no
// client can claim to be a handler.
type Actor struct {
	User   string // "" when anonymous
	Admin  bool
	Device string
	// DeviceApp is set when the device is scoped to one app
	// ("owner/name"): it is refused everywhere else.
	DeviceApp string
	// Handler is set only for writes made by the app's own backend
	// ("onChange", "scheduled", "fetch").
	Handler string
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
}

func (a Actor) writer() store.Writer {
	return store.Writer{User: a.User, Device: a.Device, Handler: a.Handler}
}

func (a Actor) path() string {
	if a.Handler != "" {
		return a.Handler
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
