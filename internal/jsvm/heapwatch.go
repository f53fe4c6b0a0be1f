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
// heap size each call started from. Each tick's growth is charged to the
// calls that caused it: to those seen making big allocations through the
// guarded builtins (allocguard.go) when there are any, otherwise in equal
// shares to the calls that were already running at the last tick, so a
// call that starts now is not charged for what others did before it, and
// a short call (most access.js calls end within a tick) is never charged.
// Three limits apply to what a call is charged:
//
//   - its own HeapLimit;
//   - its pool's PoolHeapLimit, shared by all the calls running at once on
//     one compiled module, so one app's many concurrent calls cannot each
//     stay just under the per-call limit;
//   - the process's ceiling (SetHeapCeiling) on the whole heap: above it,
//     every call running for more than a tick is stopped, whoever was
//     charged, because the server's memory matters more than any call.
//
// Past a limit the call is a suspect, and it is stopped if its growth
// survives a garbage collection: garbage is not growth. The watchdog forces
// that collection (rate-limited, since a GC is not free) unless some call
// may be inside one long native step, such as the copy of a huge string:
// a forced collection stops the world, and the world cannot stop until
// that step ends, so every goroutine would wait it out, the watchdog too.
// Then suspects wait for the runtime's own collections instead. Growth of
// more than twice a limit, or memory that keeps doubling, stops a call at
// once. Single huge allocations, which could exhaust memory between two
// ticks, are refused up front by allocguard.go.

const (
	heapTick      = 2 * time.Millisecond
	heapIdleTicks = 50                     // park after this many ticks with no call running
	heapGCGap     = 100 * time.Millisecond // at most one forced GC per gap
	heapMetric    = "/memory/classes/heap/objects:bytes"
	// stackMetric counts too: goja recurses on the Go stack for some
	// work that JS frames do not bound (a property looked up along a long
	// prototype chain, from a getter that looks it up again), and a
	// goroutine stack that outgrows its maximum is a fatal error. Charged
	// like heap growth, a call whose stack runs away is stopped first.
	stackMetric = "/memory/classes/heap/stacks:bytes"
	// The collections completed, and the heap the last one found live,
	// judge suspects without forcing a collection.
	cyclesMetric = "/gc/cycles/total:gc-cycles"
	liveMetric   = "/gc/heap/live:bytes"
	// sizesMetric tells a tick's growth in a few big objects from that in
	// many small ones.
	sizesMetric = "/gc/heap/allocs-by-size:bytes"

	// heapHardFactor: growth beyond this many limits stops a call
	// without waiting for a GC to confirm it. Garbage alone rarely
	// doubles past the limit within one call, and a doubling string
	// reaches gigabytes in the time a forced GC takes.
	heapHardFactor = 2

	// heapGarbageFactor: growth in small pieces beyond this many limits
	// stops a call without waiting for a collection. Below it, such
	// growth may be garbage (a round trip through a parser makes a lot),
	// and only what survives a collection counts.
	heapGarbageFactor = 8

	// bigStep is growth within one tick that, doubling a call's memory,
	// may be a single native step still under way (a string copy), during
	// which no collection should be forced.
	bigStep = 16 << 20

	// bigPiece is the average size of the large objects allocated in a
	// tick from which its growth came in big pieces. Scripts make garbage
	// object by object, a few kilobytes each, or at most arrays of a
	// megabyte or two when they build them in a loop.
	bigPiece = 4 << 20

	// payerTicks is for how many ticks a big allocation makes its
	// runtime a payer of the heap's growth.
	payerTicks = 3

	// sweepTicks is how often the watchdog looks for runtimes collected
	// without being retired; it reaches the others only while they run.
	sweepTicks = 512

	// DefaultHeapCeiling is the process's heap ceiling unless
	// SetHeapCeiling changes it.
	DefaultHeapCeiling = 512 << 20
)

var heapCeiling atomic.Int64

func init() { heapCeiling.Store(DefaultHeapCeiling) }

// SetHeapCeiling sets the heap size (Go heap objects, in bytes) above which
// running JavaScript calls are stopped, whatever each was charged; 0 or less
// turns the ceiling off. It is process-wide, like the memory it guards.
func SetHeapCeiling(n int64) { heapCeiling.Store(n) }

var watchdog = &heapWatch{vms: make(map[weak.Pointer[VM]]*watchState), kickc: make(chan struct{}, 1)}

