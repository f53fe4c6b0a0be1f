package runner

import (
	"context"
	"sync"
	"time"

	"github.com/handoff-run/handoff/clock"
)

// tickHold is how far past its last renewal a running tick holds the
// app's schedule on a shared database. A tick renews its hold every
// renewEvery while it runs, so a node that dies mid-tick holds the
// schedule (and with it the app's lease sweep) for about tickHold, not
// for the run limit, which is 15 minutes unless the app says otherwise.
const tickHold = eventLease

// tickRenewal renews the hold of one running tick until stopped.
type tickRenewal struct {
	ar      *appRunner
	planned time.Time
	mu      sync.Mutex
	timer   clock.Timer // nil once stopped
}

// renewTickHold starts renewing the hold of the tick planned at planned,
// which this node has, if other nodes share the store's ticks: alone, a
// node needs no hold past its own life.
func (ar *appRunner) renewTickHold(planned time.Time) *tickRenewal {
	tr := &tickRenewal{ar: ar, planned: planned}
	if ar.r.caps.SharedTicks {
		tr.timer = ar.r.clock.AfterFunc(renewEvery, tr.renew)
	}
	return tr
}

func (tr *tickRenewal) renew() {
	e, ar := tr.ar.r, tr.ar
	// Held through the store call, so that stop waits for a renewal in
	// flight: none may move the hold on after the tick released it.
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.timer == nil || e.ctx.Err() != nil {
		return
	}
	// Asking again for the tick this node has moves its hold on
	// (store.Events.AcquireTick).
	ctx, cancel := context.WithTimeout(e.ctx, renewEvery)
	defer cancel()
	ok, err := e.st.AcquireTick(ctx, ar.id, tr.planned, e.node, e.clock.Now().Add(tickHold))
	switch {
	case err != nil && e.ctx.Err() == nil:
		// The next renewal may make it; meanwhile the hold may lapse, and
		// another node tick beside this one.
		e.log.Error("renewing a scheduled tick's hold", "app", ar.ref, "err", err)
	case err == nil && !ok:
		e.log.Error("a scheduled tick outlived its hold: another node has taken a later tick", "app", ar.ref)
		tr.timer = nil
		return
	}
	tr.timer = e.clock.AfterFunc(renewEvery, tr.renew)
}

// stop ends the renewals, once any in flight is done: the tick has
// ended.
func (tr *tickRenewal) stop() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.timer != nil {
		tr.timer.Stop()
		tr.timer = nil
	}
}
