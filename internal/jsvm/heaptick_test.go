package jsvm

import (
	"errors"
	"testing"
	"weak"
)

const mb = 1 << 20

// tickWatch is a heap watchdog of the test's own, fed made-up samples, with
// one runtime of a pool registered in it.
type tickWatch struct {
	w     *heapWatch
	vm    *VM
	large uint64 // large objects allocated so far
}

func newTickWatch(t *testing.T) *tickWatch {
	t.Helper()
	p := newTestPool(t, "access.js", `export function ok() { return 1 }`, Options{Size: 1, HeapLimit: 64 * mb})
	vm := <-p.idle
	t.Cleanup(func() { vm.active.Store(0); p.idle <- vm })
	w := &heapWatch{vms: map[weak.Pointer[VM]]*watchState{weak.Make(vm): {sig: vm.signals}}}
	return &tickWatch{w: w, vm: vm}
}

// begin makes the runtime look busy with a new call, as VM.begin does.
func (tw *tickWatch) begin() {
	tw.vm.mu.Lock()
	tw.vm.gen++
	tw.vm.cause = causeNone
	tw.vm.halted.Store(false)
	tw.vm.active.Store(tw.vm.gen)
	tw.vm.mu.Unlock()
}

// tick feeds the watchdog a sample of heap MiB, grown since the last in
// small objects.
func (tw *tickWatch) tick(heap, cycles, live uint64) {
	tw.w.observe(sample{heap: heap * mb, cycles: cycles, live: live * mb, large: tw.large}, 0)
}

// grow is tick for a heap grown in n large objects.
func (tw *tickWatch) grow(heap, n uint64) {
	tw.large += n
	tw.tick(heap, 0, 0)
}

// suspectInAStep makes the call a suspect whose memory has just doubled,
// from 30 to 86 MiB, and not in big pieces: it is not stopped at once, but
// it may be inside a step still, and a collection is not forced.
func (tw *tickWatch) suspectInAStep() {
	tw.tick(100, 0, 0)
	tw.begin()
	for _, heap := range []uint64{110, 130, 140} {
		tw.tick(heap, 0, 0)
	}
	tw.tick(196, 0, 0)
}

func (tw *tickWatch) stopped() bool {
	tw.vm.mu.Lock()
	defer tw.vm.mu.Unlock()
	return tw.vm.cause == causeHeap
}

// TestFirstTickChargesABigAllocator: a call that allocates in big pieces
// from its start, a string doubled from a megabyte, can pass its limit
// before the watchdog first sees it. What it allocated since the sample
// before counts: past its limit and doubling, it is stopped at that first
// look, before it copies the next doubling.
func TestFirstTickChargesABigAllocator(t *testing.T) {
	tw := newTickWatch(t)
	tw.tick(100, 0, 0)
	tw.begin()
	tw.vm.bigAllocs.Add(1) // "x".repeat(1 << 20)
	tw.grow(100+127, 7)    // and doubled from there to 64 MiB
	if !tw.stopped() {
		t.Fatal("a call that grew the heap by 127 MiB in its first tick was not stopped")
	}
}

// TestDoublingInBigPiecesStopsAtOnce: memory that doubles past the limit
// in big pieces is a doubling string's, and the call is stopped at once.
// Memory doubled in many small pieces can be garbage a busy script made
// within a late tick: that waits for a collection to judge it.
func TestDoublingInBigPiecesStopsAtOnce(t *testing.T) {
	for _, tc := range []struct {
		pieces uint64
		stop   bool
	}{{1, true}, {2, true}, {0, false}, {40, false}} {
		tw := newTickWatch(t)
		tw.tick(100, 0, 0)
		tw.begin()
		for _, heap := range []uint64{110, 130, 140} {
			tw.tick(heap, 0, 0)
		}
		tw.grow(230, tc.pieces)
		if tw.stopped() != tc.stop {
			t.Errorf("doubled from 30 to 120 MiB in %d large objects: stopped %v, want %v", tc.pieces, tw.stopped(), tc.stop)
		}
	}
}

// TestNoCollectionForcedDuringAStep: a suspect is judged by a collection,
// but one forced while a call may still be copying a huge string would hold
// every goroutine until the copy ends. The suspect then waits for a
// collection of the runtime's own, which judges by the heap it found live.
func TestNoCollectionForcedDuringAStep(t *testing.T) {
	for _, tc := range []struct {
		name string
		live uint64
		stop bool
	}{
		{"growth that stays", 190, true},
		{"garbage", 120, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tw := newTickWatch(t)
			tw.suspectInAStep()
			if !tw.w.unsafeToCollect(nil) {
				t.Fatal("a call whose memory just doubled, by 56 MiB, counts as safe to collect beside")
			}
			if tw.w.confirming.Load() || tw.stopped() {
				t.Fatalf("a collection was forced (%v) or the call stopped (%v) while it may be inside a step", tw.w.confirming.Load(), tw.stopped())
			}
			tw.tick(196, 1, 0)
			tw.tick(196, 2, tc.live) // the runtime's own collection ended
			if tw.stopped() != tc.stop {
				t.Fatalf("with %d MiB found live after a start at 100 MiB: stopped %v, want %v", tc.live, tw.stopped(), tc.stop)
			}
		})
	}
}

