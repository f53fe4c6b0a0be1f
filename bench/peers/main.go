package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"
)

const usage = `usage:
  peers river   [--store sqlite|postgres] [--mode river|river-many] [--jobs N] [--concurrency C] [River settings]
  peers compare [--store sqlite|postgres] [--jobs N] [--rounds R] [--modes river,river-many] [--handoff BIN] [River settings]

River settings (defaults: the best found on a 2-core machine):
  --workers N  --fetch-cooldown D  --fetch-poll D  --batch N  --pool-conns N
Run "peers river -h" or "peers compare -h" for every flag.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command line; it returns the exit code: 0 done, 1 a round
// failed or a job was not completed exactly once, 2 bad usage or a store
// out of reach.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch args[0] {
	case "river":
		err = riverCmd(ctx, args[1:], stdout, stderr)
	case "compare":
		err = compareCmd(ctx, args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "peers: unknown command %q\n%s", args[0], usage)
		return 2
	}
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errNoPostgres):
		fmt.Fprintf(stderr, "peers: %v\nStart PostgreSQL, or name a server with --postgres URL (a role that may CREATE DATABASE); --store sqlite needs no server.\n", err)
		return 2
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "peers:", err)
		return 2
	}
	fmt.Fprintln(stderr, "peers:", err)
	return 1
}

// usageError is bad input on the command line.
type usageError string

func (e usageError) Error() string { return string(e) }

// common are the flags both commands take.
type common struct {
	store, postgres   string
	jobs, concurrency int
	// River's settings, and which of them the command line set.
	workers, batch, poolConns int
	cooldown, poll            time.Duration
	set                       map[string]bool
	fs                        *flag.FlagSet
}

// flags makes the flag set of command name with the shared flags.
func (c *common) flags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.fs = fs
	pg := os.Getenv("HANDOFF_POSTGRES")
	if pg == "" {
		pg = DefaultPostgres
	}
	d := DefaultSettings(StorePostgres, ModeOne)
	fs.StringVar(&c.store, "store", StoreSQLite, "sqlite (WAL, synchronous=FULL, in a temp dir) or postgres (a fresh database)")
	fs.StringVar(&c.postgres, "postgres", pg, "PostgreSQL server URL for --store postgres (default $HANDOFF_POSTGRES, else the local test server)")
	fs.IntVar(&c.jobs, "jobs", 5000, "jobs to insert")
	fs.IntVar(&c.concurrency, "concurrency", 16, "producers inserting at once")
	fs.IntVar(&c.workers, "workers", d.Workers, "River: MaxWorkers of the queue")
	fs.DurationVar(&c.cooldown, "fetch-cooldown", d.FetchCooldown, "River: FetchCooldown")
	fs.DurationVar(&c.poll, "fetch-poll", d.FetchPollInterval, "River: FetchPollInterval")
	fs.IntVar(&c.batch, "batch", d.Batch, "River: jobs per InsertMany call in mode river-many")
	fs.IntVar(&c.poolConns, "pool-conns", d.PoolConns, "River: connection pool size")
	return fs
}

// parse parses args and checks what both commands share.
func (c *common) parse(fs *flag.FlagSet, args []string) error {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: peers %s [flags]\n", fs.Name())
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(fmt.Sprintf("unexpected argument %q; flags only", fs.Arg(0)))
	}
	c.set = map[string]bool{}
	fs.Visit(func(f *flag.Flag) { c.set[f.Name] = true })
	switch {
	case c.store != StoreSQLite && c.store != StorePostgres:
		return usageError(fmt.Sprintf("--store must be sqlite or postgres, got %q", c.store))
	case c.jobs < 1:
		return usageError(fmt.Sprintf("--jobs must be at least 1, got %d", c.jobs))
	case c.concurrency < 1:
		return usageError(fmt.Sprintf("--concurrency must be at least 1, got %d", c.concurrency))
	case c.workers < 1 || c.batch < 1 || c.poolConns < 1:
		return usageError("--workers, --batch and --pool-conns must be at least 1")
	case c.cooldown < time.Millisecond || c.poll < c.cooldown:
		return usageError("--fetch-cooldown must be at least 1ms and --fetch-poll at least --fetch-cooldown")
	}
	return nil
}

// settings are the defaults for store and mode, with what the command
// line set in their place.
func (c *common) settings(mode string) Settings {
	s := DefaultSettings(c.store, mode)
	if c.set["workers"] {
		s.Workers = c.workers
	}
	if c.set["fetch-cooldown"] {
		s.FetchCooldown = c.cooldown
	}
	if c.set["fetch-poll"] {
		s.FetchPollInterval = c.poll
	}
	if c.set["batch"] {
		s.Batch = c.batch
	}
	if c.set["pool-conns"] {
		s.PoolConns = c.poolConns
	}
	return s
}

// riverArgs are the flags that make a `peers river` round run as this
// command line asks.
func (c *common) riverArgs(mode string) []string {
	args := []string{"river", "--store", c.store, "--postgres", c.postgres, "--mode", mode,
		"--jobs", fmt.Sprint(c.jobs), "--concurrency", fmt.Sprint(c.concurrency)}
	for _, name := range []string{"workers", "fetch-cooldown", "fetch-poll", "batch", "pool-conns"} {
		if c.set[name] {
			args = append(args, "--"+name, c.fs.Lookup(name).Value.String())
		}
	}
	return args
}

func riverCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var c common
	fs := c.flags("river", stderr)
	mode := fs.String("mode", ModeOne, "river: one Insert per producer call; river-many: InsertMany of --batch jobs per call")
	if err := c.parse(fs, args); err != nil {
		return err
	}
	if *mode != ModeOne && *mode != ModeMany {
		return usageError(fmt.Sprintf("--mode must be river or river-many, got %q", *mode))
	}
	res, err := RunRiver(ctx, RiverOptions{Store: c.store, Postgres: c.postgres, Jobs: c.jobs,
		Concurrency: c.concurrency, Settings: c.settings(*mode)})
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(res); err != nil {
		return err
	}
	if !res.OK {
		return fmt.Errorf("not every job ran and completed exactly once")
	}
	return nil
}
