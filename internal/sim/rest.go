package sim

import (
	"context"
	"math"
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// Quiescence.
//
// Handlers run on goroutines of their own: when the clock moves, a timer
// wakes the scheduler or a sleeping handler, which then reads, writes and
// arms its next timers in real time. Before moving the clock again the
// harness must know that all of that is over, or the next timer would
// fire while a handler still has to arm an earlier one, and the handler
// would see a later Date.now() than its own. Nothing in the engine says
// "everything is idle", so Settle observes it. Over a short real-time
// window these must all stand still: the engine's activity counter
// (commits, claims, runs, ticks); every store call and access.js call,
// none of them in progress (a commit waiting for its fsync, a decision
// being computed); the clock's armed timers; and the number of goroutines
// (a timer's callback not run yet, a runtime being replaced). And every
// check must catch an instant when all other goroutines are blocked (see
// alone): a woken goroutine still waiting for a CPU, or one computing
// while the OS has its thread off the CPU, moves no counter, and on a
// loaded machine either can last longer than any window.
//
// This polling is the only real-time waiting in the harness, and it is
// never a stand-in for protocol time: protocol time moves only through
// the virtual clock, and the window only has to outlast one goroutine
// hand-off, which is why it is milliseconds long and starts over whenever
// anything moves.

const (
	// DefaultSettlePoll is Options.SettlePoll's default.
	DefaultSettlePoll = 2 * time.Millisecond
	settleStable      = 5 // consecutive unchanged checks: a window of ~10 ms
)

type fingerprint struct {
	goroutines int
	activity   uint64
	calls      uint64
	inflight   int64
	pending    int
	next       time.Time
}

func (env *Env) fingerprint() fingerprint {
	next, _ := env.Clock.NextAt()
	return fingerprint{
		goroutines: runtime.NumGoroutine(),
		activity:   env.Engine.Activity(),
		calls:      env.Store.calls.Load(),
		inflight:   env.Store.inflight.Load(),
		pending:    env.Clock.Pending(),
		next:       next,
	}
}

var (
	schedMu      sync.Mutex
	schedSamples = []metrics.Sample{
		{Name: "/sched/goroutines/running:goroutines"},
		{Name: "/sched/goroutines/runnable:goroutines"},
		{Name: "/sched/goroutines/not-in-go:goroutines"},
	}
)

// alone reports whether, at some instant within about a millisecond, the
// calling goroutine was the only one executing, none was waiting for a
// CPU and no more than base were in a system call: every other goroutine
// was blocked. A goroutine that a timer or a commit has just woken is
// runnable, and one computing counts as running even while the OS has its
// thread off the CPU, so this sees work that moves no counter yet. Idle
// processors spinning for work also count as running for a moment, hence
// the retries. It reports true when the runtime does not publish these
// metrics.
func alone(base uint64) bool {
	schedMu.Lock()
	defer schedMu.Unlock()
	for range 20 {
		metrics.Read(schedSamples)
		for _, s := range schedSamples {
			if s.Value.Kind() != metrics.KindUint64 {
				return true
			}
		}
		if schedSamples[0].Value.Uint64() <= 1 && schedSamples[1].Value.Uint64() == 0 && schedSamples[2].Value.Uint64() <= base {
			return true
		}
		// Not runtime.Gosched: a yield wakes an idle processor to look
		// for work, and that processor counts as running.
		time.Sleep(50 * time.Microsecond)
	}
	return false
}

// inSyscalls is how many goroutines sit in a system call for good before
// the environment starts: os/signal's receiver, in a process that asked
// for signals (a command that stops on Ctrl-C), waits in one forever. The
// least of a few samples leaves out a passing call.
func inSyscalls() uint64 {
	schedMu.Lock()
	defer schedMu.Unlock()
	least := uint64(math.MaxUint64)
	for range 10 {
		metrics.Read(schedSamples)
		if v := schedSamples[2].Value; v.Kind() == metrics.KindUint64 {
			least = min(least, v.Uint64())
		} else {
			return 0
		}
		time.Sleep(50 * time.Microsecond)
	}
	return least
}

// Settle waits until the system is at rest at the current virtual time:
// nothing in progress and nothing moving for settleStable consecutive
// checks. Ops that the store queued without waiting (event settlements,
// log lines) are then flushed, and rest is confirmed again.
// It fails the test if rest does not come within Options.SettleCap of
// real time.
func (env *Env) Settle() {
	env.T.Helper()
	deadline := time.Now().Add(env.cap)
	for {
		env.waitStable(deadline)
		if !env.Store.needsFlush() {
			return
		}
		if err := env.Store.Flush(env.Ctx, env.Clock.Now()); err != nil {
			env.T.Fatal(err)
		}
	}
}

func (env *Env) waitStable(deadline time.Time) {
	env.T.Helper()
	last := env.fingerprint()
	stable := 0
	for stable < settleStable {
		pause(env.poll)
		fp := env.fingerprint()
		if fp == last && fp.inflight == 0 && alone(env.syscalls) {
			stable++
			continue
		}
		last, stable = fp, 0
		if time.Now().After(deadline) {
			env.T.Fatalf("sim: the system did not come to rest within %v of real time at virtual %v (+%v): %+v",
				env.cap, env.Now().Format(time.RFC3339Nano), env.Elapsed(), fp)
		}
	}
}

// pause waits d. A sleep shorter than the timer's granularity (about a
// millisecond) would last that long, so a shorter pause spins on the
// clock instead; it does not yield, since a yield wakes an idle processor
// that then counts as running (see alone).
func pause(d time.Duration) {
	if d >= time.Millisecond {
		time.Sleep(d)
		return
	}
	for start := time.Now(); time.Since(start) < d; {
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
