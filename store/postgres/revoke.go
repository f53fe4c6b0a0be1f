package postgres

import "context"

// A revoked credential (a token signed out or replaced, a device revoked,
// a user removed) must end the live feeds it opened on every node, not
// only the feeds of the node that revoked it. Nothing in the database
// changes that the watcher's poll could see, so the word travels by
// NOTIFY alone; a node that misses it (its listening connection dropped)
// still finds the credential gone at its feeds' next heartbeat.

// revokedPrefix marks a revocation's payload: "u:" and the user's name.
const revokedPrefix = "u:"

// AnnounceRevoked tells every node, this one included, that a credential
// of user was revoked.
func (s *Store) AnnounceRevoked(ctx context.Context, user string) error {
	_, err := s.pool.Exec(ctx, `SELECT pg_notify('`+notifyChannel+`', $1)`, revokedPrefix+user)
	return err
}

// WatchRevoked registers fn to hear of each AnnounceRevoked, by any node.
func (s *Store) WatchRevoked(fn func(user string)) {
	s.watch.mu.Lock()
	s.watch.revoked = append(s.watch.revoked, fn)
	s.watch.mu.Unlock()
}

func (w *watcher) tellRevoked(user string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, fn := range w.revoked {
		fn(user)
	}
}
