package engine

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/store"
)

// Delivery of onChange (DESIGN §4): events are claimed in commit order in
// batches of up to batchSize; a batch runs its events one after another,
// and up to config.onChange.concurrency batches run at once, so a hung run
// holds back only its own batch.
const (
	batchSize = 10
	// maxClaimBatches bounds the batches one claim takes: a claim is a
	// round trip to the store (a transaction on PostgreSQL), so free
	// slots are filled by one claim, not one claim each.
	maxClaimBatches = 10
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
	e, ctx := ar.r.e, ar.r.ctx
	retry := make(chan struct{}, 1)
	var timer clock.Timer
	every := e.poll
	if every <= 0 {
		every = pollEvery
	}
	poll := time.NewTicker(every)
	defer poll.Stop()
	for {
		app, be, err := ar.current()
		if err == nil && be != nil && be.Has("onChange") {
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
						timer = e.clock.AfterFunc(d, func() { signal(retry) })
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-ar.wake:
		case <-retry:
		case <-poll.C:
		}
	}
}

// claim starts batches while there are free slots and due events. It
// reports busy when it stopped because every slot is taken.
func (ar *appRunner) claim(app *appState, be Backend) (busy bool) {
	e, ctx := ar.r.e, ar.r.ctx
	cfg := be.Config().OnChange
	// A batch keeps its lease for as long as its runs may take.
	lease := time.Duration(batchSize)*cfg.Timeout + time.Minute
	for {
		ar.mu.Lock()
		slots := cfg.Concurrency - ar.inflight
		// Set in the same critical section as the count is read: a batch
		// ending after it wakes the loop.
		ar.starved = slots <= 0
		ar.mu.Unlock()
		if slots <= 0 || ctx.Err() != nil {
			return slots <= 0
		}
		want := min(slots, maxClaimBatches) * batchSize
		claim := e.st.ClaimEvents
		if cfg.Concurrency == 1 {
			// Strict commit order: no batch while another node runs one.
			claim = e.st.ClaimEventsExclusive
		}
		evs, err := claim(ctx, ar.id, e.clock.Now(), want, lease)
		if err != nil {
			if ctx.Err() == nil { // not just the server stopping
				e.log.Error("claiming onChange events", "app", ar.ref, "err", err)
			}
			return false
		}
		if len(evs) == 0 {
			return false
		}
		short := len(evs) < want
		// In seq order, batchSize at a time: as if each batch had been
		// claimed on its own, one after another.
		for len(evs) > 0 {
			n := min(batchSize, len(evs))
			ar.run(app, be, evs[:n:n])
			evs = evs[n:]
		}
		if short {
			// Nothing else is due (see store.Events): a claim now would
			// come back empty. A commit since wakes the loop again.
			return false
		}
	}
}

// run delivers one batch in a slot of its own, its events one after
// another.
func (ar *appRunner) run(app *appState, be Backend, evs []store.Event) {
	ctx := ar.r.ctx
	ar.mu.Lock()
	ar.inflight++
	ar.mu.Unlock()
	ar.r.wg.Add(1)
	go func() {
		defer ar.r.wg.Done()
		defer func() {
			ar.mu.Lock()
			ar.inflight--
			starved := ar.starved
			ar.starved = false
			ar.mu.Unlock()
			// Only a claim that stopped for want of a slot left events
			// behind; retries set their own wake-ups.
			if starved {
				signal(ar.wake)
			}
		}()
		for _, ev := range evs {
			if ctx.Err() != nil {
				return // shutting down: the outbox keeps it for the next start
			}
			ar.deliverOne(app, be, ev)
		}
	}()
}

// changeEvent builds onChange's event from an outbox entry: the document
// as it was committed, whatever happened to it since.
func changeEvent(ev store.Event) ChangeEvent {
	r := ev.Rev
	ce := ChangeEvent{DB: r.DB, DocID: r.ID, Seq: ev.Seq, Deleted: r.Deleted, Attempt: ev.Attempts + 1,
		Doc: DocJSON(r.ID, r.Rev, r.Deleted, r.Body)}
	if ev.Old != nil {
		ce.OldDoc = DocJSON(r.ID, ev.Old.Rev, false, ev.Old.Body)
	}
	return ce
}

func (ar *appRunner) deliverOne(app *appState, be Backend, ev store.Event) {
	e, ctx := ar.r.e, ar.r.ctx
	e.activity.Add(1)
	defer e.activity.Add(1)
	start := e.clock.Now()
	if e.observe != nil && ev.Attempts == 0 {
		e.observe(start.Sub(ev.Rev.Time))
	}
	// onChange acts as the writer of the revision it reacts to, one level
	// deeper for the loop guard.
	// The admin's writes are the admin's: the flag is not stored with the
	// revision, but the admin user is the only one that has it.
	hc := &handlerCtx{e: e, app: app, actor: Actor{User: ev.Rev.Writer.User, Device: ev.Rev.Writer.Device,
		Admin: ev.Rev.Writer.User == AdminUser && ev.Rev.Writer.Device == "", Handler: "onChange", Depth: ev.Depth + 1}}
	err := be.OnChange(ctx, changeEvent(ev), hc)
	attempts := ev.Attempts + 1
	if err == nil {
		e.settle(ar, ev.Seq, store.Settlement{Ack: true})
		return
	}
	if ctx.Err() != nil {
		return
	}
	cfg := be.Config().OnChange
	where := fmt.Sprintf("onChange for %s/%s (seq %d, attempt %d)", ev.Rev.DB, ev.Rev.ID, ev.Seq, attempts)
	if attempts >= cfg.MaxAttempts {
		e.settle(ar, ev.Seq, store.Settlement{Dead: true, Attempts: attempts, NextAt: e.clock.Now(), LastError: err.Error()})
		e.appLog(app, "onChange", "error", where+" failed for the last time; the event is parked as dead: "+err.Error(),
			fieldsJSON("seq", ev.Seq, "attempts", attempts))
		return
	}
	wait := backoff(attempts)
	next := e.clock.Now().Add(wait)
	e.settle(ar, ev.Seq, store.Settlement{Attempts: attempts, NextAt: next, LastError: err.Error()})
	e.appLog(app, "onChange", "warn", where+" failed; retrying in "+wait.Round(time.Second).String()+": "+err.Error(),
		fieldsJSON("seq", ev.Seq, "attempts", attempts))
	// The retry's own wake-up: the deliverer may have looked for the next
	// due event before this one was settled.
	e.clock.AfterFunc(wait, func() { signal(ar.wake) })
}

func (e *Engine) settle(ar *appRunner, seq int64, s store.Settlement) {
	e.activity.Add(1)
	if err := e.st.SettleEvent(ar.r.ctx, ar.id, seq, s); err != nil {
		e.log.Error("settling an onChange event", "app", ar.ref, "seq", seq, "err", err)
	}
}
