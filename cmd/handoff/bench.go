package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/bench"
	"github.com/handoff-run/handoff/store/postgres"
)

func (c *cli) benchCmd() *cobra.Command {
	return group("bench", "Measure handoff on this machine", c.benchJobsCmd())
}

func (c *cli) benchJobsCmd() *cobra.Command {
	var f benchJobsFlags
	cmd := &cobra.Command{
		Use:   "jobs [--jobs N] [--rate R] [--concurrency C] [--apps N] [--light] [--postgres URL [--databases N]] [--handlers js|go]",
		Short: "Run the job pattern of examples/jobs in process and time it",
		Long: `Run the job pattern in this process, on a fresh embedded store in a
temporary directory (durable: every write is fsynced before it returns),
with examples/jobs' access.js and backend.js deployed on the real clock.
With --postgres URL (else $HANDOFF_POSTGRES) the store is PostgreSQL
instead: a database of its own, created on that server for the run and
dropped after (the URL's role needs CREATEDB).
Clients put --jobs pending jobs through access.js; the example's onChange
claims, works and finishes each one.

It reports commit → onChange latency, pending → done latency (from the
put's return to the commit of the job's done revision), put latency and
jobs/s sustained (done jobs over the time from the first put to the last
done), and checks in the ledger that every job reached done exactly once.

The JSON result goes to stdout, a short table to stderr. --light offers
200 jobs at 100 jobs/s (the latency numbers); the default puts 5000 jobs
as fast as the clients can (the throughput number). Exit 1 if a job did
not end done exactly once.

--handlers go swaps the JavaScript for the same transition table and
handlers written in Go, built into the bench as a program embedding
handoff would write them (package github.com/handoff-run/handoff): the
run shows what the engine and the store cost on their own, so the
difference is what JavaScript adds to a job.`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			return c.benchJobs(cmd, &f)
		}),
	}
	fl := cmd.Flags()
	fl.IntVar(&f.o.Jobs, "jobs", 5000, "jobs to put")
	fl.Float64Var(&f.o.Rate, "rate", 0, "jobs offered per second (0: as fast as the clients can)")
	fl.IntVar(&f.o.Concurrency, "concurrency", 16, "clients putting jobs at once")
	fl.IntVar(&f.o.Apps, "apps", 1, "spread the jobs over this many apps, each with examples/jobs' code (job i goes to app i mod N)")
	fl.DurationVar(&f.o.Work, "work", 0, "how long each job's work takes (e.g. 1s): shows how many jobs run at once")
	fl.BoolVar(&f.light, "light", false, "light load for the latency numbers: 200 jobs at 100 jobs/s, 4 clients (unless set)")
	fl.StringVar(&f.o.PostgresDB, "postgres-db", "", "with --postgres: run in this existing database, left in place after, instead of a fresh one (it must hold no bench run)")
	fl.StringVar(&f.o.Postgres, "postgres", "", "PostgreSQL server URL, postgres://USER:PASSWORD@HOST:PORT/DB: run on a fresh database created there (default $HANDOFF_POSTGRES)")
	fl.IntVar(&f.o.Databases, "databases", 1, "with --postgres: spread the apps over this many fresh databases on that server, as serve with as many --postgres URLs does")
	fl.StringVar(&f.o.Handlers, "handlers", bench.HandlersJS, "js: examples/jobs' access.js and backend.js; go: the same table and handlers in Go, to measure the engine and store without JavaScript")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the run to this file (go tool pprof)")
	fl.StringVar(&f.memProfile, "memprofile", "", "write an allocation profile of the run to this file (go tool pprof -sample_index=alloc_space)")
	fl.BoolVar(&f.quiet, "quiet", false, "no progress lines and no table on stderr")
	return cmd
}

// maxBenchApps bounds --apps: each app runs its own deliverer and
// scheduler.
const maxBenchApps = 1000

// benchJobsFlags are the flags of bench jobs.
type benchJobsFlags struct {
	o          bench.JobsOptions
	light      bool
	cpuProfile string
	memProfile string
	quiet      bool
}

// benchJobs runs bench jobs and prints its result.
func (c *cli) benchJobs(cmd *cobra.Command, f *benchJobsFlags) error {
	if err := c.benchJobsOptions(cmd, f); err != nil {
		return err
	}
	o := &f.o
	if !f.quiet {
		o.Progress = c.stderr
		where := "durable store in a temp dir"
		if o.Postgres != "" {
			where = "a fresh database on " + postgres.Redact(o.Postgres)
		}
		if o.Handlers == bench.HandlersGo {
			where += ", handlers in Go"
		}
		if o.Apps > 1 {
			where += fmt.Sprintf(", %d apps", o.Apps)
		}
		if o.Databases > 1 {
			where += fmt.Sprintf(" over %d databases", o.Databases)
		}
		fmt.Fprintf(c.stderr, "bench jobs: %d jobs, %s, %d clients, %s\n",
			o.Jobs, rateText(o.Rate), o.Concurrency, where)
	}
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return errs.New(errs.Invalid, "cannot create the CPU profile %s: %v", f.cpuProfile, err)
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return errs.New(errs.Internal, "cannot start the CPU profile: %v", err)
		}
		defer pprof.StopCPUProfile()
	}
	if f.memProfile != "" {
		defer writeAllocs(f.memProfile, c.stderr)
	}
	res, err := bench.Jobs(cmd.Context(), *o)
	if errors.Is(err, bench.ErrEarlierRun) {
		return errs.New(errs.Invalid, "bench jobs: %v", err)
	}
	if errors.Is(err, bench.ErrStore) && o.Postgres != "" {
		return errs.New(errs.Unavailable, "bench jobs: %v; check that PostgreSQL is up at that URL and its role may CREATE DATABASE", err)
	}
	if err != nil {
		return errs.New(errs.Internal, "bench jobs: %v", err)
	}
	if !f.quiet {
		printJobsTable(c.stderr, res)
	}
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return err
	}
	if !res.OK {
		return errs.New(errs.Internal, "bench jobs: %d of %d jobs done exactly once (%d done twice, %d not done)",
			res.Done, res.Jobs, res.DoneTwice, res.NotDone)
	}
	return nil
}

