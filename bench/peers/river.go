package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
)

// The River modes: one Insert per producer call, or InsertMany of a
// batch per call.
const (
	ModeOne  = "river"
	ModeMany = "river-many"
)

// Settings are River's knobs for a round.
type Settings struct {
	Mode              string        `json:"mode"`
	Workers           int           `json:"workers"`                // MaxWorkers of the queue
	FetchCooldown     time.Duration `json:"fetch_cooldown_ns"`      // least time between fetches
	FetchPollInterval time.Duration `json:"fetch_poll_interval_ns"` // fetch at least this often
	Batch             int           `json:"batch"`                  // jobs per InsertMany (river-many)
	PoolConns         int           `json:"pool_conns"`             // pool size
}

// DefaultSettings are the settings that gave River its best throughput
// on a 2-core machine (docs/benchmarks.md, "Side by side with River"):
// 1,000 workers, so one fetch takes all that is waiting; a fetch at most
// every 10 ms and at least every 100 ms, since fetching more often took
// the server's CPU from the inserts; on PostgreSQL 32 connections, so
// the producers, fetches and completions never wait for one; on SQLite
// one, as River asks.
func DefaultSettings(store, mode string) Settings {
	s := Settings{Mode: mode, Workers: 1000, FetchCooldown: 10 * time.Millisecond,
		FetchPollInterval: 100 * time.Millisecond, Batch: 100, PoolConns: 32}
	if store == StoreSQLite {
		s.PoolConns = 1
	}
	return s
}

// RiverOptions configure one round of River.
type RiverOptions struct {
	Store       string // StoreSQLite or StorePostgres
	Postgres    string // server URL for StorePostgres
	Jobs        int
	Concurrency int // producers inserting at once
	Settings    Settings
	Timeout     time.Duration // for the last completion; default 1 min + 10 ms a job
	Logger      *slog.Logger
}

// benchArgs is the job: about the size of handoff's job document.
type benchArgs struct {
	Num   int    `json:"num"`
	Input string `json:"input"`
}

func (benchArgs) Kind() string { return "bench_job" }

// noopWorker does nothing but note when each job first started and how
// often it ran.
type noopWorker struct {
	river.WorkerDefaults[benchArgs]
	started []atomic.Int64 // unix ns
	runs    []atomic.Int32
}

func (w *noopWorker) Work(ctx context.Context, j *river.Job[benchArgs]) error {
	if i := j.Args.Num; i >= 0 && i < len(w.runs) {
		w.runs[i].Add(1)
		w.started[i].CompareAndSwap(0, time.Now().UnixNano())
	}
	return nil
}

