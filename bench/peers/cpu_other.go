//go:build !unix

package main

import "time"

// cpuTime is unknown here: CPU per job reads 0.
func cpuTime() time.Duration { return 0 }
