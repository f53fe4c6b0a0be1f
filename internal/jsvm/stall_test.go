package jsvm

import (
	"context"
	"testing"
	"time"

	"github.com/dop251/goja"
)

func TestStallClockCountsLateTicks(t *testing.T) {
	var s stallClock
	ms := int64(time.Millisecond)
	s.tick(1 * ms)
	s.tick(3 * ms)   // on time
	s.tick(10 * ms)  // 5 ms late: noise
	s.tick(110 * ms) // 98 ms late: a stall
	if got := time.Duration(s.total.Load()); got != 98*time.Millisecond {
		t.Fatalf("total %v, want 98ms", got)
	}
	if got := time.Duration(s.at(200 * ms)); got != 98*time.Millisecond+88*time.Millisecond {
		t.Fatalf("with a stall under way: %v", got)
	}
	s.park()
	if got := time.Duration(s.at(900 * ms)); got != 98*time.Millisecond {
		t.Fatalf("parked: %v, want no stall counted", got)
	}
}

// TestDeadlineMovesPastStalls: a call frozen by the runtime for a while has
// its deadline moved on by that while; here the freeze is recorded by the
// call itself so that the test does not depend on making a real one.
func TestDeadlineMovesPastStalls(t *testing.T) {
	p := newTestPool(t, "access.js", `export function busy([work, freeze]) {
  if (freeze > 0) frozen(freeze)
  const end = Date.now() + work; while (Date.now() < end) {}
  return "done"
}`, Options{Size: 1, Setup: func(vm *VM) error {
		return vm.Set("frozen", func(ms int64) { stalls.total.Add(ms * int64(time.Millisecond)) })
	}})
	// 130 ms of work against a 100 ms deadline, after a 100 ms stall: the
	// deadline moves to 200 ms and it finishes (with room for a loaded
	// machine).
	if got, err := callJSONDeadline(p, "busy", "[130, 100]", 100*time.Millisecond); err != nil || got != `"done"` {
		t.Fatalf("after a stall: %s %v", got, err)
	}
	// Frozen for longer than the grace: the deadline still moves, by the
	// whole grace (the deadline again), and no further.
	if got, err := callJSONDeadline(p, "busy", "[130, 1000]", 100*time.Millisecond); err != nil || got != `"done"` {
		t.Fatalf("after a stall longer than the grace: %s %v", got, err)
	}
	if _, err := callJSONDeadline(p, "busy", "[300, 1000]", 100*time.Millisecond); err == nil {
		t.Fatal("300 ms of work passed a 100 ms deadline moved by at most 100 ms")
	}
	// Without a stall the deadline holds. A real stall or a late timer on
	// a loaded machine may still move it, by at most the grace: 250 ms of
	// work ends past any such move.
	if _, err := callJSONDeadline(p, "busy", "[250, 0]", 100*time.Millisecond); err == nil {
		t.Fatal("250 ms of work passed a 100 ms deadline without a stall")
	}
}

func callJSONDeadline(p *Pool, export, arg string, d time.Duration) (string, error) {
	var out string
	err := p.Do(context.Background(), Call{Export: export, Deadline: d, Args: jsonArgs(arg), Result: func(vm *VM, v goja.Value) error {
		b, err := vm.ToJSON(v)
		out = string(b)
		return err
	}})
	return out, err
}

// TestDeadlineNotRearmedAfterTheCall: a deadline that fires as its call
// ends, after the runtime was frozen, must not move itself on: the timer
// would keep the runtime reachable, and a runtime stopped for memory is
// replaced only once a collection has taken it.
func TestDeadlineNotRearmedAfterTheCall(t *testing.T) {
	p := newTestPool(t, "access.js", `export function ok() { return 1 }`, Options{Size: 1})
	vm := <-p.idle
	t.Cleanup(func() { p.idle <- vm })
	vm.stallMark.Store(-1 << 62) // frozen since, with grace left
	vm.grace.Store(-int64(time.Second))
	vm.onDeadline()
	if vm.timer.Stop() {
		t.Fatal("the deadline moved itself on with no call running")
	}
}
