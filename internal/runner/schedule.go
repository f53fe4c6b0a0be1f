package runner

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// schedule runs the app's scheduled handler once per interval (docs/architecture.md, "backend.js and delivery").
// Ticks fall on multiples of the interval, run one at a time, and a tick
// that overruns skips the ticks it missed instead of piling them up.
func (ar *appRunner) schedule() {
	e, ctx := ar.r, ar.r.ctx
	woken := 1 // signals whose look this is, the first counted by ensure (work.go)
	for {
		app, be, err := ar.current()
		var interval time.Duration
		if err == nil && be != nil && be.Has(appcode.Scheduled) {
			interval = be.Config().Scheduled.Interval
		}
		if interval <= 0 {
			e.done(woken)
			woken = 0
			select {
			case <-ctx.Done():
				return
			case <-ar.reload:
			case <-ar.fire: // a timer stopped too late
			}
			woken++
			continue
		}
		now := e.clock.Now()
		planned := now.Truncate(interval).Add(interval)
		t := e.clock.AfterFunc(planned.Sub(now), func() {
			// Handed over with a count of work, which the scheduler
			// takes; a timer stopped too late hands over a stale time.
			e.working(1)
			select {
			case ar.fire <- planned:
			case <-ctx.Done():
				e.done(1)
			}
		})
		if !ar.waitTick(t, planned, &woken) {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		// The code may have changed while waiting: tick with what is live.
		if app, be, err = ar.current(); err != nil || be == nil || !be.Has(appcode.Scheduled) {
			continue
		}
		ar.runTick(app, be, planned)
	}
}

// waitTick waits for the timer t of the tick planned. It reports false
// when the runner stopped or the code changed first.
func (ar *appRunner) waitTick(t clock.Timer, planned time.Time, woken *int) bool {
	e, ctx := ar.r, ar.r.ctx
	for {
		e.done(*woken)
		*woken = 0
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-ar.reload:
			*woken++
			t.Stop()
			return false
		case at := <-ar.fire:
			*woken++
			if at.Equal(planned) {
				return true
			}
		}
	}
}

func (ar *appRunner) runTick(app App, be appcode.Backend, planned time.Time) {
	e, ctx := ar.r, ar.r.ctx
	// On a shared database several nodes plan the same tick: the first to
	// take it runs it, the others skip it. The tick holds the schedule
	// until it ends, so a node that is free at the next interval skips
	// that tick too rather than run one beside it. The hold is renewed
	// while the tick runs; if this node dies mid-tick, it lapses about
	// tickHold after the last renewal.
	if ok, err := e.st.AcquireTick(ctx, ar.id, planned, e.node, e.clock.Now().Add(tickHold)); err != nil || !ok {
		if err != nil && ctx.Err() == nil {
			e.log.Error("taking a scheduled tick", "app", ar.ref, "err", err)
		}
		return
	}
	defer func() {
		// Even when the server is stopping: the other nodes may tick on.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := e.st.ReleaseTick(rctx, ar.id, planned, e.node); err != nil {
			e.log.Error("ending a scheduled tick's hold", "app", ar.ref, "err", err)
		}
	}()
	renewal := ar.renewTickHold(planned)
	defer renewal.stop() // before the release above
	ar.mu.Lock()
	ar.tick.running = true
	ar.mu.Unlock()
	// A deploy stops the tick: its code is no longer the app's, and the
	// new version's schedule should start now, not when the old run ends.
	tctx, stop := context.WithCancel(ctx)
	defer stop()
	var deployed atomic.Bool
	done := make(chan struct{})
	defer close(done)
	go ar.stopOnDeploy(app.Version, func() { deployed.Store(true); stop() }, done)
	started := e.clock.Now()
	// scheduled acts as the app's owner.
	hc := e.host.HandlerContext(app, Acting{Handler: appcode.Scheduled, Writer: store.Writer{User: app.Owner}})
	err := be.Scheduled(tctx, appcode.TickEvent{ScheduledTime: planned.UnixMilli()}, hc)
	t := store.Tick{Planned: planned, Started: started, Duration: e.clock.Now().Sub(started)}
	switch {
	case deployed.Load():
		t.Error = "stopped: a new version of the code was deployed"
		e.host.Log(app, "scheduled", "warn", "scheduled tick "+t.Error+"; the new version ticks from the next interval",
			appcode.LogFields("scheduledTime", planned.UnixMilli()))
	case err != nil:
		t.Error = err.Error()
		if ctx.Err() == nil {
			e.host.Log(app, "scheduled", "error", "scheduled tick failed: "+err.Error(), appcode.LogFields("scheduledTime", planned.UnixMilli()))
		}
	}
	ar.mu.Lock()
	ar.tick = tickStatus{last: &t}
	ar.mu.Unlock()
	if err := e.st.SaveTick(ctx, ar.id, t); err != nil && ctx.Err() == nil {
		e.log.Error("recording a scheduled tick", "app", ar.ref, "err", err)
	}
}

// stopOnDeploy calls stop when the app's code is no longer code, until
// done. It takes the runner's reload signals while the tick runs; the
// scheduler reads the code afresh when the tick returns, so none is lost.
func (ar *appRunner) stopOnDeploy(version int, stop func(), done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case <-ar.reload:
			select {
			case <-done:
				// The tick ended meanwhile: the scheduler needs this one.
				ar.r.signal(ar.reload)
				ar.r.done(1)
				return
			default:
			}
			if app, _, err := ar.current(); err == nil && app.Version != version {
				stop()
				// The stop is work until the tick it stopped has ended.
				<-done
				ar.r.done(1)
				return
			}
			ar.r.done(1)
		}
	}
}
