package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/client"
	"github.com/handoff-run/handoff/examples"
)

// crashBackendJS is examples/jobs/backend.js's protocol — claim with
// ifRev, finish fenced by claimId, sweep expired leases — with a short
// lease, and two records for the test to check against the ledger:
//
//   - seen/seen-<seq>: written first by every delivery of an event of the
//     jobs database (ifAbsent, so a redelivery leaves one document);
//   - marks/finished-<job>-<claimId>: written by a run after its work and
//     before its done write, once per claim that got that far.
const crashBackendJS = `
export const config = {
  scheduled: { interval: "1s" },
  onChange: { concurrency: 8, timeout: "1m", maxAttempts: 10 },
};

const DB = "jobs";
const LEASE_MS = 5000;
const MAX_ATTEMPTS = 3;
const freshClaimId = () => Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 10);

async function move(ctx, job, rev) {
  try {
    return (await ctx.db.put(job, { db: DB, ifRev: rev })).rev;
  } catch (err) {
    if (err.code !== "conflict" && err.code !== "forbidden") throw err;
    return null;
  }
}

export async function onChange(event, ctx) {
  if (event.dbName !== DB) return;
  await ctx.db.put({ _id: "seen-" + event.seq, seq: event.seq, docId: event.docId }, { db: "seen", ifAbsent: true });
  if (event.deleted) return;
  const job = event.doc;
  if (job.kind !== "job" || job.status !== "pending") return;
  const claimed = { ...job, status: "running", attempts: job.attempts + 1, claimId: freshClaimId(), leaseUntil: Date.now() + LEASE_MS };
  const rev = await move(ctx, claimed, job._rev);
  if (!rev) return;
  const output = { words: job.input.split(/\s+/).filter(Boolean).length };
  await ctx.db.put({ _id: "finished-" + job._id + "-" + claimed.claimId, jobId: job._id, claimId: claimed.claimId },
    { db: "marks", ifAbsent: true });
  await move(ctx, { ...claimed, status: "done", output }, undefined);
}

export async function scheduled(event, ctx) {
  const now = Date.now();
  let after;
  do {
    const page = await ctx.db.query({ db: DB, field: "status", key: "running", limit: 200, after });
    for (const job of page) {
      if (job.kind !== "job" || job.leaseUntil >= now) continue;
      const next = job.attempts >= MAX_ATTEMPTS ? "failed" : "pending";
      await move(ctx, { ...job, status: next, lastError: "lease expired" }, job._rev);
    }
    after = page.next;
  } while (after);
}
`

// crashJob is a job revision as the ledger holds it.
type crashJob struct {
	Status   string `json:"status"`
	Attempts int    `json:"attempts"`
	ClaimID  string `json:"claimId"`
}

