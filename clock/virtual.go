package clock

import (
	"container/heap"
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
}

// NewVirtual returns a virtual clock that starts at start.
func NewVirtual(start time.Time) *Virtual { return &Virtual{now: start} }

func (v *Virtual) Now() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.now
}

func (v *Virtual) AfterFunc(d time.Duration, f func()) Timer {
	return v.add(d, func(time.Time) { go f() })
}

func (v *Virtual) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	v.add(d, func(t time.Time) { ch <- t })
	return ch
}

func (v *Virtual) add(d time.Duration, fire func(time.Time)) *vtimer {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seq++
	t := &vtimer{clock: v, at: v.now.Add(d), seq: v.seq, fire: fire, index: -1}
	if d <= 0 {
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
		v.mu.Unlock()
		next.fire(now)
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
