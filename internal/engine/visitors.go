package engine

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/store"
)

// Sign-up policies: who may become a visitor of an app.
const (
	SignupClosed = "closed" // nobody; the default
	SignupInvite = "invite" // holders of an invite code from the owner
	SignupOpen   = "open"   // anyone
)

// Password limits. The upper bound keeps a hash's input, and so its
// cost, small whatever a client sends.
const (
	MinPasswordChars = 8
	MaxPasswordBytes = 256
)

// ticketInvite is the kind of the tickets that hold invite codes.
const ticketInvite = "invite"

// VisitorID is the user id of the visitor called name on app owner/app:
// name@app--owner, after the app's site. A server user's name cannot contain '@', so a visitor
// is never taken for one, nor for a visitor of another app.
func VisitorID(name, appRef string) string {
	owner, app, _ := strings.Cut(appRef, "/")
	return name + "@" + SiteLabel(owner, app)
}

// Visitor is a signed-in visitor as the API shows it.
type Visitor struct {
	ID   string `json:"id"`   // the user id access.js sees
	Name string `json:"name"` // the name they signed up with
	App  string `json:"app"`
}

func visitorOf(appRef, name string) Visitor {
	return Visitor{ID: VisitorID(name, appRef), Name: name, App: appRef}
}

// signup is the app's policy, closed when never set.
func (app *appState) signup() string {
	if app.Signup == "" {
		return SignupClosed
	}
	return app.Signup
}

// SignUp makes name a visitor of the app with password and returns a
// token scoped to the app. invite is needed when the app's policy is
// "invite"; it is used up only by a sign-up that succeeds.
func (e *Engine) SignUp(ctx context.Context, appRef, name, password, invite string) (string, Visitor, error) {
	app, err := e.app(ctx, appRef)
	if err != nil {
		return "", Visitor{}, err
	}
	switch app.signup() {
	case SignupClosed:
		return "", Visitor{}, &errs.Error{Code: errs.Forbidden, Reason: "sign-up closed",
			Message: "sign-up to " + appRef + " is closed; its owner can open it with `handoff app set --app " + appRef + " --signup open` (or `--signup invite`)"}
	case SignupInvite:
		if invite == "" {
			return "", Visitor{}, &errs.Error{Code: errs.Forbidden, Reason: "invite needed",
				Message: "sign-up to " + appRef + " needs an invite code; ask the app's owner for one (`handoff app invite --app " + appRef + "`)"}
		}
	}
	if err := ValidUserName(name); err != nil {
		return "", Visitor{}, errs.New(errs.Invalid, "visitor name %q must be 1-64 lowercase letters, digits or '-'", name)
	}
	if err := ValidPassword(password); err != nil {
		return "", Visitor{}, err
	}
	v := visitorOf(appRef, name)
	taken := errs.New(errs.Exists, "the name %q is taken on %s; pick another, or sign in if it is yours", name, appRef)
	// Under the invite policy the code is checked before the name, so
	// only a holder of a valid code learns whether a name is taken.
	var ticket *store.Ticket
	giveBack := func() {
		if ticket != nil {
			_ = e.st.PutTicket(context.WithoutCancel(ctx), *ticket)
		}
	}
	if app.signup() == SignupInvite {
		ticket, err = e.st.TakeTicket(ctx, app.ID, ticketInvite, HashToken(invite), e.clock.Now())
		if errors.Is(err, store.ErrNotFound) {
			return "", Visitor{}, &errs.Error{Code: errs.Forbidden, Reason: "invite not valid",
				Message: "the invite code is not valid or was used already; ask the app's owner for a new one"}
		}
		if err != nil {
			return "", Visitor{}, internal(err)
		}
	}
	if _, err := e.st.User(ctx, v.ID); err == nil {
		giveBack()
		return "", Visitor{}, taken
	} else if !errors.Is(err, store.ErrNotFound) {
		giveBack()
		return "", Visitor{}, internal(err)
	}
	hash, err := auth.HashPassword(ctx, password)
	if err != nil {
		giveBack()
		return "", Visitor{}, hashFailed(err)
	}
	err = e.st.CreateUser(ctx, store.User{Name: v.ID, App: appRef, PasswordHash: hash, Created: e.clock.Now()})
	if err != nil {
		// The invite was not used: give it back.
		giveBack()
		if errors.Is(err, store.ErrExists) {
			return "", Visitor{}, taken
		}
		return "", Visitor{}, internal(err)
	}
	token, err := e.newToken(ctx, v.ID)
	return token, v, err
}

