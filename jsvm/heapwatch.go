package jsvm

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// goja has no memory limit and no per-runtime accounting, so the heap
// guard is necessarily approximate. One watchdog goroutine per process
// samples the Go heap (runtime/metrics, a few hundred nanoseconds) every
// couple of milliseconds while any guarded call runs JS, and remembers the
// heap size each call started from. When the heap has grown by more than
// a call's HeapLimit since then, it forces a garbage collection to tell
// garbage from growth (rate-limited, since a GC is not free), and if the
// growth is still there it stops every call that has been running through
// it. A runaway allocator is therefore stopped within a few ticks of
// crossing the limit; short calls (microseconds) are almost never caught
// in the crossfire, because they are rarely running at two ticks in a
// row. Single huge allocations, which could exhaust memory between two
// ticks, are refused up front by allocguard.go.

const (
	heapTick      = 2 * time.Millisecond
	heapIdleTicks = 50                     // park after this many ticks with no call running
	heapGCGap     = 100 * time.Millisecond // at most one forced GC per gap
	heapMetric    = "/memory/classes/heap/objects:bytes"

	// heapHardFactor: growth beyond this many limits stops a call
	// without waiting for a GC to confirm it. Garbage alone rarely
	// doubles past the limit within one call, and a doubling string
	// reaches gigabytes in the time a forced GC takes.
	heapHardFactor = 2
)

var watchdog = &heapWatch{vms: make(map[weak.Pointer[VM]]*watchState), kickc: make(chan struct{}, 1)}

type heapWatch struct {
	mu sync.Mutex
	// vms holds every live VM with a heap limit. The pointers are weak
	// so a pool dropped without Close does not leak its runtimes here.
	vms     map[weak.Pointer[VM]]*watchState
	started bool
	idle    atomic.Bool // parked: begin must kick it awake
	kickc   chan struct{}
	lastGC  time.Time // watchdog goroutine only

	confirming atomic.Bool // a forced GC is under way
}

// watchState is what the watchdog knows of one VM's current call.
type watchState struct {
	gen  uint64 // call generation the base belongs to; 0: not measuring
	base uint64 // lowest heap size seen during the call
}

type suspect struct {
	vm   *VM
	gen  uint64
	base uint64
}

func (w *heapWatch) add(vm *VM) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.vms[weak.Make(vm)] = &watchState{}
	if !w.started {
		w.started = true
		w.idle.Store(true)
		go w.loop()
	}
}

func (w *heapWatch) remove(vm *VM) {
	w.mu.Lock()
	delete(w.vms, weak.Make(vm))
	w.mu.Unlock()
}

// kick wakes a parked watchdog. It is on every call's path, so it is one
// atomic load when the watchdog is already awake.
func (w *heapWatch) kick() {
	if w.idle.Load() {
		select {
		case w.kickc <- struct{}{}:
		default:
		}
	}
}

func heapSample() []metrics.Sample { return []metrics.Sample{{Name: heapMetric}} }

func (w *heapWatch) loop() {
	s := heapSample()
	t := time.NewTicker(heapTick)
	quiet := 0
	for {
		if quiet >= heapIdleTicks {
			t.Stop()
			// Publish idle before the last look, so a call that starts
			// now either is seen here or sees idle and kicks.
			w.idle.Store(true)
			if !w.anyActive() {
				<-w.kickc
			}
			w.idle.Store(false)
			quiet = 0
			t.Reset(heapTick)
		}
		<-t.C
		if w.check(s) {
			quiet = 0
		} else {
			quiet++
		}
	}
}

func (w *heapWatch) anyActive() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for wp := range w.vms {
		if vm := wp.Value(); vm != nil && vm.active.Load() != 0 {
			return true
		}
	}
	return false
}

func readHeap(s []metrics.Sample) uint64 {
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// check takes one sample and stops runaways. It reports whether any call
// was running.
func (w *heapWatch) check(s []metrics.Sample) (busy bool) {
	heap := readHeap(s)
	var suspects []suspect
	w.mu.Lock()
	for wp, st := range w.vms {
		vm := wp.Value()
		if vm == nil {
			delete(w.vms, wp) // collected without being retired
			continue
		}
		g := vm.active.Load()
		if g == 0 {
			st.gen = 0
			continue
		}
		busy = true
		if vm.waiting.Load() {
			// Awaiting the host allocates nothing in JS; measure
			// afresh when it resumes.
			st.gen = 0
			continue
		}
		if st.gen != g {
			st.gen, st.base = g, heap
			continue
		}
		if heap < st.base {
			st.base = heap // a GC ran: growth counts from the low point
		}
		limit := uint64(vm.opts.HeapLimit)
		switch growth := heap - st.base; {
		case growth > heapHardFactor*limit:
			// No garbage burst explains this much within one call;
			// waiting for a GC to confirm could cost gigabytes.
			vm.stop(g, causeHeap)
		case growth > limit:
			suspects = append(suspects, suspect{vm: vm, gen: g, base: st.base})
		}
	}
	w.mu.Unlock()
	if len(suspects) > 0 && !w.confirming.Load() && time.Since(w.lastGC) >= heapGCGap {
		w.lastGC = time.Now()
		w.confirming.Store(true)
		go w.confirm(suspects)
	}
	return busy
}

// confirm forces a collection so garbage does not count as growth, then
// stops the suspects whose growth survived it. It runs on its own
// goroutine so the watchdog keeps sampling (and applying the hard cap)
// while the collection runs.
func (w *heapWatch) confirm(suspects []suspect) {
	defer w.confirming.Store(false)
	runtime.GC()
	heap := readHeap(heapSample())
	for _, sp := range suspects {
		if heap > sp.base && heap-sp.base > uint64(sp.vm.opts.HeapLimit) {
			sp.vm.stop(sp.gen, causeHeap)
		}
	}
}
