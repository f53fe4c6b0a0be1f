package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestBenchJobs keeps `handoff bench jobs` working: a small run in
// process must finish every job exactly once and report its numbers.
// It asserts no timing: speed is for docs/benchmarks.md, not for tests.
func TestBenchJobs(t *testing.T) {
	stdout, stderr, code := runIn(t, nil, "", "bench", "jobs", "--jobs", "50", "--concurrency", "4")
	if code != 0 {
		t.Fatalf("bench jobs: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var res struct {
		Jobs      int  `json:"jobs"`
		Done      int  `json:"done"`
		DoneTwice int  `json:"done_twice"`
		NotDone   int  `json:"not_done"`
		OK        bool `json:"ok"`
		Delivery  struct {
			Count int     `json:"count"`
			P50   float64 `json:"p50_ms"`
		} `json:"commit_to_onchange"`
		Job struct {
			Count int `json:"count"`
		} `json:"pending_to_done"`
		JobsPerSec float64 `json:"jobs_per_sec"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout is not the JSON result: %v\n%s", err, stdout)
	}
	if !res.OK || res.Jobs != 50 || res.Done != 50 || res.DoneTwice != 0 || res.NotDone != 0 {
		t.Fatalf("bench jobs result: %+v", res)
	}
	// Each job is put, claimed and finished: three revisions, each
	// delivered to onChange.
	if res.Delivery.Count < 150 || res.Job.Count != 50 || res.JobsPerSec <= 0 {
		t.Errorf("bench jobs measured %d deliveries, %d jobs, %.0f jobs/s", res.Delivery.Count, res.Job.Count, res.JobsPerSec)
	}
	if !strings.Contains(stderr, "commit → onChange") {
		t.Errorf("no table on stderr:\n%s", stderr)
	}
}

func TestBenchJobsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "jobs", "--jobs", "0"},
		{"bench", "jobs", "--rate", "-1"},
		{"bench", "jobs", "--concurrency", "0"},
		{"bench", "nope"},
	} {
		if _, stderr, code := runIn(t, nil, "", args...); code != 2 {
			t.Errorf("%q: exit %d, want 2 (usage)\n%s", args, code, stderr)
		}
	}
}
