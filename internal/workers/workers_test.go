package workers

import (
	"runtime"
	"sync"
	"testing"
)

// A task that finds a kept goroutine waiting runs on it; none is started.
func TestGoReusesAWaitingGoroutine(t *testing.T) {
	var wg sync.WaitGroup
	ids := make(chan uint64, 1)
	wg.Add(1)
	Go(func() { defer wg.Done(); ids <- goid() })
	wg.Wait()
	first := <-ids
	// The first task's goroutine parks on tasks once it returns; a send
	// finds it there at once or after it gets there.
	for i := 0; i < 100; i++ {
		wg.Add(1)
		Go(func() { defer wg.Done(); ids <- goid() })
		wg.Wait()
		if id := <-ids; id == first {
			return
		}
		runtime.Gosched()
	}
	t.Fatal("no task ran on the goroutine of an earlier one")
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
