package engine

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/store"
)

// AdminUser is the name of the user created on first start.
const AdminUser = "admin"

// tokenPrefix marks handoff tokens so a leaked one is easy to recognise
// in logs and by secret scanners.
const tokenPrefix = "hnd_"

// NewToken returns a random bearer token.
func NewToken() string {
	var b [24]byte
	_, _ = rand.Read(b[:])
	return tokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// HashToken is how tokens are stored: never in clear. Tokens are long
// random strings, so a fast hash is enough (no dictionary to guess from).
func HashToken(token string) []byte {
	h := sha256.Sum256([]byte(token))
	return h[:]
}

// Bootstrap creates the admin user on first start and makes token valid
// for it. With an empty token and a new admin it mints one; the returned
// token is "" when the admin already existed and no token was given.
func (e *Engine) Bootstrap(ctx context.Context, token string) (string, error) {
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
		return "", internal(err)
	}
	if err != nil {
		// A token given for an existing admin is the admin's only token:
		// setting a new one is how a leaked one is revoked.
		err = e.st.ReplaceTokens(ctx, AdminUser, HashToken(token))
	} else {
		err = e.st.AddToken(ctx, AdminUser, HashToken(token))
	}
	if err != nil {
		return "", internal(err)
	}
	return token, nil
}

// RotateToken gives user a new token and revokes all the user's others,
// for a token that leaked or a person who left. The admin rotates anyone's;
// a user rotates their own. Device credentials are not tokens: revoke
// those with RevokeDevice.
func (e *Engine) RotateToken(ctx context.Context, a Actor, user string) (string, error) {
	if a.Device != "" {
		// A device key is a narrower credential than a token: minting a
		// token with it would outlive the device's revocation.
		return "", &errs.Error{Code: errs.Forbidden, Reason: "a device credential",
			Message: "a device credential cannot get tokens; run this with a user token (HANDOFF_TOKEN or handoff login)"}
	}
	if err := a.scoped(""); err != nil {
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
		return "", internal(err)
	}
	return token, nil
}

// Authenticate maps a bearer token to its actor. An empty token is the
// anonymous actor.
func (e *Engine) Authenticate(ctx context.Context, token string) (Actor, error) {
	if token == "" {
		return Actor{}, nil
	}
	u, err := e.st.UserByToken(ctx, HashToken(token))
	if errors.Is(err, store.ErrNotFound) {
		return Actor{}, errs.New(errs.Unauthorized, "the token is not valid; check HANDOFF_TOKEN, or ask the admin for a new one (`handoff user token NAME`)")
	}
	if err != nil {
		return Actor{}, internal(err)
	}
	return Actor{User: u.Name, Admin: u.Admin, App: u.App}, nil
}

