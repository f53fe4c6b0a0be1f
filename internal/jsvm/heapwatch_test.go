package jsvm

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// peakHeap samples the heap until stop is closed and returns the most it saw.
func peakHeap(stop <-chan struct{}) <-chan uint64 {
	out := make(chan uint64, 1)
	go func() {
		s := heapSample()
		var peak uint64
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			peak = max(peak, readHeap(s))
			select {
			case <-stop:
				out <- peak
				return
			case <-t.C:
			}
		}
	}()
	return out
}

// runAll calls export on n goroutines at once, each for a group of its
// own, and returns their errors.
func runAll(p *Pool, export string, n int) []error {
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = p.Do(context.Background(), Call{Export: export, Deadline: 30 * time.Second, Group: fmt.Sprint("g", i)})
		}()
	}
	wg.Wait()
	return errs
}

// TestConcurrentRunawaysShareOnePoolLimit: eight calls of one module that
// each stay under the per-call limit most of the time still grow the heap
// by eight times as much; the pool's limit, shared among them, stops them.
func TestConcurrentRunawaysShareOnePoolLimit(t *testing.T) {
	if raceDetector {
		t.Skip("memory bombs do not run under the race detector; scripts/test.sh runs this package without it")
	}
	SetHeapCeiling(0) // the pool's own limit must be what stops them
	t.Cleanup(func() { SetHeapCeiling(DefaultHeapCeiling) })
	p := newTestPool(t, "access.js", runawayModule, Options{Size: 8, Deadline: 30 * time.Second, Gate: NewGate(16)})
	stop := make(chan struct{})
	peak := peakHeap(stop)
	errs := runAll(p, "hog", 8)
	close(stop)
	for i, err := range errs {
		if !errors.Is(err, ErrHeapLimit) {
			t.Errorf("call %d: got %v, want the heap limit", i, err)
		}
	}
	if got := <-peak; got > 1<<30 {
		t.Errorf("heap peaked at %d MiB", got>>20)
	} else {
		t.Logf("heap peaked at %d MiB", got>>20)
	}
	assertPoolServes(t, p)
}

// TestHeapCeilingStopsWhateverRuns: calls whose own limits are far away are
// stopped when the process's heap passes its ceiling.
func TestHeapCeilingStopsWhateverRuns(t *testing.T) {
	if raceDetector {
		t.Skip("memory bombs do not run under the race detector; scripts/test.sh runs this package without it")
	}
	SetHeapCeiling(256 << 20)
	t.Cleanup(func() { SetHeapCeiling(DefaultHeapCeiling) })
	opts := Options{Size: 2, Deadline: 30 * time.Second, HeapLimit: 4 << 30, PoolHeapLimit: -1, Gate: NewGate(16)}
	a := newTestPool(t, "access.js", runawayModule, opts)
	b := newTestPool(t, "backend.js", runawayModule, opts)
	stop := make(chan struct{})
	peak := peakHeap(stop)
	var wg sync.WaitGroup
	var errs []error
	var mu sync.Mutex
	for _, p := range []*Pool{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e := runAll(p, "hog", 2)
			mu.Lock()
			errs = append(errs, e...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(stop)
	for _, err := range errs {
		if !errors.Is(err, ErrHeapLimit) || !strings.Contains(err.Error(), "server's memory for JavaScript (256 MiB) ran out") {
			t.Errorf("got %v, want the ceiling's error", err)
		}
	}
	if got := <-peak; got > 1<<30 {
		t.Errorf("heap peaked at %d MiB", got>>20)
	} else {
		t.Logf("heap peaked at %d MiB", got>>20)
	}
	assertPoolServes(t, a)
}

// TestLongCallMakingGarbageRunsOn: a call that computes for seconds and
// makes garbage as it goes never holds more than a little at once; it used
// to be charged every rise of the heap and none of the falls, and was
// stopped after a second or two.
func TestLongCallMakingGarbageRunsOn(t *testing.T) {
	p := newTestPool(t, "backend.js", `export function churn() {
  const end = Date.now() + 2500; let n = 0
  while (Date.now() < end) { const a = new Array(1000).fill(n); n += a.length }
  return n > 0
}`, Options{Size: 1})
	if got := mustJSON(t, p, "churn"); got != "true" {
		t.Fatalf("churn: %s", got)
	}
}

// TestRunawayStackIsStopped: each lookup along a long prototype chain is a
// Go frame per link, so a getter that looks the property up again grows the
// Go stack by the chain's length per JS frame: 30,000 links and the JS
// stack limit of 1000 frames would overflow it, a fatal error. The stack's
// growth is charged like the heap's.
func TestRunawayStackIsStopped(t *testing.T) {
	p := newTestPool(t, "access.js", `export function lookup() {
  const base = { get x() { return top.x } }
  let top = base
  for (let i = 0; i < 30000; i++) top = Object.create(top)
  return top.x
}`, Options{Size: 1, Deadline: 30 * time.Second})
	if err := callWithin(p, "lookup", 30*time.Second); !errors.Is(err, ErrHeapLimit) {
		t.Fatalf("got %v, want the memory limit", err)
	}
}
