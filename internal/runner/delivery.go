package runner

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/workers"
	"github.com/handoff-run/handoff/store"
)

// Delivery of onChange (docs/architecture.md, "backend.js and delivery"): events are
// claimed in commit order, up to batchSize at a time, and each runs in a
// slot of its own, up to config.onChange.concurrency at once per app on
// this node. The store hands out only the earliest live event of each
// document, so a document's events run one at a time in commit order on
// any node, and a slow or hung run holds back only its own document.
// With concurrency 1 an exclusive claim takes the app's due events in
// commit order while nothing else runs anywhere, and they run one after
// another in the one slot.
const (
	batchSize = 10
	// eventLease is how long a claim holds an event. The leases of the
	// events this node holds are renewed every renewEvery while it lives,
	// however long their runs take (the run limit is apart), so the events
	// of a node that dies come back within about a lease.
	eventLease = 30 * time.Second
	renewEvery = 10 * time.Second
	// pollEvery is a safety net under the wake-ups: a missed signal costs
	// at most this much delay, never a lost event.
	pollEvery = 2 * time.Second
	// Retries back off from firstBackoff, doubling, up to maxBackoff.
	firstBackoff = 10 * time.Second
	maxBackoff   = 10 * time.Minute
)

// backoff is the wait before delivery attempt n+1 after n failures, with
// ±10% jitter so a burst of failures does not retry in lockstep.
func backoff(failures int) time.Duration {
	d := firstBackoff
	for i := 1; i < failures && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, maxBackoff)
	return time.Duration(float64(d) * (0.9 + 0.2*rand.Float64()))
}

func (ar *appRunner) deliver() {
	e, ctx := ar.r, ar.r.ctx
	retry := make(chan struct{}, 1)
	var timer clock.Timer
	every := e.poll
	poll := time.NewTicker(every)
	defer poll.Stop()
	defer ar.stopRenewals()
	defer func() {
		if ar.stopOld != nil {
			ar.stopOld()
		}
	}()
	woken := 1 // signals whose look this is, the first counted by ensure (work.go)
	for {
		app, be, err := ar.current()
		if err == nil {
			ar.follow(app)
		}
		if err == nil && be != nil && be.Has(appcode.OnChange) {
			// Sleep until the next retry falls due, unless woken first.
			// While every slot is taken there is nothing to look up: the
			// end of a batch wakes this loop, which looks then.
			if busy := ar.claim(app, be); !busy {
				if timer != nil {
					timer.Stop()
					timer = nil
				}
				if at, ok, err := e.st.NextEventDue(ctx, ar.id); err == nil && ok {
					if d := at.Sub(e.clock.Now()); d > 0 {
						timer = e.clock.AfterFunc(d, func() { e.signal(retry) })
					}
				}
			}
		}
		e.done(woken)
		woken = 0
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-ar.wake:
			woken++
		case <-retry:
			woken++
			ar.dueAgain()
		case <-poll.C:
			ar.dueAgain()
		}
	}
}

// follow keeps the runs' context with the app's live code. A deploy or
// a rollback stops the runs of the version it replaces, however long
// their run limit: that code is no longer the app's. Their events go
// back and run again with the new code (deliverOne).
func (ar *appRunner) follow(app App) {
	if ar.runs != nil && ar.version == app.Version {
		return
	}
	ar.mu.Lock()
	ar.stopping(ar.version)
	ar.mu.Unlock()
	if ar.stopOld != nil {
		ar.stopOld()
	}
	ar.mu.Lock()
	ar.version = app.Version
	ar.runs, ar.stopOld = context.WithCancel(ar.r.ctx)
	ar.mu.Unlock()
}

