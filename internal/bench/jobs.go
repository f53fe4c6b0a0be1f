// Package bench measures handoff end to end, in process, on the real
// durable store: what `handoff bench` runs. It lives outside cmd/ so the
// command stays thin and the measurement can be tested on its own.
package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
)

// The app, database and user the job benchmark runs as.
const (
	jobsApp   = "bench/jobs"
	jobsDB    = "jobs"
	jobsOwner = "bench"
	jobPrefix = "job-"
	// maxPutTries bounds the tries of one job's put.
	maxPutTries = 3
)

// JobsOptions configure a run of the job pattern benchmark.
type JobsOptions struct {
	Jobs        int     // jobs to put; default 5000
	Rate        float64 // jobs offered per second; 0 puts them as fast as the clients can
	Concurrency int     // clients putting jobs at once; default 16
	// Dir is the data directory; "" makes a temporary one, removed after.
	Dir string
	// Postgres, when set, is the URL of a PostgreSQL server: the run uses
	// a database of its own created there, and dropped after, instead of
	// the embedded store.
	Postgres string
	// PostgresDB, with Postgres, names an existing database on that
	// server to run in instead of a fresh one, left in place after: one
	// set up beforehand (its settings, pg_stat_statements), or one of
	// several an app placement spans. It must hold no bench run yet.
	PostgresDB string
	// Databases, with Postgres, spreads the apps over this many fresh
	// databases on that server, as `serve` with as many --postgres URLs
	// does (internal/placement); 0 or 1 is one database.
	Databases int
	// Timeout bounds the wait for the last job to be done; default one
	// minute plus 10 ms per job.
	Timeout time.Duration
	// Logger gets the server's own log lines (errors of the engine);
	// default: discarded below warnings, to stderr.
	Logger *slog.Logger
	// Progress, when set, gets a line now and then while the run lasts.
	Progress io.Writer
	// Handlers is HandlersJS (default): examples/jobs as deployed; or
	// HandlersGo: the same table and handlers in Go (gojobs.go), to
	// measure the engine and the store without JavaScript.
	Handlers string
	// Work is how long each job's work takes (its delayMs): with it the
	// run shows how many jobs run at once, not how fast they are moved.
	Work time.Duration
	// Apps spreads the jobs over this many apps, each with the job app's
	// code (default 1): job i goes to app i mod Apps. Apps are the unit
	// that commits and delivers apart, on one store or several.
	Apps int
}

// appName is the name of the run's k-th app.
func appName(k int) string {
	if k == 0 {
		return jobsApp
	}
	return fmt.Sprintf("%s-%d", jobsApp, k+1)
}

// appOf is the app of job i.
func (o JobsOptions) appOf(i int) string { return appName(i % o.Apps) }

// The values of JobsOptions.Handlers.
const (
	HandlersJS = "js"
	HandlersGo = "go"
)

// Latency summarises durations in milliseconds.
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
	at := func(q float64) float64 {
		i := int(q * float64(len(d)))
		if i >= len(d) {
			i = len(d) - 1
		}
		return ms(d[i])
	}
	return Latency{Count: len(d), P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: ms(d[len(d)-1])}
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// JobsResult is what one run measured.
type JobsResult struct {
	Store       string  `json:"store"`    // StoreSQLite or StorePostgres
	Handlers    string  `json:"handlers"` // HandlersJS or HandlersGo
	Jobs        int     `json:"jobs"`
	Rate        float64 `json:"rate"` // offered jobs/s, 0: as fast as possible
	Concurrency int     `json:"concurrency"`
	Apps        int     `json:"apps"`
	GOMAXPROCS  int     `json:"gomaxprocs"`
	// WorkSeconds is each job's work (JobsOptions.Work).
	WorkSeconds float64 `json:"work_seconds,omitempty"`

	// WallSeconds runs from the first put to the commit of the last done.
	WallSeconds float64 `json:"wall_seconds"`
	// JobsPerSec is done jobs over WallSeconds.
	JobsPerSec float64 `json:"jobs_per_sec"`
	// Delivery is commit → onChange: from the moment each write became
	// durable (its Commit returned) to the start of the first onChange run
	// of its event, as engine.Options.OnDelivery reports it.
	Delivery Latency `json:"commit_to_onchange"`
	// Job is pending → done: from the return of the job's put (durable)
	// to the return of the commit of its done revision.
	Job Latency `json:"pending_to_done"`
	// Put is the latency of the clients' puts (each one fsynced).
	Put Latency `json:"put"`
	// PutRetries counts puts tried again after access.js ran past its
	// deadline or the engine was overloaded (a stalled machine).
	PutRetries int `json:"put_retries"`
	// CPUMsPerJob is the process's CPU time (user + system) over the
	// same span as WallSeconds, per job: what a job costs whatever else
	// runs on the machine. CPUCores is that CPU time over the wall time.
	CPUMsPerJob float64 `json:"cpu_ms_per_job"`
	CPUCores    float64 `json:"cpu_cores"`

	// Done counts jobs whose ledger holds exactly one transition into
	// done and whose head is done; DoneTwice those with more than one;
	// NotDone those that never got there.
	Done      int  `json:"done"`
	DoneTwice int  `json:"done_twice"`
	NotDone   int  `json:"not_done"`
	Events    int  `json:"events_left"` // outbox events still waiting at the end
	OK        bool `json:"ok"`          // every job done exactly once
}

