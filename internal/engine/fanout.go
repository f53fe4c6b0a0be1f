package engine

import (
	"fmt"
	"sync"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
)

// fanOutIdle is how long a chain's count is kept after its last write.
// A chain quiet for that long may start over with a fresh budget.
const fanOutIdle = time.Hour

// fanOut keeps the budget of each chain of onChange writes: the writes
// that follow from one originating write (a client's, or a scheduled or
// fetch handler's), through onChange runs at any depth, share it. The
// loop guard bounds how deep a chain goes; a handler writing several
// documents per event multiplies its writes at each level, which only
// this bounds. Counts live on each server: a chain gets a fresh budget
// on a server that restarts, and one on each node that runs its events.
type fanOut struct {
	mu     sync.Mutex
	chains map[chainKey]*chain
	swept  time.Time
	// stopped counts, per app, the writes refused since this engine
	// started.
	stopped map[int64]int64
}

// chainKey names a chain by its app and the seq of the write it started
// from (store.EventSpec.Origin).
type chainKey struct{ app, origin int64 }

type chain struct {
	writes int
	last   time.Time
	told   bool // its refusal was logged
}

// spendFanOut takes one write from the budget of a's chain, or refuses
// the write once the budget is spent. Writes that are not part of a
// chain (a.Origin 0) cost nothing. A write taken that does not commit
// goes back with refundFanOut.
func (e *Engine) spendFanOut(app *appState, a Actor) error {
	if a.Origin == 0 {
		return nil
	}
	limit := appcode.DefaultFanOut
	if be := app.backend(); be != nil && be.Config().OnChange.FanOut > 0 {
		limit = be.Config().OnChange.FanOut
	}
	now := e.clock.Now()
	f := &e.fanOut
	f.mu.Lock()
	if f.chains == nil {
		f.chains, f.stopped = map[chainKey]*chain{}, map[int64]int64{}
	}
	if now.Sub(f.swept) > time.Minute {
		for k, c := range f.chains {
			if now.Sub(c.last) > fanOutIdle {
				delete(f.chains, k)
			}
		}
		f.swept = now
	}
	k := chainKey{app.ID, a.Origin}
	c := f.chains[k]
	if c == nil {
		c = &chain{}
		f.chains[k] = c
	}
	c.last = now
	if c.writes < limit {
		c.writes++
		f.mu.Unlock()
		return nil
	}
	f.stopped[app.ID]++
	tell := !c.told
	c.told = true
	f.mu.Unlock()
	if tell {
		e.appLog(app, "server", "warn", fmt.Sprintf("fan-out budget: the onChange writes that follow from the write at seq %d reached %d (config.onChange.fanOut); its further writes are refused with fan_out", a.Origin, limit),
			appcode.LogFields("origin", a.Origin, "fanOut", limit))
	}
	return errs.New(errs.FanOut, "the onChange runs that follow from the write at seq %d have made %d writes, the app's fan-out budget; this write is refused. "+
		"Write fewer documents per event, or raise config.onChange.fanOut in backend.js", a.Origin, limit)
}

// refundFanOut gives back a write taken by spendFanOut that did not
// commit.
func (e *Engine) refundFanOut(app *appState, a Actor) {
	if a.Origin == 0 {
		return
	}
	f := &e.fanOut
	f.mu.Lock()
	if c := f.chains[chainKey{app.ID, a.Origin}]; c != nil && c.writes > 0 {
		c.writes--
	}
	f.mu.Unlock()
}

// forgetChain gives the chain starting at origin a fresh budget: a dead
// event replayed starts a chain of its own.
func (e *Engine) forgetChain(appID, origin int64) {
	e.fanOut.mu.Lock()
	delete(e.fanOut.chains, chainKey{appID, origin})
	e.fanOut.mu.Unlock()
}

// fanOutStopped is the app's count of writes refused.
func (e *Engine) fanOutStopped(appID int64) int64 {
	e.fanOut.mu.Lock()
	defer e.fanOut.mu.Unlock()
	return e.fanOut.stopped[appID]
}
