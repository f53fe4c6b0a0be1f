package engine

import (
	"context"
	"sync"
	"sync/atomic"
)

// A request is authenticated once, when it arrives; a live feed then
// stays open for hours with the actor it was opened as. So every open
// feed is registered here, and whatever may take its reader's right away
// makes the feeds it concerns check again (Feed.check): a credential
// revoked (a sign-out, a token replaced, a device revoked, a user or
// visitor removed), here or on another node (store.RevocationAnnouncer),
// or a change of the app's members or settings.
//
// On this node the check comes before any change committed after the
// revocation: each user has a generation, moved before the credential is
// removed from the store, and a feed whose user's generation moved checks
// before its next page. Word from another node arrives within
// milliseconds; a word lost on the way (a dropped listening connection)
// is made up for by a check every few heartbeats (Feed.scan).

// openFeeds is the set of the engine's open feeds, by user and by app.
type openFeeds struct {
	mu     sync.Mutex
	byUser map[string]map[*Feed]struct{}
	byApp  map[int64]map[*Feed]struct{}
	byRef  map[string]map[*Feed]struct{}
	// gens holds each user's revocation generation (*atomic.Uint64);
	// entries are kept, one word per user that ever had a feed or a
	// revocation.
	gens sync.Map
}

// gen returns user's revocation generation.
func (o *openFeeds) gen(user string) *atomic.Uint64 {
	if g, ok := o.gens.Load(user); ok {
		return g.(*atomic.Uint64)
	}
	g, _ := o.gens.LoadOrStore(user, new(atomic.Uint64))
	return g.(*atomic.Uint64)
}

func addTo[K comparable](m *map[K]map[*Feed]struct{}, k K, f *Feed) {
	if *m == nil {
		*m = map[K]map[*Feed]struct{}{}
	}
	if (*m)[k] == nil {
		(*m)[k] = map[*Feed]struct{}{}
	}
	(*m)[k][f] = struct{}{}
}

func removeFrom[K comparable](m map[K]map[*Feed]struct{}, k K, f *Feed) {
	delete(m[k], f)
	if len(m[k]) == 0 {
		delete(m, k)
	}
}

func (o *openFeeds) add(f *Feed) {
	o.mu.Lock()
	addTo(&o.byUser, f.actor.User, f)
	addTo(&o.byApp, f.appID, f)
	addTo(&o.byRef, f.ref, f)
	o.mu.Unlock()
}

func (o *openFeeds) remove(f *Feed) {
	o.mu.Lock()
	removeFrom(o.byUser, f.actor.User, f)
	removeFrom(o.byApp, f.appID, f)
	removeFrom(o.byRef, f.ref, f)
	o.mu.Unlock()
}

// wake asks feeds to check their reader again.
func wake(fs map[*Feed]struct{}) {
	for f := range fs {
		select {
		case f.recheck <- struct{}{}:
		default: // a check is pending already
		}
	}
}

// wakeUser wakes the feeds of user; "" wakes every feed (word of some
// revocations may have been lost).
func (o *openFeeds) wakeUser(user string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if user != "" {
		wake(o.byUser[user])
		return
	}
	for _, fs := range o.byUser {
		wake(fs)
	}
}

// wakeApp wakes the feeds of an app, by id or by "owner/name".
func (o *openFeeds) wakeApp(appID int64, ref string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	wake(o.byApp[appID])
	wake(o.byRef[ref])
}

// revoking runs revoke, which takes a credential of user away, and tells
// the feeds of user on every node.
func (e *Engine) revoking(ctx context.Context, user string, revoke func() error) error {
	g := e.open.gen(user)
	g.Add(1) // before the store: no page after the removal skips a check
	err := revoke()
	if err != nil {
		return err
	}
	e.revoked(ctx, user)
	return nil
}

// revoked tells the feeds of user, here and on the other nodes, that a
// credential of user was revoked.
func (e *Engine) revoked(ctx context.Context, user string) {
	e.revokedHere(user)
	if r := e.caps.Revocations; r != nil {
		if err := r.AnnounceRevoked(context.WithoutCancel(ctx), user); err != nil {
			// The other nodes' feeds still find out within a few heartbeats.
			e.log.Warn("could not tell the other nodes of a revoked credential", "user", user, "err", err)
		}
	}
}

// revokedHere moves user's generation and wakes user's feeds on this
// node; "" does so for every user.
func (e *Engine) revokedHere(user string) {
	if user == "" {
		e.open.gens.Range(func(_, g any) bool { g.(*atomic.Uint64).Add(1); return true })
	} else {
		e.open.gen(user).Add(1)
	}
	e.open.wakeUser(user)
}
