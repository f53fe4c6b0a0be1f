package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/store"
)

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
	if err := a.Scoped(""); err != nil {
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
		// The app's members, not its state: loading that compiles the
		// app's code, and a list of thousands of apps must not.
		members, err := e.rolesOf(ctx, sa)
		if err != nil {
			return nil, err
		}
		st := &appState{App: sa, roles: members}
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

// AdminApp is the app appRef names, when a may manage it (its owner or
// the admin): for operations on the app outside the engine, such as
// moving it to another database.
func (e *Engine) AdminApp(ctx context.Context, a Actor, appRef string) (store.App, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return store.App{}, err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return store.App{}, err
	}
	return app.App, nil
}

// rolesOf is the app's members' roles: from the app's loaded state when
// it is loaded, else from the store, without loading the app.
func (e *Engine) rolesOf(ctx context.Context, sa store.App) (map[string][]string, error) {
	e.mu.RLock()
	st := e.apps[sa.Owner+"/"+sa.Name]
	e.mu.RUnlock()
	if st != nil {
		return st.roles, nil
	}
	return e.storedRoles(ctx, sa.ID)
}

// storedRoles reads the app's members' roles from the store.
func (e *Engine) storedRoles(ctx context.Context, appID int64) (map[string][]string, error) {
	members, err := e.st.Members(ctx, appID)
	if err != nil {
		return nil, internal(err)
	}
	roles := map[string][]string{}
	for _, m := range members {
		roles[m.User] = append(roles[m.User], m.Role)
	}
	return roles, nil
}

// LoadedApps is how many apps have their state (and code) in memory: the
// ones used since they last changed. A listing loads none.
func (e *Engine) LoadedApps() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.apps)
}
