package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

// jobsRun holds what a run measures while it lasts. Times are kept per
// job, by the number in its id.
type jobsRun struct {
	n         int
	putDone   []time.Time     // the put returned
	putLat    []time.Duration // the put took
	doneAt    []atomic.Int64  // the done revision committed (unix ns)
	doneCount []atomic.Int32
	finished  atomic.Int64
	allDone   chan struct{}
	// next is the number of the next job to put; retries counts puts
	// tried again.
	next, retries atomic.Int64

	deliveryMu sync.Mutex
	delivery   []time.Duration // a job's pending commit
}

func newJobsRun(n int) *jobsRun {
	return &jobsRun{
		n:         n,
		putDone:   make([]time.Time, n),
		putLat:    make([]time.Duration, n),
		doneAt:    make([]atomic.Int64, n),
		doneCount: make([]atomic.Int32, n),
		allDone:   make(chan struct{}),
		delivery:  make([]time.Duration, 0, n),
	}
}

// done notes a job's done revision committed at at; the first of each
// job counts, and the last job's closes allDone.
func (r *jobsRun) done(id string, at time.Time) {
	i, ok := jobIndex(id, r.n)
	if !ok {
		return
	}
	if r.doneCount[i].Add(1) == 1 {
		r.doneAt[i].Store(at.UnixNano())
		if r.finished.Add(1) == int64(r.n) {
			close(r.allDone)
		}
	}
}

// delivered notes one commit → onChange latency.
func (r *jobsRun) delivered(wait time.Duration) {
	r.deliveryMu.Lock()
	r.delivery = append(r.delivery, wait)
	r.deliveryMu.Unlock()
}

// putJobs starts the clients: each takes the next job number when it is
// due and puts the job as owner, through access.js, like `handoff db
// put`. wait returns once they stopped, with the first error.
func (r *jobsRun) putJobs(ctx context.Context, e *engine.Engine, o JobsOptions, owner engine.Actor, start time.Time) (wait func() error) {
	errc := make(chan error, o.Concurrency)
	var wg sync.WaitGroup
	for range o.Concurrency {
		wg.Go(func() {
			for {
				i := int(r.next.Add(1) - 1)
				if i >= r.n || ctx.Err() != nil {
					return
				}
				if err := r.putJob(ctx, e, o, owner, start, i); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	return func() error {
		wg.Wait()
		close(errc)
		return <-errc
	}
}

// putJob puts job i once it is due.
func (r *jobsRun) putJob(ctx context.Context, e *engine.Engine, o JobsOptions, owner engine.Actor, start time.Time, i int) error {
	if o.Rate > 0 {
		due := start.Add(time.Duration(float64(i) / o.Rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
	}
	body := fmt.Appendf(nil, `{"kind":"job","status":"pending","attempts":0,"input":"bench job number %d: count these words"`, i)
	if o.Work > 0 {
		body = fmt.Appendf(body, `,"delayMs":%d`, o.Work.Milliseconds())
	}
	body = append(body, '}')
	t0 := time.Now()
	app := o.appOf(i)
	// ifAbsent, as an enqueuer that may try again puts a job: a second
	// try of a put that did commit reports the job instead of refusing.
	create := appcode.PutOptions{IfAbsent: true}
	_, err := e.Put(ctx, owner, app, jobsDB, jobID(i), body, create)
	// A put refused before its commit because the machine stalled
	// (access.js past its deadline, overload) is tried again, and counted.
	for try := 1; try < maxPutTries && (errs.Is(err, errs.AccessError) || errs.Is(err, errs.Unavailable)); try++ {
		r.retries.Add(1)
		_, err = e.Put(ctx, owner, app, jobsDB, jobID(i), body, create)
	}
	if err != nil {
		return fmt.Errorf("putting %s: %w", jobID(i), err)
	}
	t1 := time.Now()
	r.putLat[i], r.putDone[i] = t1.Sub(t0), t1
	return nil
}

// end is when the last job's done revision committed, if every job got
// there; else now.
func (r *jobsRun) end() time.Time {
	end := time.Now()
	if r.finished.Load() == int64(r.n) {
		var last int64
		for i := range r.doneAt {
			last = max(last, r.doneAt[i].Load())
		}
		end = time.Unix(0, last)
	}
	return end
}

// latencies sums up the run's latencies into res.
func (r *jobsRun) latencies(res *JobsResult) {
	r.deliveryMu.Lock()
	res.Delivery = summarize(r.delivery)
	r.deliveryMu.Unlock()
	jobLat := make([]time.Duration, 0, r.n)
	for i := range r.n {
		if at := r.doneAt[i].Load(); at != 0 && !r.putDone[i].IsZero() {
			jobLat = append(jobLat, max(0, time.Unix(0, at).Sub(r.putDone[i])))
		}
	}
	res.Job = summarize(jobLat)
	res.Put = summarize(r.putLat)
}

// doneTwice counts the jobs whose done revision the commit hook saw more
// than once.
func (r *jobsRun) doneTwice() int {
	twice := 0
	for i := range r.n {
		if r.doneCount[i].Load() > 1 {
			twice++
		}
	}
	return twice
}
