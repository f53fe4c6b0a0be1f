package apptest

import (
	"runtime"
	"testing"
	"time"
)

// BusyHeap makes the process look like a busy server's for the rest of
// the test: 300 MiB held live for others, and a neighbour making garbage
// in small pieces (at most 16 MiB of it live, about 256 MiB a second).
// A heap like that is collected rarely, so garbage piles up between
// collections; a call's memory limit must not count it.
func BusyHeap(t testing.TB) {
	var live [][]byte
	for range 300 {
		live = append(live, make([]byte, 1<<20))
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		var junk [][]byte
		for {
			select {
			case <-stop:
				return
			default:
			}
			junk = append(junk, make([]byte, 4<<10))
			if len(junk) == 16<<8 {
				junk = nil
			}
			if len(junk)%64 == 0 {
				time.Sleep(time.Millisecond)
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
		runtime.KeepAlive(live)
	})
}
