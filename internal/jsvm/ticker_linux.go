package jsvm

import (
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// A Go timer lives on one P of the scheduler, and a P whose goroutine is
// copying a huge string (one step that nothing preempts) runs none of its
// timers until the copy ends: the heap watchdog, of all things, must not
// wait on it. So its ticks also come from a timerfd, read through the
// network poller, which the other Ps and the runtime's monitor thread look
// at (every 10 ms at worst); whichever tick comes first wakes it.
type fdTicker struct {
	fd int
	f  *os.File
	d  time.Duration
	c  chan struct{}
}

// newFdTicker returns a stopped fdTicker, or nil where there is no timerfd.
func newFdTicker(d time.Duration) *fdTicker {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil
	}
	t := &fdTicker{fd: fd, f: os.NewFile(uintptr(fd), "heap watchdog ticker"), d: d, c: make(chan struct{}, 1)}
	go t.read()
	return t
}

func (t *fdTicker) read() {
	var buf [8]byte
	for {
		if _, err := t.f.Read(buf[:]); err != nil {
			return // cannot happen on a timerfd; the Go ticker carries on
		}
		select {
		case t.c <- struct{}{}:
		default:
		}
	}
}

// C is the channel of ticks; nil, which never delivers, for a nil t.
func (t *fdTicker) C() <-chan struct{} {
	if t == nil {
		return nil
	}
	return t.c
}

func (t *fdTicker) stop() {
	if t != nil {
		unix.TimerfdSettime(t.fd, 0, &unix.ItimerSpec{}, nil)
	}
}

func (t *fdTicker) reset() {
	if t != nil {
		ts := unix.NsecToTimespec(int64(t.d))
		unix.TimerfdSettime(t.fd, 0, &unix.ItimerSpec{Interval: ts, Value: ts}, nil)
	}
}