// watchStore is the durable store with two hooks, both outside the
// writer goroutine and free of reads, so they add nothing to a commit:
//
//   - Commit notes when each write with an onChange event became durable
//     (the moment Commit returns to its caller), and when a job's done
//     revision did;
//   - ClaimEvents hands the deliverer each event with its revision's time
//     replaced by that commit time. The engine reports OnDelivery from the
//     revision's time, which is stamped before access.js runs and before
//     the fsync; with the commit time, the number is commit → onChange.
//     Nothing else reads the time of a claimed event.
type watchStore struct {
	store.Store
	done func(id string, at time.Time)

	mu        sync.Mutex
	committed map[eventKey]time.Time // durable (events not claimed yet)
}

type eventKey struct{ app, seq int64 }

var doneMark = []byte(`"done"`)

func (s *watchStore) Commit(ctx context.Context, w *store.Write) (int64, error) {
	seq, err := s.Store.Commit(ctx, w)
	if err != nil {
		return seq, err
	}
	at := time.Now()
	if w.Event != nil {
		s.mu.Lock()
		s.committed[eventKey{w.AppID, seq}] = at
		s.mu.Unlock()
	}
	if w.DB == jobsDB && !w.Deleted && bytes.Contains(w.Body, doneMark) {
		var st struct {
			Status string `json:"status"`
		}
		if json.Unmarshal(w.Body, &st) == nil && st.Status == "done" {
			s.done(w.ID, at)
		}
	}
	return seq, nil
}

func (s *watchStore) ClaimEvents(ctx context.Context, c store.Claim) ([]store.Event, error) {
	evs, err := s.Store.ClaimEvents(ctx, c)
	return s.committedAt(evs), err
}

// committedAt gives claimed events their commit times.
func (s *watchStore) committedAt(evs []store.Event) []store.Event {
	s.mu.Lock()
	for i := range evs {
		k := eventKey{evs[i].AppID, evs[i].Seq}
		if at, ok := s.committed[k]; ok {
			evs[i].Rev.Time = at
			delete(s.committed, k)
		}
	}
	s.mu.Unlock()
	return evs
}

// Jobs runs the job pattern of examples/jobs on a fresh durable store:
// clients put jobs through access.js, the example's onChange claims, works
// and finishes each one, and the run ends when every job is done and the
// outbox is empty.
func Jobs(ctx context.Context, o JobsOptions) (*JobsResult, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	n := o.Jobs
	r := newJobsRun(n)
	inner, storeName, cleanup, err := openStore(ctx, o)
	if err != nil {
		return nil, err
	}
	defer cleanup()
	st := &watchStore{Store: inner, committed: map[eventKey]time.Time{}, done: r.done}
	e, stop, err := startJobs(ctx, st, o, r.delivered)
	if err != nil {
		return nil, err
	}
	defer stop()

	owner := engine.Actor{User: jobsOwner, Path: "cli"}
	cpu0 := cpuTime()
	start := time.Now()
	wait := r.putJobs(ctx, e, o, owner, start)
	stopProgress := progress(o.Progress, n, &r.next, &r.finished)
	if err := wait(); err != nil {
		stopProgress()
		return nil, err
	}
	select {
	case <-r.allDone:
	case <-time.After(o.Timeout):
	case <-ctx.Done():
	}
	stopProgress()
	cpu, cpuWall := cpuTime()-cpu0, time.Since(start)
	end := r.end()
	// Let the outbox drain (the done revisions' own events), so the
	// check below sees the final ledger.
	left, err := drain(ctx, e, jobsAdmin, o.Apps, 30*time.Second)
	if err != nil {
		return nil, err
	}

	res := &JobsResult{Store: storeName, Handlers: o.Handlers, Jobs: n, Rate: o.Rate, Concurrency: o.Concurrency, Apps: o.Apps, GOMAXPROCS: runtime.GOMAXPROCS(0), WorkSeconds: o.Work.Seconds(),
		Events: left, PutRetries: int(r.retries.Load())}
	res.WallSeconds = end.Sub(start).Seconds()
	res.JobsPerSec = float64(r.finished.Load()) / res.WallSeconds
	res.CPUMsPerJob = ms(cpu) / float64(n)
	res.CPUCores = cpu.Seconds() / cpuWall.Seconds()
	r.latencies(res)
	if err := checkLedger(ctx, e, owner, n, o.Apps, res); err != nil {
		return nil, err
	}
	// The commit hook must tell the same story as the ledger.
	res.DoneTwice = max(res.DoneTwice, r.doneTwice())
	res.OK = res.Done == n && res.DoneTwice == 0 && res.NotDone == 0
	return res, nil
}

