package main

import (
	"context"
	"encoding/json"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/handoff-run/handoff/internal/pgtest"
)

// TestBenchJobs keeps `handoff bench jobs` working: a small run in
// process must finish every job exactly once and report its numbers.
// It asserts no timing: speed is for docs/benchmarks.md, not for tests.
func TestBenchJobs(t *testing.T) {
	t.Parallel()
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
	// Each job is put, claimed and finished: three revisions, of which
	// config.onChange.when delivers the pending one to onChange.
	if res.Delivery.Count < 50 || res.Job.Count != 50 || res.JobsPerSec <= 0 {
		t.Errorf("bench jobs measured %d deliveries, %d jobs, %.0f jobs/s", res.Delivery.Count, res.Job.Count, res.JobsPerSec)
	}
	if !strings.Contains(stderr, "commit → onChange") {
		t.Errorf("no table on stderr:\n%s", stderr)
	}
}

func TestBenchJobsUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bench", "jobs", "--jobs", "0"},
		{"bench", "jobs", "--rate", "-1"},
		{"bench", "jobs", "--concurrency", "0"},
		{"bench", "jobs", "--handlers", "lua"},
		{"bench", "jobs", "--databases", "2"},
		{"bench", "jobs", "--databases", "0"},
		{"bench", "nope"},
	} {
		if _, stderr, code := runIn(t, nil, "", args...); code != 2 {
			t.Errorf("%q: exit %d, want 2 (usage)\n%s", args, code, stderr)
		}
	}
}

// TestBenchJobsPostgres runs the same small bench on PostgreSQL: every
// job done exactly once, in a database of the run's own that is gone
// afterwards.
func TestBenchJobsPostgres(t *testing.T) {
	t.Parallel()
	base := pgtest.Need(t)
	serveURL := base
	if u, err := url.Parse(base); err == nil && u.Scheme != "" {
		// A URL as serve takes it, pool settings included.
		q := u.Query()
		q.Set("pool_max_conns", "8")
		u.RawQuery = q.Encode()
		serveURL = u.String()
	}
	stdout, stderr, code := runIn(t, map[string]string{"HANDOFF_POSTGRES": serveURL}, "", "bench", "jobs", "--jobs", "50", "--concurrency", "4")
	if code != 0 {
		t.Fatalf("bench jobs on PostgreSQL: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	var res struct {
		Store     string `json:"store"`
		Done      int    `json:"done"`
		DoneTwice int    `json:"done_twice"`
		NotDone   int    `json:"not_done"`
		OK        bool   `json:"ok"`
		Delivery  struct {
			Count int `json:"count"`
		} `json:"commit_to_onchange"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout is not the JSON result: %v\n%s", err, stdout)
	}
	if res.Store != "postgres" || !res.OK || res.Done != 50 || res.DoneTwice != 0 || res.NotDone != 0 || res.Delivery.Count < 50 {
		t.Fatalf("bench jobs on PostgreSQL: %+v", res)
	}
	m := regexp.MustCompile(`database (handoff_bench_[0-9a-f]+) on `).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("stderr does not name the run's database:\n%s", stderr)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, m[1]).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left {
		t.Errorf("database %s is still there after the run", m[1])
	}
}

func TestBenchJobsPostgresUsage(t *testing.T) {
	t.Parallel()
	for _, env := range []map[string]string{nil, {"HANDOFF_POSTGRES": "http://x"}} {
		args := []string{"bench", "jobs", "--jobs", "1"}
		if env == nil {
			args = append(args, "--postgres", "http://x")
		}
		if _, stderr, code := runIn(t, env, "", args...); code != 2 || !strings.Contains(stderr, "--postgres") {
			t.Errorf("%q with %v: exit %d, want 2 (usage)\n%s", args, env, code, stderr)
		}
	}
}

// TestBenchJobsTwoDatabases runs the bench with its apps spread over two
// fresh databases: every job done exactly once.
func TestBenchJobsTwoDatabases(t *testing.T) {
	base := pgtest.Need(t)
	stdout, stderr, code := runIn(t, map[string]string{"HANDOFF_POSTGRES": base}, "",
		"bench", "jobs", "--jobs", "40", "--concurrency", "4", "--apps", "2", "--databases", "2", "--quiet")
	if code != 0 || !strings.Contains(stdout, `"ok": true`) {
		t.Fatalf("bench jobs over two databases: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}
