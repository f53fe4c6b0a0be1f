package sqlite

import (
	"context"
	"sync"
	"time"
)

// tickLeases are AcquireTick's leases. One process owns a SQLite file, so
// they live in memory, like event leases.
type tickLeases struct {
	sync.Mutex
	apps map[int64]tickLease
}

type tickLease struct {
	planned time.Time
	node    string
	hold    time.Time // zero once released
}

// AcquireTick gives the tick planned at planned to the first node that
// asks for it, unless an earlier tick still holds; see store.Events.
func (s *Store) AcquireTick(ctx context.Context, appID int64, planned time.Time, node string, hold time.Time) (bool, error) {
	s.ticks.Lock()
	defer s.ticks.Unlock()
	if s.ticks.apps == nil {
		s.ticks.apps = map[int64]tickLease{}
	}
	l, ok := s.ticks.apps[appID]
	switch {
	case !ok:
	case l.planned.Equal(planned) && l.node == node:
	case l.planned.Before(planned) && !l.hold.After(planned):
	default:
		return false, nil
	}
	s.ticks.apps[appID] = tickLease{planned: planned, node: node, hold: hold}
	return true, nil
}

// ReleaseTick ends the hold of a tick; see store.Events.
func (s *Store) ReleaseTick(ctx context.Context, appID int64, planned time.Time, node string) error {
	s.ticks.Lock()
	defer s.ticks.Unlock()
	if l, ok := s.ticks.apps[appID]; ok && l.planned.Equal(planned) && l.node == node {
		l.hold = time.Time{}
		s.ticks.apps[appID] = l
	}
	return nil
}
