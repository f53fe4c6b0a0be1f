package runner

import (
	"context"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// The waiting list (docs/architecture.md, "backend.js and delivery"): a
// node takes up to concurrency more of an app's events than it has run
// slots, from its own commits (direct.go) and in whole batches from the
// outbox (delivery.go). They wait on the node, oldest first, and each run
// that ends takes the next one into its slot. Without it, a node whose
// slots are all taken leaves each new event in the outbox, and claims it
// back alone when a slot frees: on PostgreSQL a transaction per event,
// the most expensive way an event can reach its handler. Waiting events
// are held like any claimed event (their leases are renewed), so a node
// that dies with events waiting counts them as interrupted runs, as it
// does its runs in flight.

// waitingRun is an event claimed for this node that waits for a slot.
type waitingRun struct {
	ctx     context.Context // the runs' context of version
	app     App
	be      appcode.Backend
	ev      store.Event
	version int
}

// wholeBatch is the least room worth a claim with every slot taken: a
// batch, or the concurrency when that is smaller, since the room never
// grows past it.
func wholeBatch(concurrency int) int { return min(batchSize, concurrency) }

// room is how many more events this node may take for the app: its free
// slots and the waiting list's free places. Called under ar.mu.
func (ar *appRunner) room(concurrency int) int {
	return 2*concurrency - ar.inflight - ar.reserved - len(ar.waiting)
}

// fits reports whether a commit may claim its event for this node: into
// a free slot, or onto the waiting list while no event may be due in the
// outbox ahead of it. Called under ar.mu.
func (ar *appRunner) fits(concurrency int) bool {
	if ar.inflight+ar.reserved+len(ar.waiting) < concurrency {
		return true
	}
	return !ar.backlog && ar.room(concurrency) > 0
}

// markBacklog notes that an event may be due in the outbox, unclaimed: a
// commit left it there (toOutbox, Poke), a settlement made it due
// (settled), or a retry or the poll came due (dueAgain). Until a claim
// shows the outbox has caught up, commits take free slots only, so the
// events they claim do not go ahead of it in the waiting list. Called
// under ar.mu.
func (ar *appRunner) markBacklog() {
	ar.backlog = true
	ar.backlogGen++
}

// maxBehind bounds behind. An entry whose event another node took, or
// whose commit failed, stays until the next settlement of its document
// here; past the bound the map starts over, and an event it forgot waits
// for the poll.
const maxBehind = 4096

// toOutbox marks the backlog for an event of doc that a commit of this
// node leaves in the outbox, and notes it as behind the document's
// event that this node holds, if it holds one. Called under ar.mu.
func (ar *appRunner) toOutbox(doc docKey) {
	ar.markBacklog()
	if ar.heldDocs[doc] == 0 {
		return
	}
	if len(ar.behind) >= maxBehind {
		ar.behind = nil
	}
	if ar.behind == nil {
		ar.behind = map[docKey]bool{}
	}
	ar.behind[doc] = true
}

// settled marks the backlog for what a settlement of an event of doc
// makes due: the document's next event, left in the outbox behind it, or
// the event itself, given back.
func (ar *appRunner) settled(doc docKey, givenBack bool) {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.behind[doc] || givenBack {
		delete(ar.behind, doc)
		ar.markBacklog()
	}
}

// dueAgain marks the backlog for an event that falls due in the outbox
// with no commit to tell: a retry after its backoff, or any the poll finds.
func (ar *appRunner) dueAgain() {
	ar.mu.Lock()
	ar.markBacklog()
	ar.mu.Unlock()
}

// caughtUp clears the backlog after a claim that took fewer events than
// it asked for, unless an event may have gone to the outbox since the
// claim began (gen).
func (ar *appRunner) caughtUp(gen uint64) {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if ar.backlogGen == gen {
		ar.backlog = false
	}
}

// admit starts w's run in a free slot, or puts it on the waiting list
// when every slot is taken. reserved: w's commit reserved a slot for it
// (direct.go), which it gives back either way. The count and the choice
// are one step, so concurrent admits never run more than concurrency.
func (ar *appRunner) admit(w waitingRun, concurrency int, reserved bool) {
	if !ar.r.track(1) { // the server is stopping
		if reserved {
			ar.mu.Lock()
			ar.reserved--
			ar.mu.Unlock()
		}
		ar.giveBackUnrun([]store.Event{w.ev})
		return
	}
	ar.mu.Lock()
	if reserved {
		ar.reserved--
	}
	if ar.inflight >= concurrency {
		// A run is in flight: it takes w when it ends (nextWaiting).
		ar.waiting = append(ar.waiting, w)
		ar.mu.Unlock()
		ar.r.wg.Done()
		return
	}
	ar.inflight++
	version := ar.started()
	ar.mu.Unlock()
	ar.launch(w.ctx, w.app, w.be, []store.Event{w.ev}, version)
}

// nextWaiting takes the oldest waiting event into the slot of a run that
// has ended. With none waiting, the slot is freed: ok is false. starved
// reports whether the deliverer wants to be woken.
func (ar *appRunner) nextWaiting(concurrency int) (w waitingRun, ok, starved bool) {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	if len(ar.waiting) > 0 {
		w = ar.waiting[0]
		ar.waiting[0] = waitingRun{}
		ar.waiting = ar.waiting[1:]
		if len(ar.waiting) == 0 {
			ar.waiting = nil // let the backing array go
		}
		// A deliverer that found no room for a batch looks again once
		// there is.
		starved = ar.starved && ar.room(concurrency) >= wholeBatch(concurrency)
		if starved {
			ar.starved = false
		}
		return w, true, starved
	}
	ar.inflight--
	starved = ar.starved
	ar.starved = false
	return waitingRun{}, false, starved
}