// claim starts runs while there are free slots and due events, and
// fills the waiting list in whole batches (waiting.go). It reports busy
// when it stopped because there is no room for a batch.
func (ar *appRunner) claim(app App, be appcode.Backend) (busy bool) {
	e, ctx := ar.r, ar.r.ctx
	cfg := be.Config().OnChange
	exclusive := cfg.Concurrency == 1
	for {
		ar.mu.Lock()
		slots := cfg.Concurrency - ar.inflight - ar.reserved
		var want int
		switch {
		case exclusive:
			// Strict commit order: nothing while another node runs an
			// event; the batch runs in the one slot.
			if slots > 0 {
				want = batchSize
			}
		case slots > 0 || ar.room(cfg.Concurrency) >= wholeBatch(cfg.Concurrency):
			// With every slot taken only a whole batch is worth a claim:
			// it waits, rather than each event being claimed alone when
			// a slot frees.
			want = min(ar.room(cfg.Concurrency), batchSize)
		}
		// Set in the same critical section as the count is read: a run
		// ending after it wakes the loop.
		ar.starved = want == 0
		gen := ar.backlogGen
		ar.mu.Unlock()
		if want == 0 || ctx.Err() != nil {
			return want == 0
		}
		// Commits may take room while the claim is out, so the list can
		// pass its bound by up to a batch; what runs never passes the
		// concurrency (admit). Holding the room for the claim instead
		// would turn commits away from free slots at every claim.
		// Every event of a shared claim starts at once or waits on this
		// node for a slot, so the claim may mark the runs begun itself
		// (deliverOne).
		evs, err := e.st.ClaimEvents(ctx, store.Claim{AppID: ar.id, Now: e.clock.Now(), Limit: want, Lease: eventLease,
			Exclusive: exclusive, Start: !exclusive})
		if err != nil {
			if ctx.Err() == nil { // not just the server stopping
				e.log.Error("claiming onChange events", "app", ar.ref, "err", err)
			}
			return false
		}
		short := len(evs) < want
		if short {
			ar.caughtUp(gen)
		}
		if len(evs) == 0 {
			return false
		}
		ar.hold(evs)
		evs = ar.interrupted(app, be, evs)
		if exclusive {
			ar.run(ar.runs, app, be, evs)
		} else {
			ar.mu.Lock()
			runs, version := ar.runs, ar.version
			ar.mu.Unlock()
			for _, ev := range evs {
				ar.admit(waitingRun{ctx: runs, app: app, be: be, ev: ev, version: version}, cfg.Concurrency, false)
			}
		}
		if short {
			// Nothing else is due (see store.Events): a claim now would
			// come back empty. A commit since wakes the loop again.
			return false
		}
	}
}

// run delivers the events of an exclusive claim in the one slot, one
// after another in seq order, until ctx ends (deliverAll).
func (ar *appRunner) run(ctx context.Context, app App, be appcode.Backend, evs []store.Event) {
	if len(evs) == 0 {
		return
	}
	if !ar.r.track(1) { // the server is stopping
		ar.giveBackUnrun(evs)
		return
	}
	ar.mu.Lock()
	ar.inflight++
	version := ar.started()
	ar.mu.Unlock()
	ar.launch(ctx, app, be, evs, version)
}

// launch runs evs in a slot already counted in inflight, for version,
// then the waiting events that the slot passes to (waiting.go).
func (ar *appRunner) launch(ctx context.Context, app App, be appcode.Backend, evs []store.Event, version int) {
	workers.Go(func() {
		defer ar.r.wg.Done()
		ar.deliverAll(ctx, app, be, evs)
		gaveBack := false
		for {
			w, ok, starved := ar.nextWaiting(be.Config().OnChange.Concurrency)
			if starved {
				ar.r.signal(ar.wake)
			}
			if !ok {
				// A claim that stopped for want of room left events
				// behind, or a deploy gave them back; retries set their
				// own wake-ups.
				if (gaveBack || ctx.Err() != nil) && ar.r.ctx.Err() == nil {
					ar.r.signal(ar.wake)
				}
				ar.ended(version) // after the signal: the wake-up takes over
				return
			}
			if w.ctx.Err() != nil {
				// A deploy since it was taken, or the server stopping:
				// it goes back, and runs with the code that is live.
				ar.giveBackUnrun([]store.Event{w.ev})
				gaveBack = true
				continue
			}
			if w.version != version {
				// Taken for code deployed while this slot's run, of the
				// code before, was stopping: the slot goes on with it.
				ar.mu.Lock()
				ar.startedAs(w.version)
				ar.mu.Unlock()
				ar.ended(version)
				version = w.version
			}
			ctx, app, be = w.ctx, w.app, w.be
			ar.deliverAll(ctx, app, be, []store.Event{w.ev})
		}
	})
}

