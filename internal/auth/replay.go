package auth

import (
	"sync"
	"time"
)

// Replays remembers the tokens seen within their lifetime, so each signed
// token is accepted once. Entries older than twice the lifetime can no
// longer pass the freshness check and are dropped.
type Replays struct {
	mu   sync.Mutex
	seen map[string]time.Time
	last time.Time
}

// Fresh records key at now and reports whether it was not seen before.
func (r *Replays) Fresh(key string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]time.Time{}
	}
	if now.Sub(r.last) > TokenLifetime {
		for k, t := range r.seen {
			if now.Sub(t) > 2*TokenLifetime {
				delete(r.seen, k)
			}
		}
		r.last = now
	}
	if _, dup := r.seen[key]; dup {
		return false
	}
	r.seen[key] = now
	return true
}
