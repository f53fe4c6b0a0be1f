package clock

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Virtual is a clock that moves only when told to. Advance fires every
// timer that falls due, in time order, so a test can replay a 30 s lease
// and a 5 s sweep exactly and in no real time at all.
type Virtual struct {
	mu     sync.Mutex
	now    time.Time
	timers timerHeap
	seq    int64
	// waiters are woken whenever a timer is added, so tests can wait for
	// a component to arm its next timer before advancing.
	waiters []chan struct{}
	// busy is the work in progress at the current instant (Busy); idle
	// are the WaitIdle calls waiting for it to end.
	busy int
	idle []chan struct{}
}

// NewVirtual returns a virtual clock that starts at start.
func NewVirtual(start time.Time) *Virtual { return &Virtual{now: start} }

func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

// AfterFunc's f counts as work in progress (Busy) from the instant it
// fires until it returns, so whatever f wakes can take over before the
// clock looks idle.
func (v *Virtual) AfterFunc(d time.Duration, f func()) Timer {
	return v.add(d, true, func(time.Time) {
		go func() {
			defer v.Busy(-1)
			f()
		}()
	})
}

// After's receiver does not count as work when the time comes: code
// whose wait must count (see Busy) uses AfterFunc.
func (v *Virtual) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	v.add(d, false, func(t time.Time) { ch <- t })
	return ch
}

// add arms a timer; work says that its fire counts as work in progress,
// from the instant it fires (under mu, so that no look at the count falls
// between) until the fire says it ended.
func (v *Virtual) add(d time.Duration, work bool, fire func(time.Time)) *vtimer {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seq++
	t := &vtimer{clock: v, at: v.now.Add(d), seq: v.seq, fire: fire, work: work, index: -1}
	if d <= 0 {
		if work {
			v.busy++
		}
		fire(v.now)
		return t
	}
	heap.Push(&v.timers, t)
	for _, w := range v.waiters {
		close(w)
	}
	v.waiters = nil
	return t
}

// Advance moves the clock forward by d, firing due timers in order; each
// fires with the clock set to its own due time.
func (v *Virtual) Advance(d time.Duration) { v.AdvanceTo(v.Now().Add(d)) }

// AdvanceTo moves the clock to t (never backwards).
func (v *Virtual) AdvanceTo(t time.Time) {
	for {
		v.mu.Lock()
		if len(v.timers) == 0 || v.timers[0].at.After(t) {
			if t.After(v.now) {
				v.now = t
			}
			v.mu.Unlock()
			return
		}
		next := heap.Pop(&v.timers).(*vtimer)
		if next.at.After(v.now) {
			v.now = next.at
		}
		now := v.now
		if next.work {
			v.busy++
		}
		v.mu.Unlock()
		next.fire(now)
	}
}

// Work in progress. A test that plays time must not move the clock while
// something that the last move woke is still running: the next timer
// would fire before that work armed its own earlier one. So the code that
// runs on a clock counts its work with Busy (see the package function),
// and each piece of work hands its count on to what it wakes before it
// ends: a fired AfterFunc counts until f returns, and a component that f
// signals counts from the signal. What waits on the clock counts nothing,
// so when the count is zero the only thing that can happen next is a
// timer, and WaitIdle returns.

// Busy adds n (which may be negative) to the work in progress.
func (v *Virtual) Busy(n int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.busy += n
	if v.busy < 0 {
		panic("clock: more work ended than began")
	}
	if v.busy == 0 {
		for _, w := range v.idle {
			close(w)
		}
		v.idle = nil
	}
}

// Working reports the work in progress.
func (v *Virtual) Working() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.busy
}

// WaitIdle waits until no work is in progress, or ctx ends.
func (v *Virtual) WaitIdle(ctx context.Context) error {
	v.mu.Lock()
	if v.busy == 0 {
		v.mu.Unlock()
		return nil
	}
	w := make(chan struct{})
	v.idle = append(v.idle, w)
	v.mu.Unlock()
	select {
	case <-w:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Pending reports how many timers are armed.
func (v *Virtual) Pending() int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return len(v.timers)
}

// NextAt reports when the earliest armed timer falls due.
func (v *Virtual) NextAt() (time.Time, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.timers) == 0 {
		return time.Time{}, false
	}
	return v.timers[0].at, true
}

// TimerAdded returns a channel that closes when the next timer is armed.
func (v *Virtual) TimerAdded() <-chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	ch := make(chan struct{})
	v.waiters = append(v.waiters, ch)
	return ch
}

type vtimer struct {
	clock *Virtual
	at    time.Time
	seq   int64
	fire  func(time.Time)
	work  bool
	index int
}

func (t *vtimer) Stop() bool {
	t.clock.mu.Lock()
	defer t.clock.mu.Unlock()
	if t.index < 0 {
		return false
	}
	heap.Remove(&t.clock.timers, t.index)
	return true
}

type timerHeap []*vtimer

func (h timerHeap) Len() int { return len(h) }
func (h timerHeap) Less(i, j int) bool {
	if h[i].at.Equal(h[j].at) {
		return h[i].seq < h[j].seq
	}
	return h[i].at.Before(h[j].at)
}
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *timerHeap) Push(x any) {
	t := x.(*vtimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	t.index = -1
	*h = old[:len(old)-1]
	return t
}
