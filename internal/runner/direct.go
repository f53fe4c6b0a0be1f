package runner

import (
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// Direct hand-off: on a store across the network (store.Capabilities
// CommitClaims), a write whose app has room on this node (a free onChange
// slot, or a place on the waiting list: waiting.go) asks its Commit to
// claim its event too. The event then runs as soon as the commit returns,
// or as soon as a slot frees, with no claim between them, which on
// PostgreSQL is a transaction of its own. Everything else about the event
// is as if the deliverer had claimed it: the same lease, renewals and
// settlement, and the store still holds a document's later events back
// until it settles.

// Slot is a run slot reserved for a write's event before its commit.
type Slot struct {
	ar      *appRunner
	version int    // the code version whose runs the slot joins
	doc     docKey // the document written
}

// Reserve takes room in app's runner for w's event and asks the commit
// to claim it; nil when there is none to take, or no reason to.
func (r *Runner) Reserve(app App, w *store.Write) *Slot {
	if r == nil || w.Event == nil || !r.caps.CommitClaims || w.Event.NextAt.After(r.clock.Now()) {
		return nil
	}
	be := app.Backend
	if be == nil || !be.Has(appcode.OnChange) {
		return nil
	}
	cfg := be.Config().OnChange
	if cfg.Concurrency <= 1 {
		return nil // strict order: the exclusive claim decides
	}
	ar := r.ensure(app)
	ar.mu.Lock()
	defer ar.mu.Unlock()
	doc := docKey{w.DB, w.ID}
	if ar.runs == nil || ar.version != app.Version || !ar.fits(cfg.Concurrency) {
		ar.toOutbox(doc) // its event goes to the outbox unclaimed
		return nil
	}
	ar.reserved++
	w.Event.ClaimUntil = r.clock.Now().Add(eventLease)
	return &Slot{ar: ar, version: ar.version, doc: doc}
}

// Cancel gives the slot back: the commit failed or did not claim.
func (s *Slot) Cancel() {
	if s == nil {
		return
	}
	s.ar.mu.Lock()
	s.ar.reserved--
	s.ar.toOutbox(s.doc) // an event committed unclaimed, if any, is in the outbox
	s.ar.mu.Unlock()
	if s.ar.r.ctx.Err() == nil { // no deliverer is left to take it
		s.ar.r.signal(s.ar.wake)
	}
}

// Start runs the event the commit of w claimed (seq; head is the revision
// it replaced) in the reserved slot. committed is when the commit
// returned, for Options.OnDelivery.
func (s *Slot) Start(app App, w *store.Write, head *store.Doc, seq int64, committed time.Time) {
	ar := s.ar
	ev := committedEvent(app, w, head, seq)
	ar.hold([]store.Event{ev})
	ar.mu.Lock()
	ctx, live := ar.runs, ar.version == s.version && s.version == app.Version
	if ar.r.observe != nil {
		if ar.committed == nil {
			ar.committed = map[int64]time.Time{}
		}
		ar.committed[seq] = committed
	}
	ar.mu.Unlock()
	if !live {
		// A deploy went live since the slot was taken: the event goes
		// back, and the deliverer runs it with the new code.
		s.Cancel()
		if !ar.r.track(1) {
			ar.r.settle(ar, ev, giveBack(ev))
			return
		}
		ar.r.working(1)
		go func() { defer ar.r.wg.Done(); defer ar.r.done(1); ar.r.settle(ar, ev, giveBack(ev)) }()
		return
	}
	ar.admit(waitingRun{ctx: ctx, app: app, be: app.Backend, ev: ev, version: s.version}, app.Backend.Config().OnChange.Concurrency, true)
}

// committedEvent is the event of w, committed at seq, as a claim would
// read it back.
func committedEvent(app App, w *store.Write, head *store.Doc, seq int64) store.Event {
	ev := store.Event{AppID: app.ID, Seq: seq, Depth: w.Event.Depth, Origin: w.Event.Origin, NextAt: w.Event.NextAt, Started: true,
		Rev: store.Revision{Doc: store.Doc{DB: w.DB, ID: w.ID, Rev: w.Rev, Deleted: w.Deleted, Body: w.Body, Seq: seq, Time: w.Time,
			Channels: w.Channels}, Writer: w.Writer, Path: w.Path}}
	if head != nil && !head.Deleted {
		ev.Old = &store.Revision{Doc: store.Doc{DB: w.DB, ID: w.ID, Rev: head.Rev, Body: head.Body, Seq: head.Seq, Time: head.Time,
			Channels: head.Channels}}
	}
	return ev
}

// committedAt takes the moment the commit of a directly handed event
// returned, if it was noted.
func (ar *appRunner) committedAt(seq int64) (time.Time, bool) {
	ar.mu.Lock()
	defer ar.mu.Unlock()
	t, ok := ar.committed[seq]
	delete(ar.committed, seq)
	return t, ok
}
