package main

import (
	"context"
	"encoding/json"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/client"
	"github.com/handoff-run/handoff/examples"
	"github.com/handoff-run/handoff/internal/pgtest"
)

// freshPostgres: see internal/pgtest.
func freshPostgres(t *testing.T, maxConns int) string { return pgtest.Fresh(t, maxConns) }

// multiBackendJS is crashBackendJS (the job protocol with seen- and
// finished- markers) with a short run limit, and a scheduled handler that records its tick: ticks/tick-<planned>
// with ifAbsent, and ticks/dup-<planned>-<random> when that tick was
// handled already.
var multiBackendJS = strings.Replace(
	strings.Replace(crashBackendJS, `timeout: "1m"`, `timeout: "1s"`, 1),
	"export async function scheduled(event, ctx) {\n",
	"export async function scheduled(event, ctx) {\n"+
		"  const t = await ctx.db.put({ _id: \"tick-\" + event.scheduledTime, at: event.scheduledTime }, { db: \"ticks\", ifAbsent: true });\n"+
		"  if (t.existing) await ctx.db.put({ _id: \"dup-\" + event.scheduledTime + \"-\" + Math.random().toString(36).slice(2) }, { db: \"ticks\" });\n",
	1)

// TestMultiNodeJobs runs three `handoff serve` nodes on one PostgreSQL
// database, puts 1,000 jobs through them, kills one with SIGKILL at a
// random moment and checks that every job finished exactly once, that
// every committed revision of the jobs database was delivered, and that
// the scheduled handler ran once per interval across the cluster.
func TestMultiNodeJobs(t *testing.T) {
	t.Parallel() // its own servers, data and database; it mostly waits on them
	if testing.Short() {
		t.Skip("the multi-node test runs three servers for a minute or two")
	}
	if !strings.Contains(multiBackendJS, `timeout: "1s"`) || !strings.Contains(multiBackendJS, "tick-") {
		t.Fatal("crashBackendJS changed: multiBackendJS no longer applies")
	}
	const (
		app     = "load/jobs"
		jobs    = 1000
		putters = 12
	)
	pg := freshPostgres(t, 12)
	code := t.TempDir()
	accessJS, err := examples.Jobs.ReadFile("jobs/access.js")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(code, "access.js"), accessJS, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(code, "backend.js"), []byte(multiBackendJS), 0o644); err != nil {
		t.Fatal(err)
	}
	env := "HANDOFF_ADMIN_TOKEN=multi-node-admin-token-0123456789"
	// Node 1 creates the owner and the app and deploys the code; the
	// others serve what the database holds.
	data1 := t.TempDir()
	nodes := []*serverProc{startServerArgs(t, data1, []string{"--postgres", pg, "--app", app + "=" + code}, env)}
	tok, err := os.ReadFile(filepath.Join(data1, "load.token"))
	if err != nil {
		t.Fatalf("the owner's token: %v\n%s", err, nodes[0].log())
	}
	token := strings.TrimSpace(string(tok))
	ctx := context.Background()
	waitUntil(t, 30*time.Second, "the app's code is live", func() bool {
		return strings.Contains(nodes[0].log(), "deployed the app's code")
	})
	for range 2 {
		nodes = append(nodes, startServerArgs(t, t.TempDir(), []string{"--postgres", pg}, env))
	}
	clients := make([]*client.Client, len(nodes))
	for i, n := range nodes {
		clients[i] = client.New(n.url, token)
	}
	start := time.Now()

	// The load, spread over the nodes; one node dies after a random
	// number of acknowledged puts. A put that failed on the dead node is
	// put again, ifAbsent, on a survivor: it may have committed.
	victim := mrand.IntN(len(nodes))
	killAfter := 100 + mrand.IntN(600)
	var (
		next, acked atomic.Int64
		dead        atomic.Bool
		wg          sync.WaitGroup
		errMu       sync.Mutex
		putErrs     []error
	)
	survivor := (victim + 1) % len(nodes)
	killed := make(chan struct{})
	var killOnce sync.Once
	for p := range putters {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= jobs {
					return
				}
				id := fmt.Sprintf("job-%05d", i)
				body := fmt.Appendf(nil, `{"kind":"job","status":"pending","attempts":0,"input":"multi node job %d"}`, i)
				n := (int(i) + p) % len(nodes)
				if dead.Load() && n == victim {
					n = survivor
				}
				_, err := clients[n].Put(ctx, app, "jobs", id, body, client.PutOptions{IfAbsent: true})
				if err != nil && n == victim && dead.Load() {
					_, err = clients[survivor].Put(ctx, app, "jobs", id, body, client.PutOptions{IfAbsent: true})
				}
				if err != nil {
					errMu.Lock()
					putErrs = append(putErrs, fmt.Errorf("%s on node %d: %w", id, n+1, err))
					errMu.Unlock()
					continue
				}
				if acked.Add(1) >= int64(killAfter) {
					killOnce.Do(func() {
						time.Sleep(time.Duration(mrand.IntN(20)) * time.Millisecond)
						dead.Store(true)
						if err := nodes[victim].cmd.Process.Kill(); err != nil { // SIGKILL
							t.Error(err)
						}
						close(killed)
					})
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-killed:
	default:
		t.Fatalf("the kill threshold %d was never reached", killAfter)
	}
	<-nodes[victim].done
	if len(putErrs) > 0 {
		t.Fatalf("%d puts failed, e.g. %v", len(putErrs), putErrs[0])
	}
	t.Logf("killed node %d after %d acknowledged puts; all %d jobs put in %v",
		victim+1, killAfter, jobs, time.Since(start).Round(time.Millisecond))

	// Drain through a survivor: every job done and the outbox empty. The
	// dead node's event leases run out 30 s after its last renewal.
	c := clients[survivor]
	drained := func() bool {
		evs, err := c.Events(ctx, app, false, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs) == 0 && countOpenJobs(t, c, app) == 0
	}
	for deadline := time.Now().Add(150 * time.Second); !drained(); time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 150 s: every job done and the outbox empty; %s", drainState(t, c, app))
		}
	}
	end := time.Now()
	if dead, err := c.Events(ctx, app, true, 0, 10); err != nil || len(dead) > 0 {
		t.Fatalf("dead events after the drain: %v %+v", err, dead)
	}

	// The ledger.
	history := map[string][]client.Entry{}
	var revisions []client.Entry
	for since := int64(0); ; {
		page, err := c.Changes(ctx, app, "jobs", since, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Changes) == 0 {
			break
		}
		revisions = append(revisions, page.Changes...)
		for _, e := range page.Changes {
			history[e.ID] = append(history[e.ID], e)
		}
		since = page.Last
	}
	if len(history) != jobs {
		t.Errorf("%d jobs in the ledger, want %d", len(history), jobs)
	}
	// 1. Every job moved into done exactly once.
	reclaimed := 0
	for id, h := range history {
		dones, prev, attempts := 0, "", 0
		for _, e := range h {
			var j crashJob
			if err := json.Unmarshal(e.Doc, &j); err != nil {
				t.Fatal(err)
			}
			if j.Status == "done" && prev != "done" {
				dones++
				attempts = j.Attempts
			}
			prev = j.Status
		}
		if dones != 1 || prev != "done" {
			t.Errorf("%s moved into done %d times and ends %q; want once, ending done", id, dones, prev)
		}
		if attempts > 1 {
			reclaimed++
		}
	}
	// 2. No event of a committed write was lost.
	seen := scanIDs(t, c, app, "seen")
	missing := 0
	for _, e := range revisions {
		if !seen["seen-"+strconv.FormatInt(e.Seq, 10)] {
			if missing++; missing <= 5 {
				t.Errorf("revision seq %d (%s, rev %s) was committed but its onChange never ran", e.Seq, e.ID, e.Rev)
			}
		}
	}
	if missing > 5 {
		t.Errorf("… %d committed revisions in all without a delivery", missing)
	}
	marks := scanIDs(t, c, app, "marks")
	// 3. One tick per interval across the cluster.
	ticks, dups := 0, 0
	var planned []int64
	for id := range scanIDs(t, c, app, "ticks") {
		switch {
		case strings.HasPrefix(id, "tick-"):
			// Count the ticks planned in the measured span only: the
			// first node ticks while the others start.
			if ms, err := strconv.ParseInt(strings.TrimPrefix(id, "tick-"), 10, 64); err == nil && ms >= start.UnixMilli() && ms <= end.UnixMilli() {
				ticks++
				planned = append(planned, ms)
			}
		case strings.HasPrefix(id, "dup-"):
			dups++
			t.Errorf("a tick was handled twice: %s", id)
		}
	}
	elapsed := end.Sub(start).Seconds()
	// A node killed inside a tick keeps the schedule held until its hold
	// lapses (tickHold in internal/runner, 30 s): the one gap allowed, and
	// it must end within that hold.
	gap := longestTickGap(planned, start, end)
	t.Logf("%.0f s from the first put to drained: %d ticks of 1 s (longest gap %v), %d handled twice; %d revisions of jobs, all delivered; "+
		"%d finished- markers; %d jobs claimed more than once",
		elapsed, ticks, gap, dups, len(revisions), len(marks), reclaimed)
	if float64(ticks) > elapsed+3 {
		t.Errorf("%d ticks in %.0f s of 1 s interval: more than one node ran the schedule", ticks, elapsed)
	}
	if gap > 40*time.Second {
		t.Errorf("no tick for %v: a dead node's hold must lapse within 30 s", gap)
	}
	if ticking := elapsed - gap.Seconds(); float64(ticks) < ticking*0.6 {
		t.Errorf("only %d ticks in %.0f s of 1 s interval outside the longest gap: ticks were lost", ticks, ticking)
	}
}

