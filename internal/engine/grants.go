package engine

import (
	"context"
	"slices"
	"strings"
	"sync"
)

// grantCache holds, per user, what the app's live documents grant them.
// A write that adds or removes grants clears it; reads refill it lazily.
type grantCache struct {
	mu    sync.Mutex
	users map[string]*userGrants
	// gen moves on every clear, so a read that began before a grant
	// changed cannot put its stale answer back into the cache.
	gen uint64
}

// userGrants is what one user may read, and the roles documents gave them.
type userGrants struct {
	channels map[string]bool
	roles    []string
}

func (c *grantCache) clear() {
	c.mu.Lock()
	c.users = nil
	c.gen++
	c.mu.Unlock()
}

// grantsFor computes the channels and the document-given roles of user
// (anonymous: ""), combining the store's live grants with the member
// roles of the app.
func (e *Engine) grantsFor(ctx context.Context, app *appState, user string) (*userGrants, error) {
	app.grants.mu.Lock()
	g := app.grants.users[user]
	gen := app.grants.gen
	app.grants.mu.Unlock()
	if g != nil {
		return g, nil
	}
	rows, err := e.st.GrantsFor(ctx, app.ID, user)
	if err != nil {
		return nil, internal(err)
	}
	g = &userGrants{channels: map[string]bool{}}
	if user != "" {
		for _, r := range rows {
			if r.Kind == "member" && r.Principal == user && !slices.Contains(g.roles, r.Channel) {
				g.roles = append(g.roles, r.Channel)
			}
		}
	}
	roles := app.rolesOf(user, g.roles)
	// public channels reach members, the app's own visitors (who signed
	// up on its page to use it), and everyone on a public app.
	public := app.Public || (user != "" && (user == app.Owner || len(roles) > 0 || app.isVisitor(user)))
	for _, r := range rows {
		switch r.Kind {
		case "public":
			if public {
				g.channels[r.Channel] = true
			}
		case "user":
			if user != "" && r.Principal == user {
				g.channels[r.Channel] = true
			}
		case "role":
			if slices.Contains(roles, r.Principal) {
				g.channels[r.Channel] = true
			}
		}
	}
	app.grants.mu.Lock()
	if app.grants.gen == gen {
		if app.grants.users == nil {
			app.grants.users = map[string]*userGrants{}
		}
		app.grants.users[user] = g
	}
	app.grants.mu.Unlock()
	return g, nil
}

// isVisitor reports whether user is one of the app's visitors: their ids
// end in "@<the app's site label>", which no server user's name can.
func (app *appState) isVisitor(user string) bool {
	return strings.HasSuffix(user, "@"+SiteLabel(app.Owner, app.Name))
}

// rolesOf merges a user's member roles with roles given by documents.
func (app *appState) rolesOf(user string, fromDocs []string) []string {
	if user == "" {
		return nil
	}
	roles := slices.Clone(app.roles[user])
	for _, r := range fromDocs {
		if !slices.Contains(roles, r) {
			roles = append(roles, r)
		}
	}
	return roles
}

// view is what one reader may see of one app.
type view struct {
	all      bool            // the admin and the owner read everything
	ungated  bool            // may read databases without an access function
	channels map[string]bool // channels granted in gated databases
}

// readView works out what a reads. It fails only when a may read nothing
// at all of the app.
func (e *Engine) readView(ctx context.Context, a Actor, app *appState) (*view, error) {
	// Handlers read every document of their app; the admin and the
	// owner read everything.
	if a.Admin || app.isOwner(a) || a.Handler != "" {
		return &view{all: true}, nil
	}
	if a.User == "" && !app.Public {
		return nil, e.mayRead(a, app)
	}
	g, err := e.grantsFor(ctx, app, a.User)
	if err != nil {
		return nil, err
	}
	// Members read ungated databases; anyone else only what documents
	// grant them (a role given by a document makes a member too). The
	// visitors of an app with an access function may read, if only what
	// it grants them: nothing granted yet is an empty answer, not a
	// refusal.
	member := app.isMember(a) || len(g.roles) > 0
	visitor := app.isVisitor(a.User) && app.code != nil && app.code.access != nil
	if !member && !app.Public && len(g.channels) == 0 && !visitor {
		return nil, e.mayRead(a, app)
	}
	return &view{ungated: member || app.Public, channels: g.channels}, nil
}

// sees reports whether the view may read a revision of db with channels.
func (v *view) sees(app *appState, db string, channels []string) bool {
	if v.all {
		return true
	}
	if app.gate(db) == nil {
		return v.ungated
	}
	for _, c := range channels {
		if v.channels[c] {
			return true
		}
	}
	return false
}
