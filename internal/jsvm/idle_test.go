package jsvm

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestIdleRuntimesAreRetired: a pool makes one runtime up front and the
// others on demand; runtimes idle past IdleTimeout are retired, busy ones
// never, and the next call makes one again.
func TestIdleRuntimesAreRetired(t *testing.T) {
	p := newTestPool(t, "access.js", `export function f() { return 1 }
export async function wait() { await new Promise((r) => setTimeout(r, 0)) }`, Options{Size: 4, IdleTimeout: time.Minute})
	if got := len(p.idle); got != 1 {
		t.Fatalf("runtimes made up front: %d, want 1", got)
	}
	// Four calls at once need four runtimes.
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_ = p.Do(context.Background(), Call{Export: "f"})
		}()
	}
	before := Stats()
	close(start)
	wg.Wait()
	if got := len(p.idle); got < 1 || got > 4 {
		t.Fatalf("idle runtimes after four calls: %d", got)
	}
	made := len(p.idle)
	if n := p.TrimIdle(time.Now()); n != 0 {
		t.Fatalf("TrimIdle now retired %d fresh runtimes", n)
	}
	// One borrowed runtime stays whatever the time.
	vm, err := p.get(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if n := p.TrimIdle(time.Now().Add(2 * time.Minute)); n != made-1 {
		t.Fatalf("TrimIdle past the timeout retired %d, want the %d idle ones", n, made-1)
	}
	p.put(vm)
	if n := p.TrimIdle(time.Now().Add(30 * time.Second)); n != 0 {
		t.Fatalf("a runtime given back half its timeout ago was retired")
	}
	if n := p.TrimIdle(time.Now().Add(2 * time.Minute)); n != 1 {
		t.Fatalf("TrimIdle retired %d of the last one", n)
	}
	if s := Stats(); s.Trimmed-before.Trimmed != int64(made) {
		t.Fatalf("Stats().Trimmed grew by %d, want %d", s.Trimmed-before.Trimmed, made)
	}
	cold := Stats().ColdStarts
	if got := mustJSON(t, p, "f"); got != "1" {
		t.Fatalf("a call after every runtime was retired: %s", got)
	}
	if Stats().ColdStarts != cold+1 {
		t.Fatal("the call after the trim was not counted as a cold start")
	}
}

// TestJanitorForgetsClosedPools: the janitor holds only live pools.
func TestJanitorForgetsClosedPools(t *testing.T) {
	prog, err := Compile("access.js", `export function f() {}`)
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewPool(prog, Options{})
	if err != nil {
		t.Fatal(err)
	}
	p.Close()
	janitor.sweep(time.Now())
	janitor.mu.Lock()
	defer janitor.mu.Unlock()
	for _, wp := range janitor.pools {
		if wp.Value() == p {
			t.Fatal("the janitor still holds a closed pool")
		}
	}
}
