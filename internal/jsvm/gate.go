package jsvm

import (
	"runtime"
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
	mu     sync.Mutex
	slots  int
	free   int
	held   map[string]int
	queues map[string][]*waiter // each group's waiters, first come first
	queued int                  // waiters in all queues
	arrive uint64               // waiters queued so far, to order them
	grants uint64               // slots handed out so far
	last   map[string]uint64    // grants when each waiting group last got one
}

type waiter struct {
	group   string
	arrival uint64
	granted chan struct{} // closed when the slot is this waiter's
}

// NewGate returns a gate of n slots (at least 1).
func NewGate(n int) *Gate {
	n = max(n, 1)
	return &Gate{slots: n, free: n, held: map[string]int{}, queues: map[string][]*waiter{}, last: map[string]uint64{}}
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
	if g.free > 0 && g.queued == 0 && g.held[group] < g.cap() {
		g.grant(group)
		g.mu.Unlock()
		return true
	}
	g.arrive++
	w := &waiter{group: group, arrival: g.arrive, granted: make(chan struct{})}
	g.queues[group] = append(g.queues[group], w)
	g.queued++
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

func (g *Gate) grant(group string) {
	g.free--
	g.held[group]++
	g.grants++
	g.last[group] = g.grants
}

// dispatch hands free slots to the waiters of the groups holding fewest;
// among those, to the group served longest ago, so a group with many calls
// queued cannot take turn after turn from one that has a single call
// waiting; then to the group whose first waiter came first. Within a
// group, first come first served. It looks at groups, not waiters, so a
// release costs the same with one call waiting or hundreds.
func (g *Gate) dispatch() {
	for g.free > 0 {
		best := ""
		var bq []*waiter
		for group, q := range g.queues {
			h := g.held[group]
			if h >= g.cap() {
				continue
			}
			if bq != nil {
				hb := g.held[best]
				if h > hb || h == hb && (g.last[group] > g.last[best] ||
					g.last[group] == g.last[best] && q[0].arrival > bq[0].arrival) {
					continue
				}
			}
			best, bq = group, q
		}
		if bq == nil {
			return
		}
		w := bq[0]
		g.pop(best)
		g.grant(best)
		close(w.granted)
	}
	// Forget the turns of groups with no call waiting, so the map does
	// not grow with every app that ever ran.
	if len(g.last) > 2*len(g.queues)+16 {
		for k := range g.last {
			if _, waiting := g.queues[k]; !waiting {
				delete(g.last, k)
			}
		}
	}
}

// pop takes the first waiter off group's queue.
func (g *Gate) pop(group string) {
	q := g.queues[group]
	q[0] = nil
	if len(q) == 1 {
		delete(g.queues, group)
	} else {
		g.queues[group] = q[1:]
	}
	g.queued--
}

func (g *Gate) remove(w *waiter) {
	q := g.queues[w.group]
	for i, x := range q {
		if x == w {
			q = append(q[:i], q[i+1:]...)
			g.queued--
			break
		}
	}
	if len(q) == 0 {
		delete(g.queues, w.group)
	} else {
		g.queues[w.group] = q
	}
}