// TestStoppedCallStillRunningIsUnsafeToCollect: a call stopped while it
// copies a huge string runs on until the copy ends.
func TestStoppedCallStillRunningIsUnsafeToCollect(t *testing.T) {
	tw := newTickWatch(t)
	tw.begin()
	if tw.w.unsafeToCollect(nil) {
		t.Fatal("a call that allocated nothing makes collecting unsafe")
	}
	tw.vm.stop(tw.vm.active.Load(), causeHeap)
	if !tw.w.unsafeToCollect(nil) {
		t.Fatal("a stopped call that still runs counts as safe to collect beside")
	}
	if tw.w.unsafeToCollect(tw.vm) {
		t.Fatal("a call is unsafe to collect beside itself")
	}
	tw.vm.active.Store(0)
	if tw.w.unsafeToCollect(nil) {
		t.Fatal("a call that ended still makes collecting unsafe")
	}
}

// TestWatchdogTickDoesNotAllocate: an allocation while a collection runs
// can make the watchdog assist it, and the collection cannot end while a
// call copies a huge string: the watchdog would wait out the very copy it
// is there to stop.
func TestWatchdogTickDoesNotAllocate(t *testing.T) {
	tw := newTickWatch(t)
	tw.suspectInAStep()
	if len(tw.w.found) == 0 || tw.stopped() || tw.w.confirming.Load() {
		t.Fatal("the call should be a suspect waiting for a collection")
	}
	if n := testing.AllocsPerRun(100, func() { tw.tick(196, 0, 0) }); n != 0 {
		t.Fatalf("a tick allocates %v times", n)
	}
	s := watchSample()
	readHeap(s)
	if n := testing.AllocsPerRun(100, func() { readHeap(s) }); n != 0 {
		t.Fatalf("taking a sample allocates %v times", n)
	}
}

// TestRuntimeStoppedForMemoryIsReplacedAfterACollection: what it allocated
// must not count against the next calls, and a script stopped again and
// again waits for the collections it causes.
func TestRuntimeStoppedForMemoryIsReplacedAfterACollection(t *testing.T) {
	p := newTestPool(t, "access.js", runawayModule, Options{Size: 1})
	vm := <-p.idle
	stopped := weak.Make(vm)
	p.idle <- vm
	vm = nil
	if _, err := callJSON(t, p, "hugeString"); !errors.Is(err, ErrHeapLimit) {
		t.Fatalf("got %v, want the heap limit", err)
	}
	mustJSON(t, p, "ok", `{"id":"a"}`)
	if stopped.Value() != nil {
		t.Fatal("the runtime was replaced before a collection took the stopped one")
	}
}

// TestWatchdogKeepsNoRuntimeAlive: the lists a tick works with are kept
// for the next tick, and a runtime retired in between must not stay
// reachable through them with what its last call allocated.
func TestWatchdogKeepsNoRuntimeAlive(t *testing.T) {
	tw := newTickWatch(t)
	tw.suspectInAStep()
	for _, r := range tw.w.runs[:cap(tw.w.runs)] {
		if r.vm != nil {
			t.Fatal("the running calls' list still holds a runtime after the tick")
		}
	}
	for _, c := range tw.w.calls[:cap(tw.w.calls)] {
		if c.vm != nil {
			t.Fatal("the suspects' calls still hold a runtime after the tick")
		}
	}
}

// TestDoublersPastTheCeilingStopAtOnce: calls that double strings side by
// side grow the heap in big pieces, and no one call's growth is surely its
// own. Past the process's ceiling they are stopped at that tick, not after a
// collection that their copies hold up; growth in small pieces past it
// still waits to be judged.
func TestDoublersPastTheCeilingStopAtOnce(t *testing.T) {
	for _, tc := range []struct {
		pieces uint64
		stop   bool
	}{{2, true}, {0, false}} {
		p := newTestPool(t, "access.js", `export function ok() { return 1 }`, Options{Size: 2, HeapLimit: 1 << 30, PoolHeapLimit: -1})
		w := &heapWatch{vms: map[weak.Pointer[VM]]*watchState{}}
		var vms []*tickWatch
		for range 2 {
			vm := borrow(t, p)
			t.Cleanup(func() { vm.active.Store(0); p.idle <- vm })
			w.vms[weak.Make(vm)] = &watchState{sig: vm.signals}
			vms = append(vms, &tickWatch{w: w, vm: vm})
		}
		const ceiling = 200 * mb
		large := uint64(0)
		tick := func(heap uint64) { w.observe(sample{heap: heap * mb, large: large}, ceiling) }
		tick(100)
		for _, tw := range vms {
			tw.begin()
		}
		tick(110)
		tick(120)
		large += tc.pieces
		tick(260)
		for i, tw := range vms {
			tw.vm.mu.Lock()
			stopped := tw.vm.cause == causeCeiling
			tw.vm.mu.Unlock()
			if stopped != tc.stop {
				t.Errorf("call %d, the heap past the ceiling by growth in %d large objects: stopped %v, want %v", i, tc.pieces, stopped, tc.stop)
			}
		}
	}
}

// TestNearDoublingsCount: the steps of a doubling string are charged a
// little less than everything before them. A step that falls short of a
// full doubling must not start the count of doublings again, or the
// string doubles on past its limit before the watchdog acts.
func TestNearDoublingsCount(t *testing.T) {
	tw := newTickWatch(t)
	tw.tick(100, 0, 0)
	tw.begin()
	tw.tick(100, 0, 0)
	tw.grow(114, 1) // 14 MiB
	tw.grow(127, 1) // 27: 13 more, not quite doubled
	if tw.stopped() {
		t.Fatal("stopped at 27 MiB, under half its limit")
	}
	tw.grow(155, 1) // 55: doubling on, past half the limit
	if !tw.stopped() {
		t.Fatal("a call whose memory went 14, 27, 55 MiB in big pieces was not stopped past half its limit")
	}
}
