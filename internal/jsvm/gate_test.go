package jsvm

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// gateModule's functions report to the host when they start running JS.
const gateModule = `
export function spin() { started(); while (true) {} }
export async function awaitHost() { started(); return await host() }
export function quick() { started(); return 1 }
`

type gateProbe struct {
	mu   sync.Mutex
	vms  map[string][]*VM // each group's runtimes
	gens map[*VM]uint64   // the call of each runtime that called started
	most map[string]int   // the most calls of a group seen running at once
	hold chan func()      // awaitHost's resume functions
}

func newGateProbe() *gateProbe {
	return &gateProbe{vms: map[string][]*VM{}, gens: map[*VM]uint64{}, most: map[string]int{}, hold: make(chan func(), 4)}
}

// setup counts, whenever a call starts, the group's calls that are running
// (a runtime loading its module is not a call).
func (g *gateProbe) setup(group string) func(vm *VM) error {
	return func(vm *VM) error {
		g.mu.Lock()
		g.vms[group] = append(g.vms[group], vm)
		g.mu.Unlock()
		if err := vm.Set("started", func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.gens[vm] = vm.active.Load()
			n := 0
			for _, v := range g.vms[group] {
				if gen := v.active.Load(); gen != 0 && gen == g.gens[v] && !v.waiting.Load() {
					n++
				}
			}
			g.most[group] = max(g.most[group], n)
		}); err != nil {
			return err
		}
		return vm.Set("host", func() goja.Value {
			p, resolve, _ := vm.NewPromise()
			resume := vm.Hold()
			g.hold <- func() { resume(func(vm *VM) error { return resolve(vm.ToValue("resumed")) }) }
			return vm.ToValue(p)
		})
	}
}

func (g *gateProbe) call(p *Pool, group, export string, d time.Duration) error {
	return p.Do(context.Background(), Call{Export: export, Group: group, Deadline: d})
}

