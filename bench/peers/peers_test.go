package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// The test binary stands in for the processes compare starts when
// PEERS_TEST_CHILD is set: "river …" runs the command as built, and
// "bench jobs …" plays a handoff that reports a fixed result.
func TestMain(m *testing.M) {
	if os.Getenv("PEERS_TEST_CHILD") == "1" && len(os.Args) > 1 {
		if os.Args[1] == "bench" {
			json.NewEncoder(os.Stdout).Encode(Result{Store: StoreSQLite, Jobs: 200, JobsPerSec: 1000, CPUMsPerJob: 1, OK: true})
			os.Exit(0)
		}
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

func TestRiverRoundSQLite(t *testing.T) {
	for _, mode := range []string{ModeOne, ModeMany} {
		t.Run(mode, func(t *testing.T) {
			res, err := RunRiver(t.Context(), RiverOptions{Store: StoreSQLite, Jobs: 200, Concurrency: 4,
				Settings: DefaultSettings(StoreSQLite, mode)})
			if err != nil {
				t.Fatal(err)
			}
			checkRound(t, res, 200)
		})
	}
}

func TestRiverRoundPostgres(t *testing.T) {
	pg := postgresOrSkip(t)
	res, err := RunRiver(t.Context(), RiverOptions{Store: StorePostgres, Postgres: pg, Jobs: 200, Concurrency: 4,
		Settings: DefaultSettings(StorePostgres, ModeMany)})
	if err != nil {
		t.Fatal(err)
	}
	checkRound(t, res, 200)
}

func checkRound(t *testing.T, res *Result, n int) {
	t.Helper()
	if !res.OK || res.Jobs != n || res.JobsPerSec <= 0 || res.Delivery.Count != n {
		t.Fatalf("round: ok %v, %d jobs, %.0f jobs/s, %d latencies; want every one of %d jobs run once",
			res.OK, res.Jobs, res.JobsPerSec, res.Delivery.Count, n)
	}
}

func postgresOrSkip(t *testing.T) string {
	pg := os.Getenv("HANDOFF_POSTGRES")
	if pg == "" {
		pg = DefaultPostgres
	}
	if err := pingPostgres(t.Context(), pg); err != nil {
		t.Skipf("no PostgreSQL: %v", err)
	}
	return pg
}

// TestCompareTable runs compare with a stand-in handoff and real River
// rounds in child processes, and checks the table it prints.
func TestCompareTable(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PEERS_TEST_CHILD", "1")
	var out, log bytes.Buffer
	o := CompareOptions{Rounds: 2, Modes: []string{ModeOne, ModeMany}, Handoff: self, Self: []string{self}, Handlers: "js"}
	o.flags("compare", &log)
	if err := o.parse(o.fs, []string{"--jobs", "200", "--concurrency", "4", "--workers", "50"}); err != nil {
		t.Fatal(err)
	}
	if err := Compare(t.Context(), o, &out, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	table := out.String()
	for _, want := range []string{"load average before", "handoff/side jobs/s", "side/handoff CPU per job"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	// Two rounds of three sides, and a spread row per mode and ratio.
	for r := 1; r <= 2; r++ {
		for _, side := range []string{"handoff", ModeOne, ModeMany} {
			if !containsRow(table, fmt.Sprint(r), side) {
				t.Errorf("no row for round %d, %s:\n%s", r, side, table)
			}
		}
	}
	if n := strings.Count(table, "NOT OK"); n > 0 {
		t.Errorf("%d rounds not OK:\n%s", n, table)
	}
}

func containsRow(table, round, side string) bool {
	for line := range strings.Lines(table) {
		f := strings.Fields(line)
		if len(f) > 2 && f[0] == round && f[1] == side {
			return true
		}
	}
	return false
}

func TestUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"compare", "--store", "mysql"}, "--store must be sqlite or postgres"},
		{[]string{"river", "--mode", "fast"}, "--mode must be river or river-many"},
		{[]string{"compare", "--rounds", "0"}, "--rounds must be at least 1"},
		{[]string{"river", "--fetch-cooldown", "0s"}, "--fetch-cooldown must be at least 1ms"},
		// A server out of reach says how to go on without one.
		{[]string{"compare", "--store", "postgres", "--postgres", "postgres://postgres@127.0.0.1:1/test?sslmode=disable"},
			"--store sqlite needs no server"},
	} {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), tc.args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("peers %s: exit %d, %q; want exit 2 and %q", strings.Join(tc.args, " "), code, errOut.String(), tc.want)
		}
	}
}

func TestProcCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	// Burn a little CPU so the reading is above zero.
	x := 0
	for i := range 50_000_000 {
		x ^= i
	}
	if d, ok := procCPU(os.Getpid()); !ok || d <= 0 {
		t.Fatalf("procCPU of this process: %v, %v (x %d)", d, ok, x)
	}
}

// TestCompareWithHandoff builds the product's handoff and runs one small
// round against it: the two sides must still read each other's JSON.
func TestCompareWithHandoff(t *testing.T) {
	if testing.Short() {
		t.Skip("builds handoff")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PEERS_TEST_CHILD", "1")
	var out, log bytes.Buffer
	o := CompareOptions{Rounds: 1, Modes: []string{ModeMany}, Self: []string{self}, Handlers: "go"}
	o.flags("compare", &log)
	if err := o.parse(o.fs, []string{"--jobs", "200", "--concurrency", "4"}); err != nil {
		t.Fatal(err)
	}
	if err := Compare(t.Context(), o, &out, &log); err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	for line := range strings.Lines(out.String()) {
		if f := strings.Fields(line); len(f) > 3 && f[1] == "handoff" && (f[2] == "0" || f[2] == "NaN") {
			t.Errorf("handoff's jobs/s not read: %q", line)
		}
	}
	if !containsRow(out.String(), "1", "handoff") || !containsRow(out.String(), "1", ModeMany) {
		t.Errorf("rows missing:\n%s", out.String())
	}
}
