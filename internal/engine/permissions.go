package engine

import (
	"slices"

	"github.com/handoff-run/handoff/errs"
)

// RoleEditor may write to an app that has no access function.
const RoleEditor = "editor"

func (app *appState) ref() string { return app.Owner + "/" + app.Name }

func (app *appState) isOwner(a Actor) bool { return a.User != "" && a.User == app.Owner }

func (app *appState) isMember(a Actor) bool {
	return a.User != "" && len(app.roles[a.User]) > 0
}

// mayWrite applies the default rule until an app has an access function:
// the owner and editors write.
func (e *Engine) mayWrite(a Actor, app *appState) error {
	if a.User == "" && a.Handler != "" {
		// A fetch handler writes as nobody: only access.js can let it.
		return errs.New(errs.Unauthorized, "the %s handler writes to %s without a user, which only access.js can allow; give the database an access function that passes such writes, e.g. with ctx.requireBackend(%q)", a.Handler, app.ref(), a.Handler)
	}
	if a.User == "" {
		return errs.New(errs.Unauthorized, "writing to %s needs a credential; pass a token (HANDOFF_TOKEN) or sign in", app.ref())
	}
	if a.Admin || app.isOwner(a) || slices.Contains(app.roles[a.User], RoleEditor) {
		return nil
	}
	return &errs.Error{Code: errs.Forbidden, Reason: "not an editor",
		Message: "user " + a.User + " may not write to " + app.ref() + "; the owner can grant it with `handoff app member add --app " + app.ref() + " " + a.User + " --role editor`"}
}

// mayRead lets the admin, the owner and members read; anonymous readers
// only public apps.
func (e *Engine) mayRead(a Actor, app *appState) error {
	if a.Admin || app.isOwner(a) || app.isMember(a) || app.Public {
		return nil
	}
	if a.User == "" {
		return errs.New(errs.Unauthorized, "reading %s needs a credential; pass a token (HANDOFF_TOKEN) or sign in", app.ref())
	}
	return &errs.Error{Code: errs.Forbidden, Reason: "not a member",
		Message: "user " + a.User + " is not a member of " + app.ref() + "; ask its owner to add you with `handoff app member add`"}
}

// mayAdmin lets the admin and the owner manage an app.
func (e *Engine) mayAdmin(a Actor, app *appState) error {
	if a.Admin || app.isOwner(a) {
		return nil
	}
	if a.User == "" {
		return errs.New(errs.Unauthorized, "managing %s needs a credential; pass a token (HANDOFF_TOKEN) or sign in", app.ref())
	}
	return &errs.Error{Code: errs.Forbidden, Reason: "not the owner",
		Message: "only the owner of " + app.ref() + " or the admin may do this"}
}
