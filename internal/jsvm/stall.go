package jsvm

import (
	"sync/atomic"
	"time"
)

// A deadline is wall-clock time, and the Go runtime can stop every
// goroutine at once: a garbage collection's stop-the-world waits for each
// running goroutine to reach a safe point, and one in the middle of a huge
// copy (another app's script doubling a string) holds everyone for tens or
// hundreds of milliseconds. A call that was frozen that long did not run
// that long, so it should not miss its deadline for it. The heap
// watchdog's ticker sees such freezes as late ticks; stalls adds them up,
// and a deadline that fires is moved on by the stalls seen since the call
// began, by at most the deadline again and never more than maxStallGrace.

// maxStallGrace bounds how far stalls can move one call's deadline.
const maxStallGrace = time.Second

// stallGap is how late a tick must be to count as a stall, well above the
// scheduling noise of a busy machine.
const stallGap = 20 * time.Millisecond

var stalls stallClock

type stallClock struct {
	last  atomic.Int64 // mono() of the watchdog's last tick; 0 while it is parked
	total atomic.Int64 // nanoseconds of stalls seen
}

var epoch = time.Now()

// mono is a monotonic clock in nanoseconds.
func mono() int64 { return int64(time.Since(epoch)) }

// tick records a tick of the watchdog at now.
func (s *stallClock) tick(now int64) {
	if last := s.last.Swap(now); last != 0 {
		if gap := time.Duration(now-last) - heapTick; gap > stallGap {
			s.total.Add(int64(gap))
		}
	}
}

// park stops measuring: a parked watchdog's silence is no stall.
func (s *stallClock) park() { s.last.Store(0) }

// at is the stalls seen up to now, counting one still going on.
func (s *stallClock) at(now int64) int64 {
	total := s.total.Load()
	if last := s.last.Load(); last != 0 {
		if gap := time.Duration(now-last) - heapTick; gap > stallGap {
			total += int64(gap)
		}
	}
	return total
}
