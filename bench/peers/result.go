package main

import (
	"slices"
	"time"
)

// Latency summarises durations in milliseconds, as `handoff bench jobs`
// reports them.
type Latency struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P90   float64 `json:"p90_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

func summarize(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	at := func(q float64) float64 { return ms(d[min(int(q*float64(len(d))), len(d)-1)]) }
	return Latency{Count: len(d), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: ms(d[len(d)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Result is one round of one side. Its JSON names are those of
// `handoff bench jobs`, so compare reads both sides with one type.
type Result struct {
	Side        string  `json:"side,omitempty"` // "handoff", "river", "river-many"
	Store       string  `json:"store"`
	Jobs        int     `json:"jobs"`
	Concurrency int     `json:"concurrency"`
	WallSeconds float64 `json:"wall_seconds"` // first insert to last completion
	JobsPerSec  float64 `json:"jobs_per_sec"`
	CPUMsPerJob float64 `json:"cpu_ms_per_job"` // process user + system
	CPUCores    float64 `json:"cpu_cores"`
	// Delivery is commit → work start: from the return of the insert
	// that made a job durable to the start of its worker.
	Delivery Latency `json:"commit_to_onchange"`
	OK       bool    `json:"ok"` // every job worked and completed exactly once

	// River's settings for the round.
	Settings *Settings `json:"settings,omitempty"`

	// ServerCPUMsPerJob is the CPU time of the PostgreSQL backends
	// serving the round's database, per job; compare fills it in.
	ServerCPUMsPerJob float64 `json:"server_cpu_ms_per_job,omitempty"`
}

// median of xs, which it sorts.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	if n := len(xs); n%2 == 0 {
		return (xs[n/2-1] + xs[n/2]) / 2
	}
	return xs[len(xs)/2]
}
