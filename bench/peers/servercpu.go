package main

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// clockTicks is USER_HZ, the unit of CPU times in /proc/PID/stat: 100 on
// Linux whatever the kernel's own tick rate.
const clockTicks = 100

// serverCPU follows, by polling /proc, the CPU time of the PostgreSQL
// backends serving databases whose names start with a prefix. A backend
// that exits between two polls loses its last interval, so the interval
// is short. Where /proc does not show the server's processes (another
// machine, a container), the total stays zero.
type serverCPU struct {
	prefix string
	quit   chan struct{}
	done   chan struct{}

	mu    sync.Mutex
	seen  map[int]bool          // pid -> serves such a database
	times map[int]time.Duration // pid -> last CPU time read
}

func watchServerCPU(prefix string, every time.Duration) *serverCPU {
	s := &serverCPU{prefix: prefix, quit: make(chan struct{}), done: make(chan struct{}),
		seen: map[int]bool{}, times: map[int]time.Duration{}}
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			s.poll()
			select {
			case <-s.quit:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop ends the polling and returns the backends' CPU time in all.
func (s *serverCPU) stop() time.Duration {
	close(s.quit)
	<-s.done
	var sum time.Duration
	for _, d := range s.times {
		sum += d
	}
	return sum
}

func (s *serverCPU) poll() {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ours, known := s.seen[pid]
		if !known {
			ours = servesPrefix(pid, s.prefix)
			// A backend shows its database only once connected: ask
			// again next time until it does.
			if ours || !isPostgres(pid) {
				s.seen[pid] = ours
			}
		}
		if ours {
			if d, ok := procCPU(pid); ok {
				s.times[pid] = d
			}
		}
	}
}

func cmdline(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return nil
	}
	return strings.Fields(strings.ReplaceAll(string(b), "\x00", " "))
}

func isPostgres(pid int) bool {
	f := cmdline(pid)
	return len(f) > 0 && f[0] == "postgres:"
}

// servesPrefix tells a backend by the title PostgreSQL gives it:
// "postgres: [cluster:] USER DATABASE HOST(PORT) STATE".
func servesPrefix(pid int, prefix string) bool {
	f := cmdline(pid)
	if len(f) == 0 || f[0] != "postgres:" {
		return false
	}
	for _, w := range f[1:] {
		if strings.HasPrefix(w, prefix) {
			return true
		}
	}
	return false
}

// procCPU reads a process's user plus system time.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name may hold spaces: count fields after its ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, true
}
