package sim

import (
	"context"
	"time"
)

// Rest.
//
// Handlers run on goroutines of their own: when the clock moves, a timer
// wakes the scheduler or a sleeping handler, which then reads, writes and
// arms its next timers in real time. Before moving the clock again the
// harness must know that all of that is over, or the next timer would
// fire while a handler still has to arm an earlier one, and the handler
// would see a later Date.now() than its own. The engine says so
// (Engine.WaitIdle): every piece of its work, from the timer or signal
// that starts it to its end, counts on the virtual clock, and a handler
// that only awaits its timers counts nothing (clock.Virtual.Busy).
//
// Waiting for rest is the only real-time waiting in the harness, and it
// is never a stand-in for protocol time: protocol time moves only through
// the virtual clock.

// Settle waits until the system is at rest at the current virtual time,
// then has the store commit the ops it queued without waiting (event
// settlements, log lines), so what the test reads next includes them.
// It fails the test if rest does not come within Options.SettleCap of
// real time.
func (env *Env) Settle() {
	env.T.Helper()
	ctx, cancel := context.WithTimeout(env.Ctx, env.cap)
	defer cancel()
	if err := env.Engine.WaitIdle(ctx); err != nil {
		env.checkCtx()
		env.T.Fatalf("sim: the system did not come to rest within %v of real time at virtual %v (+%v): %d pieces of work still in progress",
			env.cap, env.Now().Format(time.RFC3339Nano), env.Elapsed(), env.Clock.Working())
	}
	// The flush's commit goes to the harness's own app: it starts no work.
	if err := env.Store.Flush(env.Ctx, env.Clock.Now()); err != nil {
		env.T.Fatal(err)
	}
}

// Sleep waits d of virtual time, or until ctx ends, without counting as
// work meanwhile: for an Options.OnChange wrapper that stands for a
// handler awaiting a timer. It must be called from work that counts (a
// run), which counts again from the moment the timer fires.
func (env *Env) Sleep(ctx context.Context, d time.Duration) error {
	woke := make(chan struct{})
	t := env.Clock.AfterFunc(d, func() {
		env.Clock.Busy(1) // taken over by the sleeper
		close(woke)
	})
	env.Clock.Busy(-1)
	select {
	case <-woke:
		return nil
	case <-ctx.Done():
		if !t.Stop() {
			<-woke
			return ctx.Err()
		}
		env.Clock.Busy(1)
		return ctx.Err()
	}
}

// RunFor plays d of virtual time: it settles, then moves the clock to the
// earlier of the next armed timer and the end, and repeats until the end
// is reached and settled. Every timer fires at its own virtual instant.
func (env *Env) RunFor(d time.Duration) {
	env.T.Helper()
	end := env.Now().Add(d)
	for {
		env.Settle()
		env.checkCtx()
		now := env.Now()
		if !now.Before(end) {
			return
		}
		env.step(end)
	}
}

// RunUntil plays virtual time like RunFor until cond holds at rest, and
// returns the virtual time it took. It fails the test if cond does not
// hold within max of virtual time. cond runs on the test's goroutine
// while the system is at rest.
func (env *Env) RunUntil(cond func() bool, max time.Duration) time.Duration {
	env.T.Helper()
	start := env.Now()
	end := start.Add(max)
	for {
		env.Settle()
		if cond() {
			return env.Now().Sub(start)
		}
		env.checkCtx()
		if !env.Now().Before(end) {
			env.T.Fatalf("sim: condition not met after %v of virtual time (now %s)", max, env.Now().Format(time.RFC3339Nano))
		}
		env.step(end)
	}
}

// checkCtx fails the test once Options.Ctx has ended: a test stopped
// for running too long must not keep playing virtual time.
func (env *Env) checkCtx() {
	env.T.Helper()
	if err := env.Ctx.Err(); err != nil {
		env.T.Fatalf("sim: stopped at virtual %s (+%v): %v", env.Now().Format(time.RFC3339Nano), env.Elapsed(), context.Cause(env.Ctx))
	}
}

// step moves the clock to the next armed timer, or to end if that comes
// first.
func (env *Env) step(end time.Time) {
	target := end
	if next, ok := env.Clock.NextAt(); ok && next.Before(end) {
		target = next
	}
	env.Clock.AdvanceTo(target)
}