// TestCrashDuringJobLoad kills `handoff serve` with SIGKILL in the middle
// of a load of jobs, restarts it on the same data directory and checks,
// against the ledger after the restart:
//
//   - every acknowledged put survived (its revision is in the ledger);
//   - every committed revision of the jobs database — acknowledged or not
//     before the kill — had its event delivered at least once (its
//     seen-<seq> document exists);
//   - no job was finished twice: each job's history moves into done
//     exactly once. At-least-once delivery allows a job's work to run
//     again after a crash (a claim that did its work but died before its
//     done write is swept and claimed again), so a job may have more than
//     one finished- marker, one per claim; only the claim that holds the
//     job can write done, so its done revision carries the claimId of one
//     of those markers.
func TestCrashDuringJobLoad(t *testing.T) {
	t.Parallel() // its own servers, data and database; it mostly waits on them
	if testing.Short() {
		t.Skip("the crash test runs a server under load for tens of seconds")
	}
	const (
		app     = "load/jobs"
		maxJobs = 3000
		putters = 8
	)
	data, code := t.TempDir(), t.TempDir()
	accessJS, err := examples.Jobs.ReadFile("jobs/access.js")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(code, "access.js"), accessJS, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(code, "backend.js"), []byte(crashBackendJS), 0o644); err != nil {
		t.Fatal(err)
	}
	serveArgs := []string{"--app", app + "=" + code}
	srv := startServerArgs(t, data, serveArgs)
	tok, err := os.ReadFile(filepath.Join(data, "load.token"))
	if err != nil {
		t.Fatalf("the owner's token: %v\n%s", err, srv.log())
	}
	token := strings.TrimSpace(string(tok))
	ctx := context.Background()

	// The load: putters take job numbers from a counter and put until the
	// server is gone. A put that returned is acknowledged; one that failed
	// may or may not have committed.
	killAfter := 250 + rand.IntN(300)
	c := client.New(srv.url, token)
	var (
		next   atomic.Int64
		acked  atomic.Int64
		mu     sync.Mutex
		ackRev = map[string]string{} // job id -> acknowledged rev
		failed []string
		wg     sync.WaitGroup
	)
	reached := make(chan struct{})
	var reachedOnce sync.Once
	for range putters {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= maxJobs {
					return
				}
				id := fmt.Sprintf("job-%05d", i)
				body := fmt.Appendf(nil, `{"kind":"job","status":"pending","attempts":0,"input":"crash test job %d"}`, i)
				res, err := c.Put(ctx, app, "jobs", id, body, client.PutOptions{})
				mu.Lock()
				if err != nil {
					failed = append(failed, id)
					mu.Unlock()
					return // the server is gone
				}
				ackRev[id] = res.Rev
				mu.Unlock()
				if acked.Add(1) >= int64(killAfter) {
					reachedOnce.Do(func() { close(reached) })
				}
			}
		})
	}
	select {
	case <-reached:
	case <-time.After(2 * time.Minute):
		t.Fatalf("only %d puts acknowledged in 2 minutes:\n%s", acked.Load(), srv.log())
	}
	// A random moment after the threshold, while puts and handler runs
	// are in flight.
	time.Sleep(time.Duration(rand.IntN(20)) * time.Millisecond)
	if err := srv.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	<-srv.done
	wg.Wait()
	t.Logf("killed the server after %d acknowledged puts (threshold %d); %d puts failed in flight",
		len(ackRev), killAfter, len(failed))

	srv = startServerArgs(t, data, serveArgs)
	c = client.New(srv.url, token)

	// Let it drain: every job done and the outbox empty. Real time, but
	// bounded: leases taken before the kill expire after 5 s.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		evs, err := c.Events(ctx, app, false, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		open := 0
		if len(evs) == 0 {
			open = countOpenJobs(t, c, app)
		}
		if len(evs) == 0 && open == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not drained after 2 minutes: %d events waiting, %d jobs not done\n%s", len(evs), open, srv.log())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if dead, err := c.Events(ctx, app, true, 0, 10); err != nil || len(dead) > 0 {
		t.Fatalf("dead events after the drain: %v %+v", err, dead)
	}

	// The ledger after the restart is the truth: every revision of the
	// jobs database, acknowledged or not.
	history := map[string][]client.Entry{}
	var revisions []client.Entry
	for since := int64(0); ; {
		page, err := c.Changes(ctx, app, "jobs", since, 1000)
		if err != nil {
			t.Fatal(err)
		}
		revisions = append(revisions, page.Changes...)
		for _, e := range page.Changes {
			history[e.ID] = append(history[e.ID], e)
		}
		if len(page.Changes) == 0 {
			break
		}
		since = page.Last
	}
	seen := scanIDs(t, c, app, "seen")
	marks := scanIDs(t, c, app, "marks")

	// 1. Every acknowledged put survived.
	for id, rev := range ackRev {
		h := history[id]
		if len(h) == 0 || h[0].Rev != rev {
			t.Errorf("acknowledged put of %s (rev %s) is not the first revision in the ledger: %+v", id, rev, h)
		}
	}
	// 2. Every committed revision's event was delivered at least once.
	missing := 0
	for _, e := range revisions {
		if !seen["seen-"+fmt.Sprint(e.Seq)] {
			missing++
			if missing <= 5 {
				t.Errorf("revision seq %d (%s, rev %s) was committed but its onChange never ran", e.Seq, e.ID, e.Rev)
			}
		}
	}
	if missing > 5 {
		t.Errorf("… %d committed revisions in all without a delivery", missing)
	}
	// 3. No job finished twice.
	markers := map[string][]string{} // job -> claimIds with a finished- marker
	for id := range marks {
		rest, ok := strings.CutPrefix(id, "finished-")
		if !ok {
			continue
		}
		job, claim, ok := strings.Cut(rest[len("job-"):], "-")
		if !ok {
			t.Fatalf("odd marker id %q", id)
		}
		markers["job-"+job] = append(markers["job-"+job], claim)
	}
	reclaimed, rework := 0, 0
	for id, h := range history {
		dones, prev := 0, ""
		var done crashJob
		for _, e := range h {
			var j crashJob
			if err := json.Unmarshal(e.Doc, &j); err != nil {
				t.Fatal(err)
			}
			if j.Status == "done" && prev != "done" {
				dones++
				done = j
			}
			prev = j.Status
		}
		if dones != 1 || prev != "done" {
			t.Errorf("%s moved into done %d times and ends %q; want once, ending done", id, dones, prev)
			continue
		}
		if !slices.Contains(markers[id], done.ClaimID) {
			t.Errorf("%s is done by claim %s, which has no finished- marker (markers: %v)", id, done.ClaimID, markers[id])
		}
		if len(markers[id]) > done.Attempts {
			t.Errorf("%s has %d finished- markers but only %d claims", id, len(markers[id]), done.Attempts)
		}
		if done.Attempts > 1 {
			reclaimed++
		}
		if len(markers[id]) > 1 {
			rework++
		}
	}
	for id := range ackRev {
		if _, ok := history[id]; !ok {
			t.Errorf("acknowledged job %s is missing from the ledger", id)
		}
	}
	t.Logf("after the restart: %d jobs, %d revisions of jobs, all delivered and done once; "+
		"%d jobs claimed again after the crash, %d of them had done their work before it (work ran twice, done once)",
		len(history), len(revisions), reclaimed, rework)
}

