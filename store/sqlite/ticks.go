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
}

// AcquireTick gives the tick planned at planned to the first node that
// asks for it; see store.Events.
func (s *Store) AcquireTick(ctx context.Context, appID int64, planned time.Time, node string) (bool, error) {
	s.ticks.Lock()
	defer s.ticks.Unlock()
	if s.ticks.apps == nil {
		s.ticks.apps = map[int64]tickLease{}
	}
	l, ok := s.ticks.apps[appID]
	if ok && !l.planned.Before(planned) && !(l.planned.Equal(planned) && l.node == node) {
		return false, nil
	}
	s.ticks.apps[appID] = tickLease{planned: planned, node: node}
	return true, nil
}
