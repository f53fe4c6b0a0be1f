// Package clock is the one source of time in handoff (docs/architecture.md, "Time"). Leases,
// sweeps, backoffs and run limits all read it, so tests can swap in a
// virtual clock and play minutes of protocol time in milliseconds.
package clock

import "time"

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
	// After delivers the time on the channel once d has passed.
	After(d time.Duration) <-chan time.Time
}

// Timer is a pending AfterFunc or After.
type Timer interface {
	// Stop cancels the timer; it reports whether it was still pending.
	Stop() bool
}

// Real is the wall clock.
type Real struct{}

func (Real) Now() time.Time { return time.Now() }

func (Real) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Busy marks one piece of work in progress on c, when c counts work (a
// Virtual does; see Virtual.Busy), and returns the function that ends it.
// On the real clock both cost nothing.
func Busy(c Clock) (done func()) {
	if w, ok := c.(interface{ Busy(n int) }); ok {
		w.Busy(1)
		return func() { w.Busy(-1) }
	}
	return func() {}
}

// Counter returns c's count of work in progress as a function that adds
// to it, or nil when c keeps none (the real clock).
func Counter(c Clock) func(n int) {
	if w, ok := c.(interface{ Busy(n int) }); ok {
		return w.Busy
	}
	return nil
}