// deliverAll delivers evs one after another in seq order, until ctx
// ends. Once an event of a document fails, the later events of that
// document go back: they wait for its retry.
func (ar *appRunner) deliverAll(ctx context.Context, app App, be appcode.Backend, evs []store.Event) {
	var failed map[docKey]bool
	for i, ev := range evs {
		k := docKey{ev.Rev.DB, ev.Rev.ID}
		if failed[k] {
			ar.r.settle(ar, ev, giveBack(ev))
			continue
		}
		if ctx.Err() != nil {
			ar.giveBackUnrun(evs[i:])
			return
		}
		if !ar.deliverOne(ctx, app, be, ev) {
			if failed == nil {
				failed = map[docKey]bool{}
			}
			failed[k] = true
		}
	}
}

// giveBackUnrun settles claimed events whose runs were stopped before they
// began. Stopped by a deploy, they go back as they were. A server stopping
// leaves them to the store, which ends its leases when it closes; but
// those whose claim marked them begun go back, or they would count as
// runs the server died in.
func (ar *appRunner) giveBackUnrun(evs []store.Event) {
	for _, ev := range evs {
		if ar.r.ctx.Err() == nil || ev.Started {
			ar.r.settle(ar, ev, giveBack(ev))
		}
	}
}

// startEvent marks ev's run begun unless its claim already did.
func startEvent(ctx context.Context, st store.Store, appID int64, ev store.Event) error {
	if ev.Started {
		return nil
	}
	return st.StartEvent(ctx, appID, ev.Seq)
}

// docKey names a document of the app.
type docKey struct{ db, id string }

// giveBack is the settlement of a claimed event that did not run, or
// whose run the server stopped: it is due again at once, with the
// attempts it had. Not the event's failure, so it costs no attempt.
func giveBack(ev store.Event) store.Settlement {
	return store.Settlement{Attempts: ev.Attempts, NextAt: ev.NextAt, LastError: ev.LastError}
}

// errInterrupted is the failure of a run that never ended: the server
// running it stopped mid-run.
var errInterrupted = errors.New("the server stopped while this run was in flight, or waiting on it for a slot (it crashed, was killed or lost power); " +
	"if every attempt ends so, this onChange may be what brings the server down")

// interrupted settles the claimed events whose last run never ended, and
// returns the others. That run counts as a failed attempt (docs/architecture.md, "backend.js and delivery"):
// an event whose handler brings the server down is not run again at once
// after each restart, but backs off like any failure and is parked as
// dead after maxAttempts, while the server goes on with other work.
func (ar *appRunner) interrupted(app App, be appcode.Backend, evs []store.Event) []store.Event {
	rest := evs[:0]
	for _, ev := range evs {
		if ev.Interrupted {
			ar.failed(app, be, ev, ev.Attempts, errInterrupted)
		} else {
			rest = append(rest, ev)
		}
	}
	return rest
}

// changeEvent builds onChange's event from an outbox entry: the document
// as it was committed, whatever happened to it since.
func changeEvent(ev store.Event) appcode.ChangeEvent {
	r := ev.Rev
	ce := appcode.ChangeEvent{DB: r.DB, DocID: r.ID, Seq: ev.Seq, Deleted: r.Deleted, Attempt: ev.Attempts + 1,
		Doc: appcode.DocJSON(r.ID, r.Rev, r.Deleted, r.Body)}
	if ev.Old != nil {
		ce.OldDoc = appcode.DocJSON(r.ID, ev.Old.Rev, false, ev.Old.Body)
	}
	return ce
}

