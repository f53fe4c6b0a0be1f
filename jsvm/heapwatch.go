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
// growth is still there it stops the call. Growth is charged to calls by
// share: each tick's growth is split among the calls running JS during
// that tick, so a call that merely overlaps a runaway in another app is
// charged a small part of it and keeps running, while the runaway, which
// runs at every tick, is charged the bulk. Single huge allocations, which
// could exhaust memory between two ticks, are refused up front by
// allocguard.go.

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
	prevHeap   uint64      // the last sample (mu)
	gonePayers int         // retired runtimes that allocated since the last tick (mu)
}

// watchState is what the watchdog knows of one VM's current call.
type watchState struct {
	gen     uint64 // call generation the base belongs to; 0: not measuring
	base    uint64 // lowest heap size seen during the call
	charged uint64 // this call's share of the growth seen while it ran
	allocs  uint64 // the VM's bigAllocs at the last tick
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
	wp := weak.Make(vm)
	if st := w.vms[wp]; st != nil && vm.bigAllocs.Load() != st.allocs {
		// It allocated since the last tick and is gone now: the next
		// tick's growth is partly its own.
		w.gonePayers++
	}
	delete(w.vms, wp)
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
		if vm := wp.Value(); vm != nil && vm.active.Load() != 0 && !vm.waiting.Load() {
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
	var growth uint64
	if heap > w.prevHeap && w.prevHeap > 0 {
		growth = heap - w.prevHeap
	}
	w.prevHeap = heap
	type running struct {
		vm       *VM
		st       *watchState
		g        uint64
		allocing bool // made big allocations since the last tick
	}
	var runs []running
	// payers are the runtimes seen making big allocations since the last
	// tick, running or not: a call that allocated and ended in between
	// still takes its share of the growth (charged to nobody).
	payers := w.gonePayers
	w.gonePayers = 0
	for wp, st := range w.vms {
		vm := wp.Value()
		if vm == nil {
			delete(w.vms, wp) // collected without being retired
			continue
		}
		n := vm.bigAllocs.Load()
		allocing := n != st.allocs
		st.allocs = n
		if allocing {
			payers++
		}
		g := vm.active.Load()
		if g == 0 {
			st.gen = 0
			continue
		}
		if vm.waiting.Load() {
			// Awaiting the host allocates nothing in JS; measure
			// afresh when it resumes (which kicks the watchdog).
			st.gen = 0
			continue
		}
		busy = true
		if st.gen != g {
			st.gen, st.base, st.charged = g, heap, 0
		}
		if heap < st.base {
			st.base = heap // a GC ran: growth counts from the low point
		}
		runs = append(runs, running{vm, st, g, allocing})
	}
	// Growth goes to the calls seen making big allocations. When none
	// was seen, it goes to the only call running, if there is just one:
	// with several, nothing tells whose it is (runtimes being replaced,
	// modules loading), and the deadline remains the backstop. Only the
	// call charged the most is a suspect, and stopping it forgives the
	// others: what they were charged was mostly its growth.
	var top *running
	for i := range runs {
		r := &runs[i]
		switch {
		case payers == 0 && len(runs) == 1:
			r.st.charged += growth
		case r.allocing:
			r.st.charged += growth / uint64(payers)
		}
		if r.st.charged > uint64(r.vm.opts.HeapLimit) && (top == nil || r.st.charged > top.st.charged) {
			top = r
		}
	}
	if top != nil {
		limit := uint64(top.vm.opts.HeapLimit)
		if top.st.charged > heapHardFactor*limit {
			// No garbage burst explains this much within one call;
			// waiting for a GC to confirm could cost gigabytes.
			top.vm.stop(top.g, causeHeap)
			for _, r := range runs {
				r.st.charged = 0
			}
		} else {
			suspects = append(suspects, suspect{vm: top.vm, gen: top.g, base: top.st.base})
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
