package engine_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/sim"
)

// docRuns checks, run by run, that the events of one document never run
// at once nor out of commit order, and counts how many ran at once.
type docRuns struct {
	t       *testing.T
	mu      sync.Mutex
	running map[string]int64 // document -> seq of its run in flight
	last    map[string]int64 // document -> seq of its last run
	now     int              // runs in flight
	most    int
	done    int
}

func newDocRuns(t *testing.T) *docRuns {
	return &docRuns{t: t, running: map[string]int64{}, last: map[string]int64{}}
}

func (d *docRuns) begin(ev appcode.ChangeEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if seq, ok := d.running[ev.DocID]; ok {
		d.t.Errorf("seq %d of %s started while seq %d of it runs", ev.Seq, ev.DocID, seq)
	}
	if ev.Seq <= d.last[ev.DocID] {
		d.t.Errorf("seq %d of %s started after seq %d of it", ev.Seq, ev.DocID, d.last[ev.DocID])
	}
	d.running[ev.DocID], d.last[ev.DocID] = ev.Seq, ev.Seq
	d.now++
	d.most = max(d.most, d.now)
}

func (d *docRuns) end(ev appcode.ChangeEvent) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.running, ev.DocID)
	d.now--
	d.done++
}

func (d *docRuns) finished() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.done
}

// TestDocumentOrderUnderParallelRuns: thousands of events over a few
// hundred documents, each run taking a random while of virtual time (whole
// seconds, so the harness has few instants to play): the events of one
// document never run at once nor out of commit order, and events of
// different documents do run at once, up to the concurrency.
func TestDocumentOrderUnderParallelRuns(t *testing.T) {
	t.Parallel()
	const docs, events, concurrency = 200, 2000, 64
	runs := newDocRuns(t)
	var rmu sync.Mutex
	rnd := rand.New(rand.NewPCG(1, 2))
	var env *sim.Env
	dir := sim.WriteApp(t, map[string]string{"backend.js": fmt.Sprintf(`
export const config = { onChange: { concurrency: %d } };
export async function onChange() {}`, concurrency)})
	env = sim.New(t, sim.Options{Dir: dir, OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext, next sim.NextFunc) error {
		runs.begin(ev)
		defer runs.end(ev)
		rmu.Lock()
		d := time.Duration(rnd.IntN(4)) * time.Second
		rmu.Unlock()
		env.Sleep(ctx, d)
		return nil
	}})
	pick := rand.New(rand.NewPCG(3, 4))
	for i := range events {
		env.Put("jobs", fmt.Sprint("d", pick.IntN(docs)), map[string]any{"n": i})
	}
	env.RunUntil(func() bool { return runs.finished() == events }, time.Hour)
	if runs.most < concurrency/2 || runs.most > concurrency {
		t.Fatalf("at most %d runs at once, want %d to %d", runs.most, concurrency/2, concurrency)
	}
	if evs := env.Events(false); len(evs) != 0 {
		t.Fatalf("%d events left undelivered", len(evs))
	}
}

// TestHungRunHoldsBackOnlyItsDocument: a run that never ends until its run
// limit holds back the later events of its own document, and no other:
// every other document's events are delivered meanwhile.
func TestHungRunHoldsBackOnlyItsDocument(t *testing.T) {
	t.Parallel()
	const limit = 2 * time.Minute
	dir := sim.WriteApp(t, map[string]string{"backend.js": `
export const config = { onChange: { timeout: "2m", maxAttempts: 2 } };
export async function onChange(event) {
  if (event.doc.hang) await new Promise((resolve) => setTimeout(resolve, 3600000));
}`})
	env := sim.New(t, sim.Options{Dir: dir})
	t0 := env.Now()
	env.Put("jobs", "stuck", map[string]any{"hang": true})
	env.Put("jobs", "stuck", map[string]any{"n": 1})
	for i := range 40 {
		env.Put("jobs", fmt.Sprint("d", i%8), map[string]any{"n": i})
	}
	others := func() bool {
		for _, r := range env.Runs() {
			if r.DocID != "stuck" && !r.Ended() {
				return false
			}
		}
		return len(env.Runs()) >= 41
	}
	took := env.RunUntil(others, time.Hour)
	if took >= limit {
		t.Fatalf("the other documents' events took %v, not before the hung run's limit %v", took, limit)
	}
	if n := len(env.OnChangeRuns("jobs", "stuck")); n != 1 {
		t.Fatalf("%d runs of the hung document so far, want 1 (its second event waits)", n)
	}
	// The run limit interrupts the hung run; its retry hangs again and
	// parks it as dead, then the document's next event runs.
	env.RunUntil(func() bool {
		return len(env.OnChangeRuns("jobs", "stuck")) == 3 && env.OnChangeRuns("jobs", "stuck")[2].Ended()
	}, time.Hour)
	rs := env.OnChangeRuns("jobs", "stuck")
	if rs[0].Seq != rs[1].Seq || rs[2].Seq <= rs[0].Seq || rs[2].Start.Sub(t0) < 2*limit {
		t.Fatalf("runs of the hung document: %+v", rs)
	}
}

// jobsApp is a job queue like examples/jobs: onChange claims a pending
// job, works delayMs (a timer on the server's clock) and finishes it.
const jobsApp = `
export async function onChange(event, ctx) {
  const job = event.doc;
  if (event.deleted || job.status !== "pending") return;
  const { rev } = await ctx.db.put({ ...job, status: "running" }, { ifRev: job._rev });
  await new Promise((resolve) => setTimeout(resolve, job.delayMs));
  await ctx.db.put({ ...job, status: "done" }, { ifRev: rev });
}`

// jobsTake queues n jobs of work each at one instant and returns the
// virtual time until all are done.
func jobsTake(t *testing.T, config string, n int, work time.Duration) time.Duration {
	env := sim.New(t, sim.Options{Dir: sim.WriteApp(t, map[string]string{"backend.js": config + jobsApp})})
	for i := range n {
		env.Put("jobs", fmt.Sprint("job", i), map[string]any{"status": "pending", "delayMs": work.Milliseconds()})
	}
	return env.RunUntil(func() bool {
		for i := range n {
			if d := env.Get("jobs", fmt.Sprint("job", i)); d["status"] != "done" {
				return false
			}
		}
		return true
	}, time.Hour)
}

// TestJobsRunAtOnce: jobs queued at once run at once: eleven 3-second
// jobs finish within 1.3 times one job's time with the default settings,
// and 100 one-second jobs with concurrency 32 within 4.5 s (four rounds
// of at most 32).
// Virtual time: the work is a timer, so only waiting for something else
// (a batch, a slot, a poll) would add to it.
func TestJobsRunAtOnce(t *testing.T) {
	t.Parallel()
	took := jobsTake(t, "", 11, 3*time.Second)
	t.Logf("eleven 3 s jobs: %v", took)
	if took > 3900*time.Millisecond {
		t.Errorf("eleven 3 s jobs took %v, want at most 3.9 s", took)
	}
	took = jobsTake(t, `export const config = { onChange: { concurrency: 32 } };`, 100, time.Second)
	t.Logf("100 one-second jobs, concurrency 32: %v", took)
	if took > 4500*time.Millisecond {
		t.Errorf("100 one-second jobs with concurrency 32 took %v, want at most 4.5 s", took)
	}
}
