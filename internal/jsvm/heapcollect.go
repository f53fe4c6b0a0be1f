package jsvm

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// A forced collection stops the world twice, and the world stops only when
// every goroutine reaches a safe point. A goroutine copying a huge string
// (another app's doubling) reaches none until the copy ends, which takes
// up to 10 ms a MiB where the memory is new to the machine (a virtual
// machine's first touch): every goroutine would wait that out. So
// collections are forced only while no call may be inside such a step, and
// at most one per heapGCGap.

// unsafeToCollect reports whether a call other than self may be inside one
// long native step: it was stopped and still runs, or its memory last grew
// by doubling in one big step.
func (w *heapWatch) unsafeToCollect(self *VM) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, st := range w.vms {
		if self != nil && st.sig == self.signals {
			continue
		}
		if g := st.sig.active.Load(); g != 0 && (st.sig.halted.Load() || st.gen == g && st.stepping) {
			return true
		}
	}
	return false
}

// lastForcedGC is when the last forced collection began, in Unix
// nanoseconds.
var lastForcedGC atomic.Int64

// gcMu is held while a collection is forced, so that a caller that finds
// it is not yet its turn waits for the one under way to end.
var gcMu sync.Mutex

// claimGC takes the turn to force a collection, if heapGCGap has passed
// since the last one.
func claimGC() bool {
	now := time.Now().UnixNano()
	last := lastForcedGC.Load()
	return now-last >= int64(heapGCGap) && lastForcedGC.CompareAndSwap(last, now)
}

// collect forces a collection unless that is unsafe or not yet its turn;
// a collection already under way is waited for. It reports whether it
// forced one.
func collect(self *VM) bool {
	if watchdog.unsafeToCollect(self) {
		return false
	}
	gcMu.Lock()
	defer gcMu.Unlock()
	if !claimGC() {
		return false
	}
	runtime.GC()
	return true
}

// collectWhenDue is collect at the next turn, waiting for it.
func collectWhenDue(self *VM) bool {
	if wait := time.Duration(lastForcedGC.Load() + int64(heapGCGap) - time.Now().UnixNano()); wait > 0 {
		time.Sleep(min(wait, heapGCGap))
	}
	return collect(self)
}

var afterStopMu sync.Mutex

// collectAfterStop collects what the retired runtime vm, stopped for
// memory, left behind, before it counts against the next calls. It runs
// before the pool replaces the runtime, so a script that is stopped again
// and again waits for the collections it causes. Stopped runtimes take
// turns, and one collection serves all those that were unreachable by
// then; while collecting is unsafe, or the runtime is still reachable (its
// call is returning), it tries again a little later, a few times.
func collectAfterStop(vm weak.Pointer[VM]) {
	afterStopMu.Lock()
	defer afterStopMu.Unlock()
	for range 10 {
		if vm.Value() == nil {
			return // collected
		}
		if !collectWhenDue(nil) {
			time.Sleep(10 * heapTick)
		}
	}
}

// overCeiling reports whether allocating size more bytes would take the
// heap past the ceiling. It runs on the allocating call's own goroutine, so
// a call that allocates in big pieces is stopped before the watchdog's next
// tick, and it is that call which waits for the collection that tells its
// garbage from the heap's real size.
func overCeiling(vm *VM, size float64) bool {
	ceiling := heapCeiling.Load()
	if ceiling <= 0 {
		return false
	}
	s := heapSample()
	if float64(readHeap(s))+size <= float64(ceiling) {
		return false
	}
	collectWhenDue(vm)
	return float64(readHeap(s))+size > float64(ceiling)
}

var collectingAfterBig atomic.Bool

// collectAfterBigCall collects, at the next turn, what a call that grew the
// heap by more than half its limit left behind when it ended. Left lying
// about, that garbage would be counted in the heap the next calls start
// from, and a collection during one of them would hide as much of its
// own memory: a call past its limit could pass for a while after a big
// one. One such collection waits at a time.
func collectAfterBigCall() {
	if !collectingAfterBig.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer collectingAfterBig.Store(false)
		collectWhenDue(nil)
	}()
}
