package runner

import (
	"maps"
	"slices"

	"github.com/handoff-run/handoff/store"
)

// Leases of claimed events (docs/architecture.md, "backend.js and delivery"): a claim holds each event for
// eventLease, and while this node holds any event of the app, a timer
// renews them all every renewEvery with one store call. The timer runs on
// the engine's clock and only while events are held.

// hold records claimed events until they are settled, and starts the
// renewals.
func (ar *appRunner) hold(evs []store.Event) {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.held == nil {
		ar.held, ar.heldDocs = map[int64]docKey{}, map[docKey]int{}
	}
	for _, ev := range evs {
		doc := docKey{ev.Rev.DB, ev.Rev.ID}
		if _, ok := ar.held[ev.Seq]; !ok {
			ar.heldDocs[doc]++
		}
		ar.held[ev.Seq] = doc
	}
	if len(ar.held) > 0 && ar.renewal == nil && ar.r.ctx.Err() == nil {
		ar.renewal = ar.r.clock.AfterFunc(renewEvery, ar.renew)
	}
}

// release forgets a held event: settled, or no longer this node's. The
// renewals stop with the last one.
func (ar *appRunner) release(seq int64) {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if doc, ok := ar.held[seq]; ok {
		delete(ar.held, seq)
		if ar.heldDocs[doc]--; ar.heldDocs[doc] <= 0 {
			delete(ar.heldDocs, doc)
		}
	}
	if len(ar.held) == 0 && ar.renewal != nil {
		ar.renewal.Stop()
		ar.renewal = nil
	}
}

// stopRenewals ends the renewals when the deliverer stops: the leases
// then run out, and the events go to whichever node claims them next.
func (ar *appRunner) stopRenewals() {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.renewal != nil {
		ar.renewal.Stop()
		ar.renewal = nil
	}
}

// renew moves the end of every held lease to eventLease from now.
func (ar *appRunner) renew() {
	e, ctx := ar.r, ar.r.ctx
	ar.mu.Lock()
	seqs := slices.Sorted(maps.Keys(ar.held))
	ar.mu.Unlock()
	if len(seqs) > 0 && ctx.Err() == nil {
		if err := e.st.RenewEvents(ctx, ar.id, seqs, e.clock.Now().Add(eventLease)); err != nil && ctx.Err() == nil {
			// The next renewal may make it; meanwhile the leases may run
			// out, and another node deliver the events too: at least once.
			e.log.Error("renewing onChange leases", "app", ar.ref, "events", len(seqs), "err", err)
		}
	}
	ar.mu.Lock()
	defer ar.mu.Unlock()
	ar.renewal = nil
	if len(ar.held) > 0 && ctx.Err() == nil {
		ar.renewal = e.clock.AfterFunc(renewEvery, ar.renew)
	}
}
