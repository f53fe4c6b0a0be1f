package jsvm

import (
	"runtime"
	"slices"
	"testing"
	"time"
	"weak"
)

func TestPoolExportsSeesCommonJSModules(t *testing.T) {
	p := newTestPool(t, "access.js", `module.exports = { jobs(doc) { return { channels: [doc.kind] } }, other: 1 }`, Options{Size: 1})
	got := p.Exports()
	slices.Sort(got)
	if !slices.Equal(got, []string{"jobs", "other"}) {
		t.Fatalf("Pool.Exports = %v", got)
	}
	if out := mustJSON(t, p, "jobs", `{"kind":"build"}`); out != `{"channels":["build"]}` {
		t.Fatalf("got %s", out)
	}
}

func TestHoldOutsideACallIsHarmless(t *testing.T) {
	vm := testVM(t)
	resume := vm.Hold()
	ran := false
	resume(func(*VM) error { ran = true; return nil })
	if ran || len(vm.queue) != 0 || vm.pending != 0 {
		t.Fatal("a resume outside a call must be dropped")
	}
}

func TestDroppedPoolDoesNotLeakIntoWatchdog(t *testing.T) {
	prog, err := Compile("access.js", `export function f() {}`)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := newVM(prog, ptr(Options{}.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	wp := weak.Make(vm)
	vm = nil // dropped without retire, as by a pool nobody closed
	deadline := time.Now().Add(5 * time.Second)
	for wp.Value() != nil && time.Now().Before(deadline) {
		runtime.GC()
	}
	if wp.Value() != nil {
		t.Fatal("the watchdog keeps a dropped runtime alive")
	}
	// The watchdog looks for collected runtimes every sweepTicks ticks.
	still := true
	s := watchSample()
	for range sweepTicks {
		watchdog.check(s)
		watchdog.mu.Lock()
		_, still = watchdog.vms[wp]
		watchdog.mu.Unlock()
		if !still {
			break
		}
	}
	if still {
		t.Fatalf("the watchdog did not prune a collected runtime in %d ticks", sweepTicks)
	}
}