// AddUser creates a user and returns the user's first token. Only the
// admin adds users.
func (e *Engine) AddUser(ctx context.Context, a Actor, name string) (string, error) {
	if err := a.scoped(""); err != nil {
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
		return "", internal(err)
	}
	token := NewToken()
	if err := e.st.AddToken(ctx, name, HashToken(token)); err != nil {
		return "", internal(err)
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
func (e *Engine) Users(ctx context.Context, a Actor) ([]UserInfo, error) {
	if err := a.scoped(""); err != nil {
		return nil, err
	}
	if !a.Admin {
		return nil, needAdmin(a, "list users")
	}
	us, err := e.st.Users(ctx)
	if err != nil {
		return nil, internal(err)
	}
	apps, err := e.st.Apps(ctx)
	if err != nil {
		return nil, internal(err)
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
func (e *Engine) RemoveUser(ctx context.Context, a Actor, name string) error {
	if err := a.scoped(""); err != nil {
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
		return internal(err)
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
		return internal(aerr)
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
		return internal(err)
	}
	for _, app := range apps {
		if slices.Contains(memberOf, app.ID) {
			e.forgetApp(app.Owner + "/" + app.Name)
		}
	}
	return nil
}

// AppInfo is an app as the API shows it.
type AppInfo struct {
	App    string `json:"app"`
	Owner  string `json:"owner"`
	Name   string `json:"name"`
	Public bool   `json:"public"`
	// Roles lists the caller's roles ("owner" for the owner).
	Roles []string `json:"roles,omitempty"`
	// Signup is the app's sign-up policy for visitors.
	Signup string `json:"signup"`
	// Site is the URL of the app's site; the HTTP layer fills it in, as
	// only it knows the address it is served at.
	Site string `json:"site,omitempty"`
	// Origins are the extra web origins the app lets call the API.
	Origins []string `json:"origins,omitempty"`
}

// CreateApp creates owner/name. Users create apps for themselves; the
// admin for anyone. The owner must be an existing user.
func (e *Engine) CreateApp(ctx context.Context, a Actor, ref string, public bool) (AppInfo, error) {
	owner, name, err := ParseAppRef(ref)
	if err != nil {
		return AppInfo{}, err
	}
	if a.User == "" {
		return AppInfo{}, errs.New(errs.Unauthorized, "creating an app needs a credential; pass a token (HANDOFF_TOKEN)")
	}
	if err := a.scoped(""); err != nil {
		return AppInfo{}, err
	}
	if !a.Admin && a.User != owner {
		return AppInfo{}, &errs.Error{Code: errs.Forbidden, Reason: "not the owner",
			Message: "user " + a.User + " may create apps only under " + a.User + "/; the admin may create apps for anyone"}
	}
	if _, err := e.st.User(ctx, owner); errors.Is(err, store.ErrNotFound) {
		return AppInfo{}, errs.New(errs.NotFound, "owner %q is not a user; add it first with `handoff user add %s`", owner, owner)
	} else if err != nil {
		return AppInfo{}, internal(err)
	}
	if err := e.checkSiteLabel(ctx, owner, name); err != nil {
		return AppInfo{}, err
	}
	app, err := e.st.CreateApp(ctx, store.App{Owner: owner, Name: name, Public: public, Created: e.clock.Now()})
	if errors.Is(err, store.ErrExists) {
		return AppInfo{}, errs.New(errs.Exists, "app %q already exists; pick another name, or deploy to it with `handoff deploy --app %s DIR`", ref, ref)
	}
	if err != nil {
		return AppInfo{}, internal(err)
	}
	e.forgetApp(ref)
	return AppInfo{App: ref, Owner: app.Owner, Name: app.Name, Public: app.Public, Roles: []string{"owner"}, Signup: SignupClosed}, nil
}

// Apps lists the apps the actor can see: all for the admin, owned and
// member apps for others.
func (e *Engine) Apps(ctx context.Context, a Actor) ([]AppInfo, error) {
	if a.User == "" {
		return nil, errs.New(errs.Unauthorized, "listing apps needs a credential; pass a token (HANDOFF_TOKEN)")
	}
	all, err := e.st.Apps(ctx)
	if err != nil {
		return nil, internal(err)
	}
	out := []AppInfo{}
	for _, sa := range all {
		ref := sa.Owner + "/" + sa.Name
		if a.App != "" && a.App != ref {
			continue
		}
		st, err := e.app(ctx, ref)
		if err != nil {
			return nil, err
		}
		roles := append([]string(nil), st.roles[a.User]...)
		if st.isOwner(a) {
			roles = append([]string{"owner"}, roles...)
		}
		if len(roles) == 0 && !a.Admin {
			continue
		}
		out = append(out, AppInfo{App: ref, Owner: sa.Owner, Name: sa.Name, Public: sa.Public, Roles: roles, Origins: sa.Origins, Signup: st.signup()})
	}
	return out, nil
}

// AddMember gives user a role in the app. The owner and the admin manage
// members.
func (e *Engine) AddMember(ctx context.Context, a Actor, appRef, user, role string) error {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return err
	}
	if err := ValidRole(role); err != nil {
		return err
	}
	if err := validMember(user, appRef); err != nil {
		return err
	}
	if _, err := e.st.User(ctx, user); errors.Is(err, store.ErrNotFound) {
		if strings.Contains(user, "@") {
			return errs.New(errs.NotFound, "visitor %q has not signed up to %s", user, appRef)
		}
		return errs.New(errs.NotFound, "user %q does not exist; add it first with `handoff user add %s`", user, user)
	} else if err != nil {
		return internal(err)
	}
	if err := e.st.AddMember(ctx, app.ID, user, role); err != nil {
		return internal(err)
	}
	e.forgetApp(appRef)
	return nil
}

// RemoveMember takes a role from a user in the app ("" takes them all).
func (e *Engine) RemoveMember(ctx context.Context, a Actor, appRef, user, role string) error {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return err
	}
	err = store.ErrNotFound
	if validMember(user, appRef) == nil && (role == "" || ValidRole(role) == nil) {
		err = e.st.RemoveMember(ctx, app.ID, user, role)
	}
	if errors.Is(err, store.ErrNotFound) {
		return errs.New(errs.NotFound, "user %q has no such role in %s; list members with `handoff app member list --app %s`", user, appRef, appRef)
	}
	if err != nil {
		return internal(err)
	}
	e.forgetApp(appRef)
	return nil
}

// SetPublic opens the app to anonymous readers of its public channels,
// or closes it again.
func (e *Engine) SetPublic(ctx context.Context, a Actor, appRef string, public bool) error {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return err
	}
	if err := e.st.SetPublic(ctx, app.ID, public); err != nil {
		return internal(err)
	}
	e.forgetApp(appRef)
	return nil
}

// Member is one user's roles in an app.
type Member struct {
	User  string   `json:"user"`
	Roles []string `json:"roles"`
}

// Members lists an app's members and their roles.
func (e *Engine) Members(ctx context.Context, a Actor, appRef string) ([]Member, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return nil, err
	}
	if err := e.mayRead(a, app); err != nil {
		return nil, err
	}
	ms, err := e.st.Members(ctx, app.ID)
	if err != nil {
		return nil, internal(err)
	}
	out := []Member{}
	idx := map[string]int{}
	for _, m := range ms {
		i, ok := idx[m.User]
		if !ok {
			i = len(out)
			idx[m.User] = i
			out = append(out, Member{User: m.User})
		}
		out[i].Roles = append(out[i].Roles, m.Role)
	}
	return out, nil
}

func needAdmin(a Actor, what string) error {
	if a.User == "" {
		return errs.New(errs.Unauthorized, "only the admin may %s; pass the admin token (HANDOFF_TOKEN)", what)
	}
	return &errs.Error{Code: errs.Forbidden, Reason: "not the admin",
		Message: "only the admin may " + what + "; user " + a.User + " is not the admin"}
}

// BearerToken extracts the token from an Authorization header value.
func BearerToken(h string) string {
	if t, ok := strings.CutPrefix(h, "Bearer "); ok {
		return strings.TrimSpace(t)
	}
	return ""
}

// validMember checks a name that may be given a role in appRef: a
// server user's name, or the id of one of the app's own visitors.
func validMember(user, appRef string) error {
	if name, _, ok := strings.Cut(user, "@"); ok && ValidUserName(name) == nil && VisitorID(name, appRef) == user {
		return nil
	}
	if err := ValidUserName(user); err != nil {
		return errs.New(errs.Invalid, "member %q must be a user name (1-64 lowercase letters, digits or '-') or a visitor of %s (name@%s)", user, appRef, VisitorID("", appRef)[1:])
	}
	return nil
}