type heapWatch struct {
	mu sync.Mutex
	// vms holds every live VM with a heap limit. The pointers are weak
	// so a pool dropped without Close does not leak its runtimes here.
	vms     map[weak.Pointer[VM]]*watchState
	started bool
	idle    atomic.Bool // parked: begin must kick it awake
	kickc   chan struct{}

	confirming atomic.Bool // a forced GC is under way
	prevHeap   uint64      // the last sample (mu)
	prevLarge  uint64      // large objects allocated by then (mu)
	prevCounts []uint64    // the allocations-by-size histogram then (mu)
	gonePayers int         // retired runtimes that allocated since the last tick (mu)

	// What check works with, kept from tick to tick (mu): the watchdog
	// must not allocate, since an allocation during a collection can make
	// it assist the collector, and a collection cannot end while another
	// call copies a huge string: the watchdog would wait out the very
	// copy it is there to stop.
	ticks uint64 // ticks taken (mu)
	runs  []running
	found []suspect
	calls []call // the suspects' calls, each suspect's a range of them
	// bigEnded: a call that grew the heap by more than half its limit
	// ended since the last tick (mu).
	bigEnded bool
	// Suspects waiting for a collection became suspects when this many
	// had completed; suspecting tells whether any are waiting.
	suspectCycle uint64
	suspecting   bool
}

// watchState is what the watchdog knows of one VM's current call.
type watchState struct {
	sig  *signals
	gen  uint64 // call generation the base belongs to; 0: not measuring
	base uint64 // lowest heap size seen during the call
	// seen is the heap when the call was first seen, lowered by
	// collections since: what a collection's judgement counts from. base
	// may be the tick before, to charge a call's first big piece, but
	// what others allocated in that gap is not the call's to answer for.
	// (What the last collection found live would count others' growth
	// since then: a call beside a neighbour that just filled 300 MiB was
	// stopped for it.)
	seen       uint64
	limit      uint64 // the call's heap limit, kept for when it has ended
	charged    uint64 // this call's share of the growth seen while it ran
	allocs     uint64 // the VM's bigAllocs at the last tick
	allocTicks int    // ticks it still counts as a payer
	doublings  int    // ticks in a row in which charged at least doubled
	// stepping: the call's memory last grew by doubling in one big step,
	// and it may still be inside that step.
	stepping bool
}

func (w *heapWatch) add(vm *VM) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.vms[weak.Make(vm)] = &watchState{sig: vm.signals}
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
			// Woken from here, the watchdog would wait for this
			// goroutine to yield its P, and a call that goes straight
			// into copying a huge string yields nothing until the copy
			// ends. Let it take its first look now.
			runtime.Gosched()
		default:
		}
	}
}

// heapSample is what readHeap reads.
func heapSample() []metrics.Sample {
	return []metrics.Sample{{Name: heapMetric}, {Name: stackMetric}}
}

// watchSample is what the watchdog reads: the heap, then the collections.
func watchSample() []metrics.Sample {
	return append(heapSample(), metrics.Sample{Name: cyclesMetric}, metrics.Sample{Name: liveMetric}, metrics.Sample{Name: sizesMetric})
}

// largeObjects is how many objects too big for a size class (32 KiB) the
// process has allocated, from the histogram of allocations by size.
func largeObjects(x metrics.Sample) uint64 {
	if x.Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	c := x.Value.Float64Histogram().Counts
	if len(c) == 0 {
		return 0
	}
	return c[len(c)-1]
}

func sampled(x metrics.Sample) uint64 {
	if x.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return x.Value.Uint64()
}

