package jsvm

import (
	"runtime"
	"runtime/metrics"
	"slices"
)

// running is a call that runs JS at this tick.
type running struct {
	vm       *VM
	st       *watchState
	g        uint64
	allocing bool // made big allocations since the last tick
	fresh    bool // started since the last tick
	doubler  bool // its memory keeps doubling
	pooled   bool // counted in its pool's suspect
}

// suspect is a call, or the calls of one pool, charged past a limit.
type suspect struct {
	lo, hi  int    // its calls: calls[lo:hi]
	base    uint64 // the lowest heap any of them was first seen at (seen)
	charged uint64 // what they were charged together
	limit   uint64
	cause   stopCause
	now     bool // stop without waiting for a collection
}

type call struct {
	vm  *VM
	gen uint64
}

// suspects fills w.found and w.calls from w.runs: the calls whose memory
// keeps doubling, the call charged the most, each pool whose calls
// together are charged past the pool's limit, and above the ceiling every
// call that grew the heap. chunky: the tick's growth came in big pieces.
func (w *heapWatch) suspects(heap, growth, ceiling uint64, chunky bool) {
	w.found, w.calls = w.found[:0], w.calls[:0]
	add := func(sp suspect) {
		sp.hi = len(w.calls)
		w.found = append(w.found, sp)
	}
	var top *running
	for i := range w.runs {
		r := &w.runs[i]
		if r.st.charged > uint64(r.vm.heapLimit()) && (top == nil || r.st.charged > top.st.charged) {
			top = r
		}
		if r.doubler {
			sp := suspect{lo: len(w.calls), cause: causeHeap, now: true}
			w.calls = append(w.calls, call{r.vm, r.g})
			add(sp)
		}
	}
	if top != nil {
		sp := suspect{lo: len(w.calls), base: top.st.seen, charged: top.st.charged, limit: uint64(top.vm.heapLimit()), cause: causeHeap}
		w.calls = append(w.calls, call{top.vm, top.g})
		add(sp)
	}
	for i := range w.runs {
		r := &w.runs[i]
		if r.pooled || r.st.charged == 0 || r.vm.poolHeapLimit() <= 0 {
			continue
		}
		sp := suspect{lo: len(w.calls), base: r.st.seen, limit: uint64(r.vm.poolHeapLimit()), cause: causeHeap}
		for j := i; j < len(w.runs); j++ {
			if o := &w.runs[j]; o.vm.opts == r.vm.opts && o.st.charged > 0 {
				o.pooled = true
				w.calls = append(w.calls, call{o.vm, o.g})
				sp.base = min(sp.base, o.st.seen)
				sp.charged += o.st.charged
			}
		}
		if sp.charged > sp.limit {
			add(sp)
		} else {
			w.calls = w.calls[:sp.lo]
		}
	}
	if ceiling > 0 && heap > ceiling {
		// Over the process's ceiling: the calls that grew the heap
		// while they ran are suspects too. Until a collection runs,
		// the heap also holds the leftovers of calls stopped before.
		sp := suspect{lo: len(w.calls), limit: ceiling, cause: causeCeiling}
		for _, r := range w.runs {
			if !r.fresh && r.st.charged > 0 {
				w.calls = append(w.calls, call{r.vm, r.g})
			}
		}
		if heap > heapHardFactor*ceiling && growth > 0 {
			sp.charged = heap // past the hard factor: stop at once
		}
		// Growth in big pieces past the ceiling is no garbage that a
		// collection would give back, and it is how strings doubled by
		// several calls at once grow: no one call's growth is surely
		// its own, so none is a doubler, and the collection that would
		// judge them waits for their copies to end.
		sp.now = chunky && len(w.calls) > sp.lo
		add(sp)
	}
}

// judge marks the suspects to stop now, and returns those that a forced
// collection should judge, if one may be forced: not while a call may be
// inside a long native step (unsafe). Then a collection of the runtime's
// own judges them, the first to begin after they became suspects. Stopping
// one forgives the others, since what they were charged was mostly its
// growth.
func (w *heapWatch) judge(cycles, live uint64, unsafe, chunky bool) []judged {
	for i := range w.found {
		if sp := &w.found[i]; sp.charged > heapHardFactor*sp.limit && chunky || sp.charged > heapGarbageFactor*sp.limit {
			// Growth in big pieces is no garbage burst, and waiting
			// for a collection could cost gigabytes. Growth in small
			// ones may be garbage, the call's or anyone's: a heap
			// that holds a lot live is collected rarely, so garbage
			// piles up to many limits between collections.
			sp.now = true
		}
	}
	// A call stopped now is inside its last step still.
	unsafe = unsafe || slices.ContainsFunc(w.found, func(sp suspect) bool { return sp.now })
	waiting := slices.ContainsFunc(w.found, func(sp suspect) bool { return !sp.now })
	var force []judged
	switch {
	case !waiting:
		w.suspecting = false
	case !unsafe && !w.confirming.Load() && claimGC():
		// Allocating here is fine: no call is inside a step that
		// would hold a collection up.
		for _, sp := range w.found {
			if !sp.now {
				force = append(force, judged{slices.Clone(w.calls[sp.lo:sp.hi]), sp.base, sp.limit, sp.cause})
			}
		}
		w.confirming.Store(true)
		w.suspecting = false
	case !w.suspecting:
		w.suspecting, w.suspectCycle = true, cycles
	case cycles >= w.suspectCycle+2:
		for i := range w.found {
			if sp := &w.found[i]; live > sp.base && live-sp.base > sp.limit {
				sp.now = true
			}
		}
		w.suspecting = false
	}
	if slices.ContainsFunc(w.found, func(sp suspect) bool { return sp.now }) {
		for i := range w.runs {
			w.runs[i].st.charged = 0
		}
	}
	return force
}

// judged is a suspect handed to a forced collection.
type judged struct {
	calls       []call
	base, limit uint64
	cause       stopCause
}

// confirm forces a collection so garbage does not count as growth, then
// stops the suspects whose growth survived it. It runs on its own
// goroutine so the watchdog keeps sampling (and applying the hard cap)
// while the collection runs.
func (w *heapWatch) confirm(suspects []judged) {
	defer w.confirming.Store(false)
	gcMu.Lock()
	runtime.GC()
	gcMu.Unlock()
	// What the collection found live, not the heap now: others keep
	// allocating garbage while it runs, and a suspect is charged for
	// none of it.
	s := []metrics.Sample{{Name: liveMetric}, {Name: stackMetric}}
	metrics.Read(s)
	heap := sampled(s[0]) + sampled(s[1])
	for _, sp := range suspects {
		if len(sp.calls) > 0 && heap > sp.base && heap-sp.base > sp.limit {
			for _, c := range sp.calls {
				c.vm.stop(c.gen, sp.cause)
			}
			w.forgive()
		}
	}
}

// forgive clears every call's charge after a runaway was stopped: what
// they were charged was mostly its growth.
func (w *heapWatch) forgive() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, st := range w.vms {
		st.charged = 0
	}
}