// longestTickGap is the longest span of [start, end] with no planned tick
// in it; planned holds Unix milliseconds.
func longestTickGap(planned []int64, start, end time.Time) time.Duration {
	slices.Sort(planned)
	var gap time.Duration
	prev := start
	for _, ms := range append(planned, end.UnixMilli()) {
		at := time.UnixMilli(ms)
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	return gap
}

// drainState tells what keeps app from draining: its open jobs and its
// live and dead events, with the last error of a few.
func drainState(t *testing.T, c *client.Client, app string) string {
	ctx := context.Background()
	var b strings.Builder
	fmt.Fprintf(&b, "%d jobs open", countOpenJobs(t, c, app))
	open := 0
	for after := ""; open < 5; {
		page, err := c.Scan(ctx, app, "jobs", 1000, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Docs {
			var j struct {
				ID        string `json:"_id"`
				Status    string `json:"status"`
				Attempts  int    `json:"attempts"`
				LastError string `json:"lastError"`
			}
			if json.Unmarshal(d, &j) == nil && j.Status != "done" && open < 5 {
				open++
				fmt.Fprintf(&b, "\n  %s %s after %d attempts: %s", j.ID, j.Status, j.Attempts, j.LastError)
			}
		}
		if page.Next == "" {
			break
		}
		after = page.Next
	}
	// What the lease sweep sees: the running jobs by the status index,
	// and whether its ticks still run.
	if page, err := c.Query(ctx, app, "jobs", "status", json.RawMessage(`"running"`), 1000, ""); err == nil {
		fmt.Fprintf(&b, "; %d running by the index", len(page.Docs))
	}
	if s, err := c.Schedule(ctx, app); err == nil {
		fmt.Fprintf(&b, "; schedule: last run %v, running %v, planned %v, error %q", s.LastRun, s.Running, s.Planned, s.LastError)
	}
	for _, dead := range []bool{false, true} {
		evs, err := c.Events(ctx, app, dead, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "; %d events (dead: %v)", len(evs), dead)
		for i, ev := range evs[:min(len(evs), 5)] {
			fmt.Fprintf(&b, "\n  #%d seq %d %s/%s attempts %d running %v next %s: %s",
				i, ev.Seq, ev.DB, ev.DocID, ev.Attempts, ev.Running, ev.NextAt.Format(time.TimeOnly), ev.LastError)
		}
	}
	return b.String()
}

// waitUntil polls cond every 200 ms until it holds or within passes.
func waitUntil(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