// TestGateLeavesACoreToOthers: one app's runaway calls never hold every
// slot, so another app's calls keep running beside them.
func TestGateLeavesACoreToOthers(t *testing.T) {
	probe := newGateProbe()
	gate := NewGate(2)
	hog := newTestPool(t, "access.js", gateModule, Options{Size: 3, Gate: gate, Setup: probe.setup("hog")})
	other := newTestPool(t, "access.js", gateModule, Options{Size: 1, Gate: gate, Setup: probe.setup("other")})
	var wg sync.WaitGroup
	var hogsDone atomic.Int32
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := probe.call(hog, "hog", "spin", 300*time.Millisecond); !errors.Is(err, ErrDeadline) {
				t.Errorf("spin: %v", err)
			}
			hogsDone.Add(1)
		}()
	}
	// Other's calls run while the hogs take their turns, one at a time.
	for range 20 {
		if err := probe.call(other, "other", "quick", time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if hogsDone.Load() == 3 {
		t.Error("the other app's calls waited for every runaway to end")
	}
	wg.Wait()
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if got := probe.most["hog"]; got != 1 {
		t.Errorf("the runaway app ran %d calls at once on a gate of 2 slots, want 1", got)
	}
}

// TestGateSlotIsFreeWhileAwaiting: a call that awaits host work gives its
// slot back, so a call of the same app can run meanwhile, here the very
// call that the first one waits for.
func TestGateSlotIsFreeWhileAwaiting(t *testing.T) {
	probe := newGateProbe()
	p := newTestPool(t, "backend.js", gateModule, Options{Size: 2, Gate: NewGate(2), Setup: probe.setup("app")})
	res := make(chan error, 1)
	go func() { res <- probe.call(p, "app", "awaitHost", 5*time.Second) }()
	resume := <-probe.hold // awaitHost is now waiting on the host
	if err := probe.call(p, "app", "quick", 5*time.Second); err != nil {
		t.Fatalf("a second call of the app while the first awaited: %v", err)
	}
	resume()
	if err := <-res; err != nil {
		t.Fatalf("awaitHost: %v", err)
	}
}

func TestGateHandsSlotsToTheGroupHoldingFewest(t *testing.T) {
	g := NewGate(3) // a group may hold 2
	never := make(chan struct{})
	no := func() bool { return false }
	for range 2 {
		if !g.acquire("a", never, no) {
			t.Fatal("a")
		}
	}
	// a is at its cap: its next call waits, though a slot is free, and
	// b, which holds none, takes that slot.
	aWaits := make(chan bool, 1)
	go func() { aWaits <- g.acquire("a", never, no) }()
	time.Sleep(10 * time.Millisecond) // let it queue; the outcome does not depend on it
	if !g.acquire("b", never, no) {
		t.Fatal("b")
	}
	select {
	case <-aWaits:
		t.Fatal("a took a third slot")
	default:
	}
	// When a gives one back, a's waiter gets it.
	g.release("a")
	if !<-aWaits {
		t.Fatal("a's waiter")
	}
	// A waiter that gives up leaves no slot taken.
	cancel := make(chan struct{})
	gaveUp := make(chan bool, 1)
	go func() { gaveUp <- g.acquire("c", cancel, func() bool { return true }) }()
	close(cancel)
	if <-gaveUp {
		t.Fatal("c got a slot of a full gate")
	}
	g.release("b")
	if !g.acquire("c", never, no) {
		t.Fatal("c after b released")
	}
}

// TestGateTakesGroupsInTurn: a group with many calls queued does not take
// every freed slot from a group with one call waiting.
func TestGateTakesGroupsInTurn(t *testing.T) {
	g := NewGate(2) // a group may hold 1
	never := make(chan struct{})
	no := func() bool { return false }
	g.acquire("b", never, no) // b keeps one slot throughout
	g.acquire("a", never, no)
	got := make(chan string, 4)
	queued := 0
	queue := func(group string) {
		go func() {
			g.acquire(group, never, no)
			got <- group
		}()
		queued++
		for { // wait until it is queued; the order of arrival matters here
			g.mu.Lock()
			n := g.queued
			g.mu.Unlock()
			if n == queued {
				break
			}
			runtime.Gosched()
		}
	}
	queue("a")
	queue("a")
	queue("c")
	g.release("a") // a and c now hold none; c has waited since a was served
	if first := <-got; first != "c" {
		t.Fatalf("the freed slot went to %s, want c", first)
	}
}

// TestGatedPoolLoadsOnDemand: a gated pool of 64 runtimes runs the
// module's top level, the app's own code, once when it is made, and again
// only for the runtimes its calls need.
func TestGatedPoolLoadsOnDemand(t *testing.T) {
	var loads atomic.Int32
	p := newTestPool(t, "backend.js", `loaded(); export async function f() { return 1 }`, Options{
		Size: 64, Gate: NewGate(4),
		Setup: func(vm *VM) error { return vm.Set("loaded", func() { loads.Add(1) }) },
	})
	if got := loads.Load(); got != 1 {
		t.Fatalf("making the pool loaded the module %d times, want 1", got)
	}
	for range 3 {
		if err := p.Do(context.Background(), Call{Export: "f", Group: "app"}); err != nil {
			t.Fatal(err)
		}
	}
	if got := loads.Load(); got != 1 {
		t.Fatalf("three calls one after another loaded the module %d times in all, want 1", got)
	}
}

// TestGateServesAGroupInArrivalOrder: a group's waiters get slots in the
// order they came, however many wait.
func TestGateServesAGroupInArrivalOrder(t *testing.T) {
	g := NewGate(2) // a group may hold 1
	never := make(chan struct{})
	no := func() bool { return false }
	g.acquire("a", never, no)
	const n = 50
	got := make(chan int, n)
	for i := range n {
		go func() {
			g.acquire("a", never, no)
			got <- i
		}()
		for { // wait until it is queued: arrival decides
			g.mu.Lock()
			q := g.queued
			g.mu.Unlock()
			if q == i+1 {
				break
			}
			runtime.Gosched()
		}
	}
	for want := range n {
		g.release("a")
		if i := <-got; i != want {
			t.Fatalf("slot %d went to waiter %d", want, i)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.queued != 0 || len(g.queues) != 0 {
		t.Fatalf("after every waiter was served: %d queued in %d groups", g.queued, len(g.queues))
	}
}
