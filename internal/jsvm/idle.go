package jsvm

import (
	"sync"
	"sync/atomic"
	"time"
	"weak"
)

// A runtime with its module loaded holds a megabyte or two whether or not
// its app is used, and a server may host thousands of apps that are idle
// most of the time. So, as net/http's Transport closes a connection idle
// for IdleConnTimeout, a pool retires a runtime idle for IdleTimeout and
// makes one again when a call needs it: a cold start, which costs a
// module load (the program is compiled once and shared). One janitor
// goroutine trims every pool; it holds them weakly, so a pool dropped
// without Close is not kept.

// DefaultIdleTimeout is Options.IdleTimeout's default.
const DefaultIdleTimeout = 2 * time.Minute

// janitorTick is how often the janitor looks: a runtime lives at most
// this much past its IdleTimeout.
const janitorTick = 10 * time.Second

var (
	runtimesLive atomic.Int64 // runtimes made and not retired
	coldStarts   atomic.Int64 // runtimes a call had to wait for
	trimmed      atomic.Int64 // runtimes retired for being idle
)

// RuntimeStats is what the process's runtimes are doing, for metrics.
type RuntimeStats struct {
	Runtimes   int64 // made and not yet retired, in every pool
	ColdStarts int64 // made for a call that found none idle, since start
	Trimmed    int64 // retired for being idle, since start
}

// Stats reports the process's runtimes.
func Stats() RuntimeStats {
	return RuntimeStats{Runtimes: runtimesLive.Load(), ColdStarts: coldStarts.Load(), Trimmed: trimmed.Load()}
}

var janitor = &poolJanitor{}

type poolJanitor struct {
	mu      sync.Mutex
	pools   []weak.Pointer[Pool]
	started bool
}

func (j *poolJanitor) add(p *Pool) {
	if p.opts.IdleTimeout < 0 {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.pools = append(j.pools, weak.Make(p))
	if !j.started {
		j.started = true
		go j.loop()
	}
}

func (j *poolJanitor) loop() {
	for range time.Tick(janitorTick) {
		j.sweep(time.Now())
	}
}

// sweep trims every live pool and forgets the closed and collected ones.
func (j *poolJanitor) sweep(now time.Time) {
	j.mu.Lock()
	live := j.pools[:0]
	var pools []*Pool
	for _, wp := range j.pools {
		if p := wp.Value(); p != nil && !p.closed.Load() {
			live = append(live, wp)
			pools = append(pools, p)
		}
	}
	clear(j.pools[len(live):])
	j.pools = live
	j.mu.Unlock()
	for _, p := range pools {
		p.TrimIdle(now)
	}
}

// TrimIdle retires the pool's runtimes that have been idle since before
// now minus IdleTimeout, and reports how many. The janitor calls it; tests
// call it with a time of their choosing.
func (p *Pool) TrimIdle(now time.Time) int {
	if p.opts.IdleTimeout < 0 {
		return 0
	}
	cutoff := mono() - int64(time.Since(now)) - int64(p.opts.IdleTimeout)
	n := 0
	// Each idle runtime is looked at once: the ones kept go back after.
	var keep []*VM
	for range len(p.idle) {
		var vm *VM
		select {
		case vm = <-p.idle:
		default:
		}
		if vm == nil {
			break
		}
		if vm.lastUsed < cutoff {
			vm.retire()
			p.spare <- struct{}{}
			n++
			continue
		}
		keep = append(keep, vm)
	}
	for _, vm := range keep {
		p.idle <- vm
	}
	trimmed.Add(int64(n))
	return n
}
