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
// call that starts now is not charged for what happened before it, and a
// short call (most access.js calls end within a tick) is never charged.
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
// Past a limit the call is a suspect: the watchdog forces a garbage
// collection (rate-limited, since a GC is not free) to tell garbage from
// growth, and stops it if the growth is still there. Growth of more than
// twice a limit stops it at once. Single huge allocations, which could
// exhaust memory between two ticks, are refused up front by allocguard.go.

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

	// heapHardFactor: growth beyond this many limits stops a call
	// without waiting for a GC to confirm it. Garbage alone rarely
	// doubles past the limit within one call, and a doubling string
	// reaches gigabytes in the time a forced GC takes.
	heapHardFactor = 2

	// payerTicks is for how many ticks a big allocation makes its
	// runtime a payer of the heap's growth.
	payerTicks = 3

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
	lastGC  time.Time // watchdog goroutine only

	confirming atomic.Bool // a forced GC is under way
	prevHeap   uint64      // the last sample (mu)
	gonePayers int         // retired runtimes that allocated since the last tick (mu)
}

// watchState is what the watchdog knows of one VM's current call.
type watchState struct {
	gen        uint64 // call generation the base belongs to; 0: not measuring
	base       uint64 // lowest heap size seen during the call
	charged    uint64 // this call's share of the growth seen while it ran
	allocs     uint64 // the VM's bigAllocs at the last tick
	allocTicks int    // ticks it still counts as a payer
	doublings  int    // ticks in a row in which charged at least doubled
}

// suspect is a call, or the calls of one pool, charged past a limit.
type suspect struct {
	calls   []call
	base    uint64 // the lowest heap any of them started from
	charged uint64 // what they were charged together
	limit   uint64
	cause   stopCause
}

type call struct {
	vm  *VM
	gen uint64
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

func heapSample() []metrics.Sample {
	return []metrics.Sample{{Name: heapMetric}, {Name: stackMetric}}
}

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
				stalls.park()
				<-w.kickc
			}
			w.idle.Store(false)
			quiet = 0
			t.Reset(heapTick)
		}
		<-t.C
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
	for wp := range w.vms {
		if vm := wp.Value(); vm != nil && vm.active.Load() != 0 && !vm.waiting.Load() {
			return true
		}
	}
	return false
}

// readHeap is the memory that calls can grow: heap objects and stacks.
func readHeap(s []metrics.Sample) uint64 {
	metrics.Read(s)
	var n uint64
	for _, x := range s {
		if x.Value.Kind() == metrics.KindUint64 {
			n += x.Value.Uint64()
		}
	}
	return n
}

