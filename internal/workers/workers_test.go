package workers

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// A task that finds a kept goroutine waiting runs on it; none is started.
func TestGoReusesAWaitingGoroutine(t *testing.T) {
	var wg sync.WaitGroup
	ids := make(chan uint64, 1)
	wg.Add(1)
	Go(func() { defer wg.Done(); ids <- goid() })
	wg.Wait()
	first := <-ids
	// The first task's goroutine parks on tasks once it returns: wait for
	// it there, however long a loaded machine takes to get it there.
	// Goroutines kept from other tests may be waiting too.
	waiting := waitParked(t, first)
	wg.Add(1)
	Go(func() { defer wg.Done(); ids <- goid() })
	wg.Wait()
	if id := <-ids; !waiting[id] {
		t.Fatalf("the task ran on a new goroutine %d, not on one of the waiting %v", id, waiting)
	}
}

// waitParked waits until goroutine id waits in work's select, and returns
// every goroutine that waits there then.
func waitParked(t *testing.T, id uint64) map[uint64]bool {
	t.Helper()
	buf := make([]byte, 1<<20)
	for range 10000 {
		waiting := map[uint64]bool{}
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			var n uint64
			if _, err := fmt.Sscanf(g, "goroutine %d [select", &n); err == nil && strings.Contains(g, "workers.work(") {
				waiting[n] = true
			}
		}
		if waiting[id] {
			return waiting
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("goroutine %d never waited for a task", id)
	return nil
}

// Tasks given while every kept goroutine is busy do not wait for one:
// each gets a goroutine, so none holds back another.
func TestGoNeverQueuesBehindABusyTask(t *testing.T) {
	const n = 20
	release := make(chan struct{})
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	for range n {
		Go(func() {
			started.Done()
			<-release
			done.Done()
		})
	}
	started.Wait() // would hang if a task waited for another to end
	close(release)
	done.Wait()
}

// goid reads the running goroutine's id from its stack header.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	// "goroutine 123 [running]:"
	var id uint64
	for _, c := range b[len("goroutine "):] {
		if c < '0' || c > '9' {
			break
		}
		id = id*10 + uint64(c-'0')
	}
	return id
}