// setDefaults fills in the options left zero and checks the others.
func (o *JobsOptions) setDefaults() error {
	if o.Jobs <= 0 {
		o.Jobs = 5000
	}
	if o.Concurrency <= 0 {
		o.Concurrency = 16
	}
	if o.Rate < 0 {
		return errors.New("rate must be 0 (as fast as possible) or more")
	}
	if o.Timeout <= 0 {
		o.Timeout = time.Minute + time.Duration(o.Jobs)*(10*time.Millisecond+o.Work)
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if o.Apps <= 0 {
		o.Apps = 1
	}
	if o.PostgresDB != "" && o.Postgres == "" {
		return errors.New("a database to run in (PostgresDB) needs the PostgreSQL server's URL (Postgres)")
	}
	if o.Databases > 1 && (o.Postgres == "" || o.PostgresDB != "") {
		return errors.New("several databases (Databases) need the PostgreSQL server's URL (Postgres) to create them on, and no PostgresDB")
	}
	switch o.Handlers {
	case "":
		o.Handlers = HandlersJS
	case HandlersJS, HandlersGo:
	default:
		return fmt.Errorf("handlers must be %q or %q, not %q", HandlersJS, HandlersGo, o.Handlers)
	}
	return nil
}

func jobID(i int) string { return fmt.Sprintf("%s%07d", jobPrefix, i) }

func jobIndex(id string, n int) (int, bool) {
	s, ok := strings.CutPrefix(id, jobPrefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(s)
	return i, err == nil && i >= 0 && i < n
}

// drain waits until the app's outbox is empty, up to limit; it returns
// how many events are still waiting.
func drain(ctx context.Context, e *engine.Engine, admin engine.Actor, apps int, limit time.Duration) (int, error) {
	deadline := time.Now().Add(limit)
	for {
		waiting := 0
		for k := range apps {
			evs, err := e.Events(ctx, admin, appName(k), false, 0, engine.MaxLimit)
			if err != nil {
				return 0, err
			}
			waiting += len(evs)
		}
		if waiting == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return waiting, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkLedger reads the jobs database's changes feed — every committed
// revision — and counts, per job, the revisions that moved it into done.
// Exactly one is the property the job pattern promises; a second would
// mean a job was finished twice.
func checkLedger(ctx context.Context, e *engine.Engine, owner engine.Actor, n, apps int, res *JobsResult) error {
	type state struct {
		status string
		dones  int
	}
	jobs := make([]state, n)
	for k := range apps {
		if err := readLedger(ctx, e, owner, appName(k), func(i int, status string) {
			if i%apps != k {
				return // not a job of this app
			}
			if status == "done" && jobs[i].status != "done" {
				jobs[i].dones++
			}
			jobs[i].status = status
		}, n); err != nil {
			return err
		}
	}
	for _, j := range jobs {
		switch {
		case j.dones > 1:
			res.DoneTwice++
		case j.dones == 1 && j.status == "done":
			res.Done++
		default:
			res.NotDone++
		}
	}
	return nil
}

// readLedger hands each revision of app's jobs database to job, in
// commit order: the job's number and its status.
func readLedger(ctx context.Context, e *engine.Engine, owner engine.Actor, app string, job func(i int, status string), n int) error {
	var since int64
	for {
		page, err := e.Changes(ctx, owner, app, jobsDB, since, engine.MaxLimit)
		if err != nil {
			return err
		}
		for _, c := range page.Changes {
			i, ok := jobIndex(c.ID, n)
			if !ok {
				continue
			}
			var d struct {
				Status string `json:"status"`
			}
			if err := json.Unmarshal(c.Doc, &d); err != nil {
				return fmt.Errorf("revision %d of %s: %w", c.Seq, c.ID, err)
			}
			job(i, d.Status)
		}
		if len(page.Changes) == 0 || page.Last == since {
			return nil
		}
		since = page.Last
	}
}

// progress prints a line a second while the run lasts. stop returns once
// the last line is written: the caller writes to w next.
func progress(w io.Writer, n int, put, done *atomic.Int64) (stop func()) {
	if w == nil {
		return func() {}
	}
	quit, exited := make(chan struct{}), make(chan struct{})
	var once sync.Once
	go func() {
		defer close(exited)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				fmt.Fprintf(w, "  … %d/%d put, %d done\n", min(put.Load(), int64(n)), n, done.Load())
			}
		}
	}()
	return func() {
		once.Do(func() { close(quit) })
		<-exited
	}
}
