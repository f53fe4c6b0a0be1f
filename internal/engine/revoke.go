package engine

import (
	"context"
	"sync"
)

// A request is authenticated once, when it arrives; a live feed then
// stays open for hours with the actor it was opened as. So every open
// feed is registered here, and whatever may take its reader's right away
// wakes the feeds it concerns to check again (Feed.check): a credential
// revoked (a sign-out, a token replaced, a device revoked, a user or
// visitor removed), here or on another node (store.RevocationAnnouncer),
// or a change of the app's members or settings. A feed whose reader lost
// its right ends with that error. Feeds also check at every heartbeat,
// which catches a word from another node that never arrived.

// openFeeds is the set of the engine's open feeds.
type openFeeds struct {
	mu  sync.Mutex
	all map[*Feed]struct{}
}

func (o *openFeeds) add(f *Feed) {
	o.mu.Lock()
	if o.all == nil {
		o.all = map[*Feed]struct{}{}
	}
	o.all[f] = struct{}{}
	o.mu.Unlock()
}

func (o *openFeeds) remove(f *Feed) {
	o.mu.Lock()
	delete(o.all, f)
	o.mu.Unlock()
}

// wake asks the feeds that match to check their reader again.
func (o *openFeeds) wake(match func(f *Feed) bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for f := range o.all {
		if match(f) {
			select {
			case f.recheck <- struct{}{}:
			default: // a check is pending already
			}
		}
	}
}

// revoked is told that a credential of user was revoked on this node:
// its feeds here check at once, and the other nodes are told.
func (e *Engine) revoked(ctx context.Context, user string) {
	e.revokedHere(user)
	if r := e.caps.Revocations; r != nil {
		if err := r.AnnounceRevoked(context.WithoutCancel(ctx), user); err != nil {
			// The other nodes' feeds still find out at their next heartbeat.
			e.log.Warn("could not tell the other nodes of a revoked credential", "user", user, "err", err)
		}
	}
}

// revokedHere wakes this node's feeds of user.
func (e *Engine) revokedHere(user string) {
	e.open.wake(func(f *Feed) bool { return f.actor.User == user })
}