// benchJobsOptions completes f.o from $HANDOFF_POSTGRES and --light, and
// checks it.
func (c *cli) benchJobsOptions(cmd *cobra.Command, f *benchJobsFlags) error {
	fl, o := cmd.Flags(), &f.o
	if o.Postgres == "" {
		o.Postgres = c.getenv("HANDOFF_POSTGRES")
	}
	if o.PostgresDB != "" && o.Postgres == "" {
		return usageError{"--postgres-db names a database on a PostgreSQL server: give the server with --postgres (or HANDOFF_POSTGRES)"}
	}
	if o.Databases > 1 && (o.Postgres == "" || o.PostgresDB != "") {
		return usageError{"--databases creates fresh databases on a PostgreSQL server: give the server with --postgres (or HANDOFF_POSTGRES), without --postgres-db"}
	}
	if o.Databases < 1 {
		return usageError{fmt.Sprintf("--databases must be at least 1, got %d", o.Databases)}
	}
	if err := postgres.CheckURL(o.Postgres); o.Postgres != "" && err != nil {
		return usageError{"--postgres (or HANDOFF_POSTGRES) must be a postgres://USER:PASSWORD@HOST:PORT/DB URL: " + err.Error()}
	}
	if f.light {
		if !fl.Changed("jobs") {
			o.Jobs = 200
		}
		if !fl.Changed("rate") {
			o.Rate = 100
		}
		if !fl.Changed("concurrency") {
			o.Concurrency = 4
		}
	}
	if o.Jobs <= 0 {
		return usageError{fmt.Sprintf("--jobs must be at least 1, got %d", o.Jobs)}
	}
	if o.Rate < 0 {
		return usageError{fmt.Sprintf("--rate must be 0 (as fast as possible) or more, got %g", o.Rate)}
	}
	if o.Concurrency <= 0 {
		return usageError{fmt.Sprintf("--concurrency must be at least 1, got %d", o.Concurrency)}
	}
	if o.Apps <= 0 || o.Apps > maxBenchApps {
		return usageError{fmt.Sprintf("--apps must be 1 to %d, got %d", maxBenchApps, o.Apps)}
	}
	if o.Handlers != bench.HandlersJS && o.Handlers != bench.HandlersGo {
		return usageError{fmt.Sprintf("--handlers must be %s (examples/jobs) or %s (the same in Go), got %q", bench.HandlersJS, bench.HandlersGo, o.Handlers)}
	}
	return nil
}

func rateText(r float64) string {
	if r == 0 {
		return "as fast as possible"
	}
	return fmt.Sprintf("%g jobs/s offered", r)
}

func printJobsTable(w io.Writer, r *bench.JobsResult) {
	row := func(name string, l bench.Latency) {
		fmt.Fprintf(w, "  %-20s %9.3f %9.3f %9.3f %9.3f %8d\n", name, l.P50, l.P90, l.P99, l.Max, l.Count)
	}
	fmt.Fprintf(w, "  store: %s, handlers: %s\n", r.Store, r.Handlers)
	fmt.Fprintf(w, "  %-20s %9s %9s %9s %9s %8s\n", "latency (ms)", "p50", "p90", "p99", "max", "n")
	row("commit → onChange", r.Delivery)
	row("pending → done", r.Job)
	row("put", r.Put)
	fmt.Fprintf(w, "  %d jobs in %.2f s: %.0f jobs/s, %.2f ms of CPU per job (%.1f cores)\n",
		r.Jobs, r.WallSeconds, r.JobsPerSec, r.CPUMsPerJob, r.CPUCores)
	fmt.Fprintf(w, "  done exactly once: %d, twice: %d, not done: %d\n", r.Done, r.DoneTwice, r.NotDone)
}

// writeAllocs writes the allocations of the run so far. Garbage collection
// costs in proportion to what is allocated, so this is where a job's GC
// time comes from.
func writeAllocs(path string, stderr io.Writer) {
	pf, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(stderr, "bench jobs: cannot create the allocation profile %s: %v\n", path, err)
		return
	}
	defer pf.Close()
	if err := pprof.Lookup("allocs").WriteTo(pf, 0); err != nil {
		fmt.Fprintf(stderr, "bench jobs: cannot write the allocation profile: %v\n", err)
	}
}
