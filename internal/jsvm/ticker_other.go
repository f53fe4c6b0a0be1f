//go:build !linux

package jsvm

import "time"

// fdTicker exists on Linux only (see ticker_linux.go); here the Go ticker
// is the watchdog's only clock.
type fdTicker struct{}

func newFdTicker(time.Duration) *fdTicker { return nil }

func (t *fdTicker) C() <-chan struct{} { return nil }
func (t *fdTicker) stop()              {}
func (t *fdTicker) reset()             {}