// countOpenJobs counts jobs that are not done yet.
func countOpenJobs(t *testing.T, c *client.Client, app string) int {
	t.Helper()
	open := 0
	for after := ""; ; {
		page, err := c.Scan(context.Background(), app, "jobs", 1000, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Docs {
			var j crashJob
			if err := json.Unmarshal(d, &j); err != nil {
				t.Fatal(err)
			}
			if j.Status != "done" {
				open++
			}
		}
		if page.Next == "" {
			return open
		}
		after = page.Next
	}
}

// scanIDs returns the ids of the live documents of db.
func scanIDs(t *testing.T, c *client.Client, app, db string) map[string]bool {
	t.Helper()
	ids := map[string]bool{}
	for after := ""; ; {
		page, err := c.Scan(context.Background(), app, db, 1000, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Docs {
			var doc struct {
				ID string `json:"_id"`
			}
			if err := json.Unmarshal(d, &doc); err != nil {
				t.Fatal(err)
			}
			ids[doc.ID] = true
		}
		if page.Next == "" {
			return ids
		}
		after = page.Next
	}
}

// TestPoisonEventCannotCrashLoop: an onChange run that takes the server
// down with it counts as a failed attempt. Here the server is killed with
// SIGKILL while the handler waits on an outbound call that never answers.
// After the restart the event is not run at once: it waits out the
// backoff while other events are delivered, and once it has brought the
// server down maxAttempts times it is parked as dead, with the server up.
func TestPoisonEventCannotCrashLoop(t *testing.T) {
	t.Parallel() // its own servers, data and database; it mostly waits on them
	if testing.Short() {
		t.Skip("the poison test restarts a server and waits out a 10 s backoff")
	}
	const app = "poison/app"
	calls := make(chan time.Time, 10)
	never := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls <- time.Now()
		select {
		case <-never:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(never); hang.Close() })
	backendJS := fmt.Sprintf(`export const config = {
  onChange: { maxAttempts: 2 },
  fetch: { allow: [%q], timeout: "5m" },
};
export async function onChange(event, ctx) {
  if (event.dbName === "poison") await fetch(%q);
  if (event.dbName === "work") await ctx.db.put({ _id: event.docId }, { db: "done", ifAbsent: true });
}
`, strings.TrimPrefix(hang.URL, "http://"), hang.URL+"/hang")
	data, code := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(code, "backend.js"), []byte(backendJS), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--app", app + "=" + code}
	srv := startServerArgs(t, data, args)
	tok, err := os.ReadFile(filepath.Join(data, "poison.token"))
	if err != nil {
		t.Fatalf("the owner's token: %v\n%s", err, srv.log())
	}
	token := strings.TrimSpace(string(tok))
	ctx := context.Background()
	c := client.New(srv.url, token)
	res, err := c.Put(ctx, app, "poison", "p", []byte(`{}`), client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	call := func() time.Time {
		t.Helper()
		select {
		case at := <-calls:
			return at
		case <-time.After(time.Minute):
			t.Fatalf("the poison event's handler did not run:\n%s", srv.log())
			return time.Time{}
		}
	}
	crash := func() {
		t.Helper()
		if err := srv.cmd.Process.Kill(); err != nil { // SIGKILL
			t.Fatal(err)
		}
		<-srv.done
		srv = startServerArgs(t, data, args)
		c = client.New(srv.url, token)
	}
	event := func(dead bool, what string, cond func(client.Event) bool) client.Event {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			evs, err := c.Events(ctx, app, dead, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				if ev.Seq == res.Seq && cond(ev) {
					return ev
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: events %+v\n%s", what, evs, srv.log())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	works := func(id string) {
		t.Helper()
		if _, err := c.Put(ctx, app, "work", id, []byte(`{}`), client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			if _, err := c.Get(ctx, app, "done", id); err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the event of work/%s was not delivered:\n%s", id, srv.log())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	call()
	crash()
	ev := event(false, "the interrupted run counted", func(ev client.Event) bool { return ev.Attempts == 1 && ev.LastError != "" })
	if !strings.Contains(ev.LastError, "the server stopped while this run was in flight") {
		t.Fatalf("lastError %q", ev.LastError)
	}
	works("w1")
	if at := call(); at.Before(ev.NextAt.Add(-time.Second)) {
		t.Fatalf("the event ran again at %v, before its backoff ended at %v", at, ev.NextAt)
	}
	crash()
	ev = event(true, "the event parked as dead", func(client.Event) bool { return true })
	if ev.Attempts != 2 || !strings.Contains(ev.LastError, "the server stopped") {
		t.Fatalf("dead event: %+v", ev)
	}
	works("w2")
	select {
	case <-calls:
		t.Fatal("the dead event ran again")
	default:
	}
}