// SignIn checks a visitor's name and password and returns a new token
// scoped to the app. A wrong password and an unknown name get the same
// answer after the same work, so neither tells whether the name exists.
func (e *Engine) SignIn(ctx context.Context, appRef, name, password string) (string, Visitor, error) {
	if _, err := e.app(ctx, appRef); err != nil {
		return "", Visitor{}, err
	}
	v := visitorOf(appRef, name)
	var hash string
	if ValidUserName(name) == nil && len(password) <= MaxPasswordBytes {
		u, err := e.st.User(ctx, v.ID)
		switch {
		case err == nil && u.App == appRef:
			hash = u.PasswordHash
		case err != nil && !errors.Is(err, store.ErrNotFound):
			return "", Visitor{}, internal(err)
		}
	}
	ok, err := auth.CheckPassword(ctx, password, hash)
	if err != nil {
		return "", Visitor{}, hashFailed(err)
	}
	if !ok {
		return "", Visitor{}, wrongPassword()
	}
	token, err := e.newToken(ctx, v.ID)
	return token, v, err
}

// hashFailed is a password hash that could not be computed: the server
// is busy hashing others, or the request ended while it waited.
func hashFailed(err error) error {
	if errors.Is(err, auth.ErrBusy) {
		return errs.New(errs.Unavailable, "the server is busy checking passwords; retry in a few seconds")
	}
	return internal(err)
}

// wrongPassword is the answer to a failed sign-in, whatever failed.
func wrongPassword() error {
	return &errs.Error{Code: errs.Unauthorized, Reason: "wrong name or password",
		Message: "name or password is wrong; check both and retry, or sign up if you have no account"}
}

func (e *Engine) newToken(ctx context.Context, user string) (string, error) {
	token := NewToken()
	if err := e.st.AddToken(ctx, user, HashToken(token)); err != nil {
		return "", internal(err)
	}
	return token, nil
}

// SignOut revokes the token a signed in with, and nothing else. Live
// feeds opened with it end, on every node.
func (e *Engine) SignOut(ctx context.Context, a Actor, appRef string) error {
	if err := a.Scoped(appRef); err != nil {
		return err
	}
	if !a.Visitor() {
		return errs.New(errs.Invalid, "sign-out is for visitors of %s; a user's tokens are replaced with `handoff user token NAME`", appRef)
	}
	hash := a.SessionHash()
	if hash == nil {
		return errs.New(errs.Invalid, "sign-out revokes a visitor's token, and this request was not made with one; send the token in Authorization: Bearer TOKEN")
	}
	return e.revoking(ctx, a.User, func() error {
		err := e.st.RemoveToken(ctx, hash)
		if errors.Is(err, store.ErrNotFound) {
			return errs.New(errs.Unauthorized, "nothing was revoked: the token is not valid any more, so you are signed out already")
		}
		if err != nil {
			return internal(err)
		}
		return nil
	})
}

// ValidPassword checks a new password against the limits.
func ValidPassword(p string) error {
	if n := len([]rune(p)); n < MinPasswordChars {
		return errs.New(errs.Invalid, "the password has %d characters; use at least %d", n, MinPasswordChars)
	}
	if len(p) > MaxPasswordBytes {
		return errs.New(errs.Invalid, "the password is %d bytes; use at most %d", len(p), MaxPasswordBytes)
	}
	return nil
}

// SetSignup sets who may sign up as the app's visitor. The owner and the
// admin set it.
func (e *Engine) SetSignup(ctx context.Context, a Actor, appRef, policy string) error {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return err
	}
	if !slices.Contains([]string{SignupClosed, SignupInvite, SignupOpen}, policy) {
		return errs.New(errs.Invalid, "sign-up policy %q is not one of closed, invite, open", policy)
	}
	if err := e.st.SetSignup(ctx, app.ID, policy); err != nil {
		return internal(err)
	}
	e.forgetApp(appRef)
	return nil
}

// Invite makes a single-use invite code for the app's sign-up. The
// owner, the admin and the app's editors make them.
func (e *Engine) Invite(ctx context.Context, a Actor, appRef string) (string, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return "", err
	}
	if !a.Admin && !app.isOwner(a) && !slices.Contains(app.roles[a.User], RoleEditor) {
		if a.User == "" {
			return "", errs.New(errs.Unauthorized, "making invites to %s needs a credential; pass a token (HANDOFF_TOKEN)", appRef)
		}
		return "", &errs.Error{Code: errs.Forbidden, Reason: "not an editor",
			Message: "only the owner of " + appRef + ", its editors or the admin may make invites"}
	}
	code := NewToken()
	err = e.st.PutTicket(ctx, store.Ticket{AppID: app.ID, Kind: ticketInvite, Hash: HashToken(code), Created: e.clock.Now()})
	if err != nil {
		return "", internal(err)
	}
	return code, nil
}
