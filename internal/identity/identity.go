// Package identity is who may call the server: users and their tokens,
// devices and their signed requests, and the Actor that a verified
// credential becomes. Apps, their members and their visitors are the
// engine's; what identity needs of them it asks through Hooks.
package identity

import (
	"context"
	"regexp"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/store"
)

// Hooks are what identity asks of the apps' owner (the engine).
type Hooks struct {
	// MayRead refuses a whose reads of the app would be refused: a
	// device is scoped only to an app its user may read.
	MayRead func(ctx context.Context, a Actor, appRef string) error
	// MembershipChanged is told of an app whose members changed (a user
	// removed), so cached roles are dropped.
	MembershipChanged func(appRef string)
}

// Service keeps the users and devices of one store.
type Service struct {
	st    store.Store
	caps  store.Capabilities
	clock clock.Clock
	hooks Hooks
	// replays remembers device tokens already used on this node.
	replays auth.Replays
}

// New returns the identity service of st.
func New(st store.Store, clk clock.Clock, hooks Hooks) *Service {
	return &Service{st: st, caps: st.Capabilities(), clock: clk, hooks: hooks}
}

var nameRE = regexp.MustCompile(`^[a-z0-9-]{1,64}$`)

// IsName reports whether s follows the rule of user names, which app
// names and device names share: 1-64 lowercase letters, digits or '-'.
func IsName(s string) bool { return nameRE.MatchString(s) }

// ValidUserName checks a user name.
func ValidUserName(name string) error {
	if !IsName(name) {
		return errs.New(errs.Invalid, "user name %q must be 1-64 lowercase letters, digits or '-'", name)
	}
	return nil
}
