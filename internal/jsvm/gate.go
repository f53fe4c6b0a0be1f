package jsvm

import (
	"runtime"
	"slices"
	"sync"
)

// A Gate shares the cores among the apps whose JavaScript runs in one
// process. goja cannot pause a running script, so the only fairness that
// holds for a script that computes without end is in who may start: a call
// takes a slot of the gate while it runs JS and gives it back while it
// awaits host work (a ctx.db.put, a fetch), and slots are handed out to
// the group (the app) holding the fewest first. No group may hold more
// than all slots but one, so one app's busy loops always leave a core to
// the others and to the server's own work, and a busy app cannot take a
// slot that another app is waiting for.
type Gate struct {
	mu      sync.Mutex
	slots   int
	free    int
	held    map[string]int
	waiters []*waiter         // in arrival order
	grants  uint64            // slots handed out so far
	last    map[string]uint64 // grants when each waiting group last got one
}

type waiter struct {
	group   string
	granted chan struct{} // closed when the slot is this waiter's
}

// NewGate returns a gate of n slots (at least 1).
func NewGate(n int) *Gate {
	n = max(n, 1)
	return &Gate{slots: n, free: n, held: map[string]int{}, last: map[string]uint64{}}
}

// defaultGate is the process's gate: one slot per core.
var defaultGate = NewGate(runtime.GOMAXPROCS(0))

// DefaultGate is the gate that pools use unless their Options name another.
func DefaultGate() *Gate { return defaultGate }

// cap is how many slots one group may hold.
func (g *Gate) cap() int { return max(g.slots-1, 1) }

// acquire takes a slot for group, waiting while none is free to it. It
// gives up, without a slot, when cancel fires and stopped reports true;
// cancel firing alone only makes it look.
func (g *Gate) acquire(group string, cancel <-chan struct{}, stopped func() bool) bool {
	g.mu.Lock()
	if g.free > 0 && len(g.waiters) == 0 && g.held[group] < g.cap() {
		g.free--
		g.held[group]++
		g.grants++
		g.last[group] = g.grants
		g.mu.Unlock()
		return true
	}
	w := &waiter{group: group, granted: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.dispatch()
	g.mu.Unlock()
	for {
		select {
		case <-w.granted:
			return true
		case <-cancel:
			if !stopped() {
				continue
			}
			g.mu.Lock()
			select {
			case <-w.granted:
				// Granted as we gave up: hand it on.
				g.releaseLocked(group)
			default:
				g.remove(w)
			}
			g.mu.Unlock()
			return false
		}
	}
}

// release gives group's slot back.
func (g *Gate) release(group string) {
	g.mu.Lock()
	g.releaseLocked(group)
	g.mu.Unlock()
}

func (g *Gate) releaseLocked(group string) {
	g.free++
	if g.held[group]--; g.held[group] <= 0 {
		delete(g.held, group)
	}
	g.dispatch()
}

// dispatch hands free slots to the waiters of the groups holding fewest;
// among those, to the group served longest ago, so a group with many calls
// queued cannot take turn after turn from one that has a single call
// waiting; within a group, first come first served.
func (g *Gate) dispatch() {
	for g.free > 0 {
		best := -1
		for i, w := range g.waiters {
			h := g.held[w.group]
			if h >= g.cap() {
				continue
			}
			if best < 0 {
				best = i
				continue
			}
			b := g.waiters[best].group
			if hb := g.held[b]; h < hb || h == hb && g.last[w.group] < g.last[b] {
				best = i
			}
		}
		if best < 0 {
			return
		}
		w := g.waiters[best]
		g.waiters = append(g.waiters[:best], g.waiters[best+1:]...)
		g.free--
		g.held[w.group]++
		g.grants++
		g.last[w.group] = g.grants
		close(w.granted)
	}
	// Forget the turns of groups with no call waiting, so the map does
	// not grow with every app that ever ran.
	if len(g.last) > 2*len(g.waiters)+16 {
		for k := range g.last {
			if !slices.ContainsFunc(g.waiters, func(w *waiter) bool { return w.group == k }) {
				delete(g.last, k)
			}
		}
	}
}

func (g *Gate) remove(w *waiter) {
	for i, x := range g.waiters {
		if x == w {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			return
		}
	}
}