func (w *heapWatch) loop() {
	s := watchSample()
	t := time.NewTicker(heapTick)
	fd := newFdTicker(heapTick)
	fd.reset()
	quiet := 0
	for {
		if quiet >= heapIdleTicks {
			t.Stop()
			fd.stop()
			// Publish idle before the last look, so a call that starts
			// now either is seen here or sees idle and kicks.
			w.idle.Store(true)
			if !w.anyActive() {
				stalls.park()
				<-w.kickc
				// Growth while it slept was nobody's: measure from now.
				w.rebase(s)
			}
			w.idle.Store(false)
			quiet = 0
			t.Reset(heapTick)
			fd.reset()
		}
		select {
		case <-t.C:
		case <-fd.C():
		}
		stalls.tick(mono())
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
	for _, st := range w.vms {
		if st.sig.active.Load() != 0 && !st.sig.waiting.Load() {
			return true
		}
	}
	return false
}

// rebase makes the heap in s the sample the next tick's growth counts from.
func (w *heapWatch) rebase(s []metrics.Sample) {
	heap := readHeap(s)
	w.mu.Lock()
	w.prevHeap, w.prevLarge = heap, largeObjects(s[4])
	w.mu.Unlock()
}

// readHeap is the memory that calls can grow: heap objects and stacks.
func readHeap(s []metrics.Sample) uint64 {
	metrics.Read(s)
	return sampled(s[0]) + sampled(s[1])
}

// check takes one sample and stops runaways. It reports whether any call
// was running.
func (w *heapWatch) check(s []metrics.Sample) bool {
	heap := readHeap(s)
	w.mu.Lock()
	small := w.smallBytes(s[4])
	w.mu.Unlock()
	return w.observe(sample{heap, sampled(s[2]), sampled(s[3]), largeObjects(s[4]), small}, uint64(max(heapCeiling.Load(), 0)))
}

// sample is what the watchdog reads at a tick.
type sample struct {
	heap   uint64 // heap objects and stacks
	cycles uint64 // collections completed
	live   uint64 // heap that the last collection found live
	large  uint64 // objects allocated too big for a size class
	small  uint64 // bytes allocated in smaller objects since the last tick, at most
}

// smallBytes bounds the bytes allocated in objects of a size class since
// the last tick, from the histogram of allocations by size (each counted
// at its bucket's upper bound). w.mu is held.
func (w *heapWatch) smallBytes(x metrics.Sample) uint64 {
	if x.Value.Kind() != metrics.KindFloat64Histogram {
		return 0
	}
	h := x.Value.Float64Histogram()
	if len(h.Counts) < 2 {
		return 0
	}
	if len(w.prevCounts) != len(h.Counts) {
		w.prevCounts = make([]uint64, len(h.Counts)) // once
		copy(w.prevCounts, h.Counts)
		return 0
	}
	var n uint64
	for i, c := range h.Counts[:len(h.Counts)-1] {
		n += (c - min(c, w.prevCounts[i])) * uint64(h.Buckets[i+1])
	}
	copy(w.prevCounts, h.Counts)
	return n
}

// observe is check given the sample.
func (w *heapWatch) observe(x sample, ceiling uint64) (busy bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	heap := x.heap
	growth, payers, veterans, stopping := w.gather(heap)
	// The heap grew in big pieces: a few objects of megabytes each, not a
	// script's garbage of many small ones.
	// The growth must be more than small objects made in the tick can
	// explain: a script that makes a few strings of 100 KiB among its
	// many small objects is not growing in big pieces.
	chunky := false
	if n := x.large - min(x.large, w.prevLarge); n > 0 {
		chunky = growth/n >= bigPiece && x.small <= growth/2
	}
	w.prevLarge = x.large
	stepping := false
	for i := range w.runs {
		w.charge(&w.runs[i], heap, growth, payers, veterans, chunky)
		stepping = stepping || w.runs[i].st.stepping
	}
	w.suspects(heap, growth, ceiling, chunky)
	if force := w.judge(x.cycles, x.live, stopping || stepping, chunky); force != nil {
		go w.confirm(force)
	}
	for _, sp := range w.found {
		if sp.now {
			for _, c := range w.calls[sp.lo:sp.hi] {
				c.vm.stop(c.gen, sp.cause)
			}
		}
	}
	if w.bigEnded {
		w.bigEnded = false
		collectAfterBigCall()
	}
	busy = len(w.runs) > 0
	// Kept for the next tick, the lists must not keep the runtimes
	// alive: a retired one holds what its last call allocated.
	clear(w.runs[:cap(w.runs)])
	clear(w.calls[:cap(w.calls)])
	return busy
}

// gather fills w.runs with the calls running JS and reports the heap's
// growth since the last tick, how many runtimes made big allocations
// since then (payers) and how many calls were running then too
// (veterans), and whether a call that was stopped still runs: it is then
// inside one native step.
func (w *heapWatch) gather(heap uint64) (growth uint64, payers, veterans int, stopping bool) {
	if heap > w.prevHeap && w.prevHeap > 0 {
		growth = heap - w.prevHeap
	}
	// A call seen for the first time began after the last sample: its
	// growth counts from there, so that a call that allocates in big
	// pieces is charged for the first of them too.
	start := heap
	if w.prevHeap > 0 {
		start = min(heap, w.prevHeap)
	}
	w.prevHeap = heap
	// payers are the runtimes seen making big allocations since the last
	// tick, running or not: a call that allocated and ended in between
	// still takes its share of the growth (charged to nobody).
	payers = w.gonePayers
	w.gonePayers = 0
	w.runs = w.runs[:0]
	w.ticks++
	sweep := w.ticks%sweepTicks == 0
	for wp, st := range w.vms {
		sig := st.sig
		if sweep && wp.Value() == nil {
			delete(w.vms, wp) // collected without being retired
			continue
		}
		// A big allocation is counted before it is made, and making it
		// (zeroing megabytes, on a busy machine) can end ticks later: a
		// runtime that allocated in the last payerTicks ticks is still a
		// payer.
		n := sig.bigAllocs.Load()
		if n != st.allocs {
			st.allocTicks = payerTicks
		} else if st.allocTicks > 0 {
			st.allocTicks--
		}
		allocing := st.allocTicks > 0
		st.allocs = n
		if allocing {
			payers++
		}
		g := sig.active.Load()
		if g == 0 {
			if st.gen != 0 && st.limit > 0 && st.charged > st.limit/2 {
				w.bigEnded = true // see collectAfterBigCall
			}
			st.gen = 0
			continue
		}
		stopping = stopping || sig.halted.Load()
		if sig.waiting.Load() {
			// Awaiting the host allocates nothing in JS; measure
			// afresh when it resumes (which kicks the watchdog).
			st.gen = 0
			continue
		}
		vm := wp.Value()
		if vm == nil {
			delete(w.vms, wp) // collected without being retired
			continue
		}
		fresh := st.gen != g
		if fresh {
			*st = watchState{sig: sig, gen: g, base: start, seen: heap, limit: uint64(max(vm.heapLimit(), 0)), allocs: st.allocs, allocTicks: st.allocTicks}
		} else {
			veterans++
		}
		if heap < st.base {
			st.base = heap // a GC ran: growth counts from the low point
		}
		st.seen = min(st.seen, heap)
		w.runs = append(w.runs, running{vm: vm, st: st, g: g, allocing: allocing, fresh: fresh})
	}
	return growth, payers, veterans, stopping
}

// charge gives r its share of the tick's growth, and tells whether its
// memory keeps doubling.
func (w *heapWatch) charge(r *running, heap, growth uint64, payers, veterans int, chunky bool) {
	st := r.st
	before := st.charged
	switch {
	case payers > 0:
		if r.allocing {
			st.charged += growth / uint64(payers)
		}
	case !r.fresh:
		st.charged += growth / uint64(veterans)
	}
	// Growth that a collection has since given back was garbage: a call
	// is never charged more than the heap grew while it ran, or a long
	// call that makes garbage as it goes would be charged every rise and
	// never a fall.
	st.charged = min(st.charged, heap-min(heap, st.base))
	added := st.charged - min(st.charged, before)
	// A doubling string's step is charged a little less than all before
	// it (the first piece came from elsewhere, a collection took some
	// back): growth of three quarters counts. Asking for a full doubling
	// missed steps, and the string doubled on to 256 MiB or more.
	doubled := added > 0 && added >= before-before/4
	// A call whose memory just doubled by a big piece may still be inside
	// the native step that makes it, the copy of a string that size.
	if added >= bigStep && doubled {
		st.stepping = true
	} else if added > 0 {
		st.stepping = false
	}
	// Growth too small to matter (other goroutines' allocations charged
	// in shares) neither counts as a doubling nor ends a run of them.
	// Only growth in big pieces counts as a doubling: garbage made in
	// small ones also doubles from tick to tick while no collection
	// runs, as on a heap that holds a lot live.
	switch {
	case doubled && chunky:
		st.doublings++
	case added > before/4:
		st.doublings = 0
	}
	// A call whose memory keeps doubling (a string doubled in a loop)
	// passes any limit within a few doublings, each one a single
	// allocation and copy that nothing can stop halfway. Once it has
	// doubled twice in a row past half its limit, its next doubling would
	// pass the limit. Past the limit, memory that doubled in big pieces is
	// no garbage that a collection would give back, and the next doubling
	// is already being copied. Either way it is stopped now, if the growth
	// is surely its own: it is the one call running for more than a tick,
	// or the one making big allocations. With others, nothing says whose
	// growth it was, and an innocent call beside a bomb could seem to
	// double.
	own := payers == 0 && veterans == btoi(!r.fresh) || payers == 1 && r.allocing
	limit := uint64(r.vm.heapLimit())
	burst := doubled && chunky && added >= bigStep && st.charged > limit
	r.doubler = own && (st.doublings >= 2 && st.charged > limit/2 && !r.fresh || burst)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