// deliverOne runs one event and settles it. It reports whether the event
// was acked.
func (ar *appRunner) deliverOne(ctx context.Context, app App, be appcode.Backend, ev store.Event) (acked bool) {
	e := ar.r
	// The attempt counts before the handler runs: a run that takes the
	// server down with it is still a failed attempt on restart.
	if err := startEvent(ctx, e.st, ar.id, ev); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			// The lease ran out and another runner has the event.
			ar.release(ev.Seq)
			return false
		}
		if ctx.Err() == nil {
			e.log.Error("starting an onChange run", "app", ar.ref, "seq", ev.Seq, "err", err)
		}
		// The mark may have landed even so: this settles it away.
		e.settle(ar, ev, giveBack(ev))
		return false
	}
	start := e.clock.Now()
	if e.observe != nil && ev.Attempts == 0 {
		since := ev.Rev.Time
		if t, ok := ar.committedAt(ev.Seq); ok {
			since = t
		}
		e.observe(start.Sub(since))
	}
	// onChange acts as the writer of the revision it reacts to, one level
	// deeper for the loop guard.
	// The admin's writes are the admin's: the flag is not stored with the
	// revision, but the admin user is the only one that has it.
	// Its writes belong to the chain of the event's write (the fan-out
	// budget), which starts there unless that write was in one.
	origin := ev.Origin
	if origin == 0 {
		origin = ev.Seq
	}
	hc := e.host.HandlerContext(app, Acting{Handler: appcode.OnChange, Writer: ev.Rev.Writer, Depth: ev.Depth + 1, Origin: origin})
	err := be.OnChange(ctx, changeEvent(ev), hc)
	if err == nil {
		e.settle(ar, ev, store.Settlement{Ack: true})
		return true
	}
	if ctx.Err() != nil {
		// The server stopped the run, not the handler: no attempt lost.
		e.settle(ar, ev, giveBack(ev))
		if ar.r.ctx.Err() == nil {
			e.host.Log(app, "onChange", "warn", fmt.Sprintf("onChange for %s/%s (seq %d, attempt %d) stopped: a new version of the code was deployed; "+
				"the event runs again with it, as the same attempt", ev.Rev.DB, ev.Rev.ID, ev.Seq, ev.Attempts+1), appcode.LogFields("seq", ev.Seq))
		}
		return false
	}
	ar.failed(app, be, ev, ev.Attempts+1, err)
	return false
}

// failed settles a run that failed, the attempts-th: a retry after the
// backoff, or dead once out of attempts.
func (ar *appRunner) failed(app App, be appcode.Backend, ev store.Event, attempts int, err error) {
	e := ar.r
	cfg := be.Config().OnChange
	where := fmt.Sprintf("onChange for %s/%s (seq %d, attempt %d)", ev.Rev.DB, ev.Rev.ID, ev.Seq, attempts)
	if attempts >= cfg.MaxAttempts {
		e.settle(ar, ev, store.Settlement{Dead: true, Attempts: attempts, NextAt: e.clock.Now(), LastError: err.Error()})
		e.host.Log(app, "onChange", "error", where+" failed for the last time; the event is parked as dead: "+err.Error(),
			appcode.LogFields("seq", ev.Seq, "attempts", attempts))
		return
	}
	wait := backoff(attempts)
	next := e.clock.Now().Add(wait)
	e.settle(ar, ev, store.Settlement{Attempts: attempts, NextAt: next, LastError: err.Error()})
	e.host.Log(app, "onChange", "warn", where+" failed; retrying in "+wait.Round(time.Second).String()+": "+err.Error(),
		appcode.LogFields("seq", ev.Seq, "attempts", attempts))
	// The retry's own wake-up: the deliverer may have looked for the next
	// due event before this one was settled.
	e.clock.AfterFunc(wait, func() { ar.dueAgain(); e.signal(ar.wake) })
}

// settle records an event's outcome. Then the document's next event may
// be claimed: the deliverer looks.
func (e *Runner) settle(ar *appRunner, ev store.Event, s store.Settlement) {
	seq := ev.Seq
	// Also when the server is stopping: a run it stopped goes back.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ar.r.ctx), 30*time.Second)
	defer cancel()
	if err := e.st.SettleEvent(ctx, ar.id, seq, s); err != nil {
		e.log.Error("settling an onChange event", "app", ar.ref, "seq", seq, "err", err)
	}
	ar.settled(docKey{ev.Rev.DB, ev.Rev.ID}, !s.Ack && !s.Dead && !s.NextAt.After(e.clock.Now()))
	ar.release(seq)
	if ar.r.ctx.Err() == nil {
		e.signal(ar.wake)
	}
}
