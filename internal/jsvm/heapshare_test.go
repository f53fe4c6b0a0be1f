package jsvm

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/internal/apptest"
)

// churnModule builds and takes apart a few hundred small objects many
// times over, the way a YAML or schema library's round trip does: lots
// of allocation, little of it live at once.
const churnModule = `export function roundTrip() {
  let lines = 0
  for (let r = 0; r < 60; r++) {
    const items = []
    for (let i = 0; i < 500; i++) items.push({ id: i, name: "item " + i, tags: ["a" + i, "b", "c"], at: { x: i, y: [i, i + 1] } })
    const text = items.map((it) => Object.entries(it).map(([k, v]) => k + ": " + JSON.stringify(v)).join("\n")).join("\n---\n")
    lines += text.split("\n").map((l) => l.split(": ")).filter((p) => p.length === 2).length
  }
  return lines
}`

// TestCallIsNotChargedForItsNeighbours: a call's limit counts what it
// allocated, so the same call passes whatever else the process holds or
// throws away: here 300 MiB held live by others, then 300 MiB of
// garbage others keep making while it runs.
func TestCallIsNotChargedForItsNeighbours(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector's own allocations make this a test of it")
	}
	p := newTestPool(t, "backend.js", churnModule, Options{Size: 1})
	want := mustJSON(t, p, "roundTrip")

	apptest.BusyHeap(t)
	fails := 0
	start := time.Now()
	for i := range 10 {
		got, err := callJSON(t, p, "roundTrip")
		if err != nil || got != want {
			fails++
			t.Logf("round %d: %v", i, err)
		}
	}
	if fails > 0 {
		t.Fatalf("%d of 10 calls failed beside 300 MiB of the neighbours' memory (%v)", fails, time.Since(start))
	}
	t.Logf("10 of 10 in %v", time.Since(start))
}

// TestCallHeapLimitOverride: a call may carry its own heap limit (an
// app's, raised by the operator); it does not outlive the call.
func TestCallHeapLimitOverride(t *testing.T) {
	p := newTestPool(t, "backend.js", `export function hold() {
  const a = []
  for (let i = 0; i < 25; i++) a.push("x".repeat(4 << 20) + i)
  return a.length
}`, Options{Size: 1})
	run := func(limit int64) (string, error) {
		// What a collection judges counts from what was live when the
		// call began; the runs before leave 100 MiB of garbage.
		runtime.GC()
		var got string
		err := p.Do(context.Background(), Call{Export: "hold", HeapLimit: limit, Result: func(vm *VM, v goja.Value) error {
			got = v.String()
			return nil
		}})
		return got, err
	}
	if _, err := run(0); !errors.Is(err, ErrHeapLimit) || !strings.Contains(err.Error(), "64 MiB") {
		t.Fatalf("100 MiB held under the default limit: %v; want the 64 MiB limit's error", err)
	}
	if got, err := run(256 << 20); err != nil || got != "25" {
		t.Fatalf("100 MiB held under a 256 MiB limit: %q, %v", got, err)
	}
	if _, err := run(0); !errors.Is(err, ErrHeapLimit) {
		t.Fatalf("the next call without a limit of its own: %v; want the default limit again", err)
	}
}