// check takes one sample and stops runaways. It reports whether any call
// was running.
func (w *heapWatch) check(s []metrics.Sample) (busy bool) {
	heap := readHeap(s)
	var suspects, stops []suspect
	ceiling := uint64(max(heapCeiling.Load(), 0))
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
		fresh    bool // started since the last tick
	}
	var runs []running
	// payers are the runtimes seen making big allocations since the last
	// tick, running or not: a call that allocated and ended in between
	// still takes its share of the growth (charged to nobody).
	payers := w.gonePayers
	w.gonePayers = 0
	veterans := 0
	for wp, st := range w.vms {
		vm := wp.Value()
		if vm == nil {
			delete(w.vms, wp) // collected without being retired
			continue
		}
		// A big allocation is counted before it is made, and making it
		// (zeroing megabytes, on a busy machine) can end ticks later: a
		// runtime that allocated in the last payerTicks ticks is still a
		// payer.
		n := vm.bigAllocs.Load()
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
		fresh := st.gen != g
		if fresh {
			st.gen, st.base, st.charged = g, heap, 0
		} else {
			veterans++
		}
		if heap < st.base {
			st.base = heap // a GC ran: growth counts from the low point
		}
		runs = append(runs, running{vm, st, g, allocing, fresh})
	}
	var doublers []*running
	for i := range runs {
		r := &runs[i]
		before := r.st.charged
		switch {
		case payers > 0:
			if r.allocing {
				r.st.charged += growth / uint64(payers)
			}
		case !r.fresh:
			r.st.charged += growth / uint64(veterans)
		}
		// Growth that a collection has since given back was garbage: a
		// call is never charged more than the heap grew while it ran, or
		// a long call that makes garbage as it goes would be charged every
		// rise and never a fall.
		r.st.charged = min(r.st.charged, heap-min(heap, r.st.base))
		// A call whose memory doubles tick after tick (a string doubled
		// in a loop) passes any limit within a few doublings, each one a
		// single allocation and copy that nothing can stop halfway, and
		// the copies stall the watchdog itself. Once it has doubled
		// twice in a row past half its limit, its next doubling would
		// pass the limit: it is stopped now.
		switch {
		case r.st.charged >= 2*before && r.st.charged > before:
			r.st.doublings++
		case r.st.charged > before:
			r.st.doublings = 0
		}
		if r.fresh {
			r.st.doublings = 0
		}
		// Only when it is the one call running for more than a tick:
		// with others, nothing says whose growth it was, and an innocent
		// call beside a bomb could seem to double.
		if r.st.doublings >= 2 && r.st.charged > uint64(r.vm.opts.HeapLimit)/2 && veterans == 1 && !r.fresh && payers == 0 {
			doublers = append(doublers, r)
		}
	}

	// The call charged the most, and each pool whose calls together are
	// charged past the pool's limit, are suspects; stopping one forgives
	// the others, since what they were charged was mostly its growth.
	var top *running
	pools := map[*Options]*suspect{}
	for i := range runs {
		r := &runs[i]
		if r.st.charged > uint64(r.vm.opts.HeapLimit) && (top == nil || r.st.charged > top.st.charged) {
			top = r
		}
		if r.st.charged == 0 || r.vm.opts.PoolHeapLimit <= 0 {
			continue
		}
		sp := pools[r.vm.opts]
		if sp == nil {
			sp = &suspect{base: r.st.base, limit: uint64(r.vm.opts.PoolHeapLimit), cause: causeHeap}
			pools[r.vm.opts] = sp
		}
		sp.calls = append(sp.calls, call{r.vm, r.g})
		sp.base = min(sp.base, r.st.base)
		sp.charged += r.st.charged
	}
	if top != nil {
		suspects = append(suspects, suspect{calls: []call{{top.vm, top.g}}, base: top.st.base, charged: top.st.charged, limit: uint64(top.vm.opts.HeapLimit), cause: causeHeap})
	}
	for _, r := range doublers {
		stops = append(stops, suspect{calls: []call{{r.vm, r.g}}, cause: causeHeap})
	}
	for _, sp := range pools {
		if sp.charged > sp.limit {
			suspects = append(suspects, *sp)
		}
	}
	if ceiling > 0 && heap > ceiling {
		// Over the process's ceiling: the calls that grew the heap
		// while they ran are suspects too. Until a collection runs,
		// the heap also holds the leftovers of calls stopped before.
		sp := suspect{limit: ceiling, cause: causeCeiling}
		for _, r := range runs {
			if !r.fresh && r.st.charged > 0 {
				sp.calls = append(sp.calls, call{r.vm, r.g})
			}
		}
		if heap > heapHardFactor*ceiling && growth > 0 {
			sp.charged = heap // past the hard factor: stop at once
		}
		suspects = append(suspects, sp)
	}
	// No garbage burst explains this much within one call; waiting for a
	// GC to confirm could cost gigabytes.
	kept := suspects[:0]
	for _, sp := range suspects {
		if sp.charged > heapHardFactor*sp.limit {
			stops = append(stops, sp)
		} else {
			kept = append(kept, sp)
		}
	}
	suspects = kept
	if len(stops) > 0 {
		for _, r := range runs {
			r.st.charged = 0
		}
	}
	w.mu.Unlock()
	for _, sp := range stops {
		for _, c := range sp.calls {
			c.vm.stop(c.gen, sp.cause)
		}
	}
	if len(stops) > 0 {
		// What they allocated is garbage now: collect it before it
		// counts against the next calls.
		suspects = append(suspects, suspect{})
	}
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

// overCeiling reports whether allocating size more bytes would take the
// heap past the ceiling. It runs on the allocating call's own goroutine, so
// a call that allocates in big pieces is stopped before the watchdog's next
// tick, and it is that call which waits for the collection that tells its
// garbage from the heap's real size; at most one such collection runs per
// heapGCGap, so a script cannot make the process collect without pause.
func overCeiling(size float64) bool {
	ceiling := heapCeiling.Load()
	if ceiling <= 0 {
		return false
	}
	s := heapSample()
	if float64(readHeap(s))+size <= float64(ceiling) {
		return false
	}
	now := time.Now().UnixNano()
	if last := lastCeilingGC.Load(); now-last >= int64(heapGCGap) && lastCeilingGC.CompareAndSwap(last, now) {
		runtime.GC()
	}
	return float64(readHeap(s))+size > float64(ceiling)
}

// lastCeilingGC is when overCeiling last collected, in Unix nanoseconds.
var lastCeilingGC atomic.Int64
