package identity

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/store"
)

// Bootstrap creates the admin user on first start and makes token valid
// for it. With an empty token and a new admin it mints one; the returned
// token is "" when the admin already existed and no token was given.
func (e *Service) Bootstrap(ctx context.Context, token string) (string, error) {
	err := e.st.CreateUser(ctx, store.User{Name: AdminUser, Admin: true, Created: e.clock.Now()})
	switch {
	case err == nil:
		if token == "" {
			token = NewToken()
		}
	case errors.Is(err, store.ErrExists):
		if token == "" {
			return "", nil
		}
	default:
		return "", errs.Storage(err)
	}
	if err != nil {
		// A token given for an existing admin is the admin's only token:
		// setting a new one is how a leaked one is revoked.
		err = e.st.ReplaceTokens(ctx, AdminUser, HashToken(token))
	} else {
		err = e.st.AddToken(ctx, AdminUser, HashToken(token))
	}
	if err != nil {
		return "", errs.Storage(err)
	}
	return token, nil
}

// RotateToken gives user a new token and revokes all the user's others,
// for a token that leaked or a person who left. The admin rotates anyone's;
// a user rotates their own. Device credentials are not tokens: revoke
// those with RevokeDevice.
func (e *Service) RotateToken(ctx context.Context, a Actor, user string) (string, error) {
	if a.Device != "" {
		// A device key is a narrower credential than a token: minting a
		// token with it would outlive the device's revocation.
		return "", &errs.Error{Code: errs.Forbidden, Reason: "a device credential",
			Message: "a device credential cannot get tokens; run this with a user token (HANDOFF_TOKEN or handoff login)"}
	}
	if err := a.Scoped(""); err != nil {
		return "", err
	}
	if a.User == "" || (!a.Admin && a.User != user) {
		return "", needAdmin(a, "give another user a new token")
	}
	token := NewToken()
	// A name no user can have is not looked up: the store may refuse it.
	err := store.ErrNotFound
	if ValidUserName(user) == nil {
		err = e.st.ReplaceTokens(ctx, user, HashToken(token))
	}
	if errors.Is(err, store.ErrNotFound) {
		return "", errs.New(errs.NotFound, "user %q not found; check the name (handoff whoami shows yours)", user)
	}
	if err != nil {
		return "", errs.Storage(err)
	}
	return token, nil
}

// Authenticate maps a bearer token to its actor. An empty token is the
// anonymous actor.
func (e *Service) Authenticate(ctx context.Context, token string) (Actor, error) {
	if token == "" {
		return Actor{}, nil
	}
	hash := HashToken(token)
	u, err := e.st.UserByToken(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return Actor{}, errs.New(errs.Unauthorized, "the token is not valid; check HANDOFF_TOKEN, or ask the admin for a new one (`handoff user token NAME`)")
	}
	if err != nil {
		return Actor{}, errs.Storage(err)
	}
	return Actor{User: u.Name, Admin: u.Admin, App: u.App, session: string(hash)}, nil
}

// AddUser creates a user and returns the user's first token. Only the
// admin adds users.
func (e *Service) AddUser(ctx context.Context, a Actor, name string) (string, error) {
	if err := a.Scoped(""); err != nil {
		return "", err
	}
	if !a.Admin {
		return "", needAdmin(a, "add users")
	}
	if err := ValidUserName(name); err != nil {
		return "", err
	}
	err := e.st.CreateUser(ctx, store.User{Name: name, Created: e.clock.Now()})
	if errors.Is(err, store.ErrExists) {
		return "", errs.New(errs.Exists, "user %q already exists; pick another name", name)
	}
	if err != nil {
		return "", errs.Storage(err)
	}
	token := NewToken()
	if err := e.st.AddToken(ctx, name, HashToken(token)); err != nil {
		return "", errs.Storage(err)
	}
	return token, nil
}

// UserInfo is a user as the API shows it, with the apps they own.
type UserInfo struct {
	Name    string    `json:"name"`
	Admin   bool      `json:"admin,omitempty"`
	Created time.Time `json:"created"`
	Apps    []string  `json:"apps"`
}

// Users lists every user with the apps they own. Only the admin lists
// users.
func (e *Service) Users(ctx context.Context, a Actor) ([]UserInfo, error) {
	if err := a.Scoped(""); err != nil {
		return nil, err
	}
	if !a.Admin {
		return nil, needAdmin(a, "list users")
	}
	us, err := e.st.Users(ctx)
	if err != nil {
		return nil, errs.Storage(err)
	}
	apps, err := e.st.Apps(ctx)
	if err != nil {
		return nil, errs.Storage(err)
	}
	owned := map[string][]string{}
	for _, app := range apps {
		owned[app.Owner] = append(owned[app.Owner], app.Owner+"/"+app.Name)
	}
	out := make([]UserInfo, 0, len(us))
	for _, u := range us {
		if u.App != "" {
			continue // a visitor belongs to its app, not to the server's users
		}
		out = append(out, UserInfo{Name: u.Name, Admin: u.Admin, Created: u.Created.UTC(), Apps: append([]string{}, owned[u.Name]...)})
	}
	return out, nil
}

// RemoveUser deletes a user: their tokens and devices stop working at
// once and their roles in apps are taken. Only the admin removes users,
// never the admin. A user who owns apps stays: the apps' names are under
// the owner's, and a new user of that name would own them.
func (e *Service) RemoveUser(ctx context.Context, a Actor, name string) error {
	if err := a.Scoped(""); err != nil {
		return err
	}
	if !a.Admin {
		return needAdmin(a, "remove users")
	}
	u, err := e.st.User(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return errs.New(errs.NotFound, "user %q not found; `handoff user list` shows the users", name)
	}
	if err != nil {
		return errs.Storage(err)
	}
	if u.Admin {
		return &errs.Error{Code: errs.Forbidden, Reason: "the admin",
			Message: "user " + name + " is the admin and cannot be removed; to replace its token, run `handoff user token " + name + "`"}
	}
	memberOf, err := e.st.RemoveUser(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return errs.New(errs.NotFound, "user %q not found; `handoff user list` shows the users", name)
	}
	apps, aerr := e.st.Apps(ctx)
	if aerr != nil {
		return errs.Storage(aerr)
	}
	if errors.Is(err, store.ErrOwnsApps) {
		var owned []string
		for _, app := range apps {
			if app.Owner == name {
				owned = append(owned, app.Owner+"/"+app.Name)
			}
		}
		return errs.New(errs.Conflict, "user %s owns %s and cannot be removed while those apps exist (a new user named %s would own them); to lock %s out instead, run `handoff user token %s`, which revokes their tokens, then with the token it prints revoke their devices (`handoff device list`, `handoff device revoke NAME`)",
			name, strings.Join(owned, ", "), name, name, name)
	}
	if err != nil {
		return errs.Storage(err)
	}
	for _, app := range apps {
		if slices.Contains(memberOf, app.ID) {
			e.hooks.MembershipChanged(app.Owner + "/" + app.Name)
		}
	}
	return nil
}

func needAdmin(a Actor, what string) error {
	if a.User == "" {
		return errs.New(errs.Unauthorized, "only the admin may %s; pass the admin token (HANDOFF_TOKEN)", what)
	}
	return &errs.Error{Code: errs.Forbidden, Reason: "not the admin",
		Message: "only the admin may " + what + "; user " + a.User + " is not the admin"}
}