// RunRiver runs one round: a fresh store, River migrated onto it and
// started, then Concurrency producers insert Jobs jobs, and the round
// ends when River reports every job completed.
func RunRiver(ctx context.Context, o RiverOptions) (*Result, error) {
	if o.Jobs <= 0 || o.Concurrency <= 0 {
		return nil, errors.New("jobs and concurrency must be at least 1")
	}
	if o.Settings.Mode != ModeOne && o.Settings.Mode != ModeMany {
		return nil, fmt.Errorf("mode must be %s or %s, not %q", ModeOne, ModeMany, o.Settings.Mode)
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute + time.Duration(o.Jobs)*10*time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	switch o.Store {
	case StoreSQLite:
		db, cleanup, err := openSQLite(o.Settings.PoolConns)
		if err != nil {
			return nil, err
		}
		defer cleanup()
		return runRound(ctx, riversqlite.New(db), o)
	case StorePostgres:
		pool, cleanup, err := openPostgres(ctx, o.Postgres, o.Settings.PoolConns)
		if err != nil {
			return nil, err
		}
		defer cleanup()
		return runRound(ctx, riverpgxv5.New(pool), o)
	}
	return nil, fmt.Errorf("store must be %s or %s, not %q", StoreSQLite, StorePostgres, o.Store)
}

func runRound[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], o RiverOptions) (*Result, error) {
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return nil, err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return nil, fmt.Errorf("migrating River's schema: %w", err)
	}
	n, s := o.Jobs, o.Settings
	w := &noopWorker{started: make([]atomic.Int64, n), runs: make([]atomic.Int32, n)}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     s.FetchCooldown,
		FetchPollInterval: s.FetchPollInterval,
		Logger:            o.Logger,
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: s.Workers}},
		Workers:           workers,
	})
	if err != nil {
		return nil, err
	}
	// Completions come from the subscription, sent once the completer
	// has committed them: the same point as handoff's done commit.
	events, cancelEvents := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: n + 1000,
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed, river.EventKindJobCancelled},
	})
	defer cancelEvents()
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	defer func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = client.Stop(stopCtx)
	}()

	var completed, failed int
	var lastDone time.Time
	allDone := make(chan struct{})
	go func() {
		for ev := range events {
			if ev.Kind != river.EventKindJobCompleted {
				failed++
				continue
			}
			completed++
			lastDone = time.Now()
			if completed == n {
				close(allDone)
				return
			}
		}
	}()

	batch := 1
	if s.Mode == ModeMany {
		batch = max(1, s.Batch)
	}
	cpu0 := cpuTime()
	start := time.Now()
	committed, err := produce(ctx, client, o.Concurrency, n, batch)
	if err != nil {
		return nil, err
	}
	timedOut := false
	select {
	case <-allDone:
	case <-time.After(o.Timeout):
		timedOut = true
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	cpu, cpuWall := cpuTime()-cpu0, time.Since(start)
	if timedOut {
		return nil, fmt.Errorf("River did not complete all %d jobs within %s", n, o.Timeout)
	}

	res := &Result{Side: s.Mode, Store: o.Store, Jobs: n, Concurrency: o.Concurrency, Settings: &s}
	res.WallSeconds = lastDone.Sub(start).Seconds()
	res.JobsPerSec = float64(n) / res.WallSeconds
	res.CPUMsPerJob = ms(cpu) / float64(n)
	res.CPUCores = cpu.Seconds() / cpuWall.Seconds()
	lat := make([]time.Duration, 0, n)
	once := true
	for i := range n {
		if w.runs[i].Load() != 1 {
			once = false
		}
		if at := w.started[i].Load(); at != 0 {
			// A worker may start before its producer notes the
			// insert's return; that counts as no wait.
			lat = append(lat, max(0, time.Unix(0, at).Sub(committed[i])))
		}
	}
	res.Delivery = summarize(lat)
	res.OK = once && failed == 0
	return res, nil
}

// produce inserts jobs 0..n-1 from concurrency producers, batch jobs a
// call, and returns when each insert returned (the job was durable).
func produce[TTx any](ctx context.Context, client *river.Client[TTx], concurrency, n, batch int) ([]time.Time, error) {
	committed := make([]time.Time, n)
	var next atomic.Int64
	errc := make(chan error, concurrency)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for ctx.Err() == nil {
				lo := int(next.Add(int64(batch))) - batch
				if lo >= n {
					return
				}
				hi := min(lo+batch, n)
				if err := insert(ctx, client, lo, hi); err != nil {
					errc <- err
					return
				}
				at := time.Now()
				for i := lo; i < hi; i++ {
					committed[i] = at
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	return committed, <-errc
}

// insert puts jobs lo..hi-1 in one call: Insert for one, InsertMany for
// more.
func insert[TTx any](ctx context.Context, c *river.Client[TTx], lo, hi int) error {
	if hi-lo == 1 {
		_, err := c.Insert(ctx, jobArgs(lo), nil)
		return err
	}
	params := make([]river.InsertManyParams, 0, hi-lo)
	for i := lo; i < hi; i++ {
		params = append(params, river.InsertManyParams{Args: jobArgs(i)})
	}
	_, err := c.InsertMany(ctx, params)
	return err
}

func jobArgs(i int) benchArgs {
	return benchArgs{Num: i, Input: fmt.Sprintf("bench job number %d: count these words", i)}
}
