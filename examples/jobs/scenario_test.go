package jobs_test

// Deterministic scenarios of the job pattern (issue 4, "Show"): the
// example's own access.js and backend.js served by the engine on a real
// store, with every clock on one virtual clock. Eleven jobs are queued at
// one instant, the scenario's job among ten others; then virtual time is
// played timer by timer (sim.RunUntil), so each assertion on a
// virtual time is exact, whatever the machine's speed.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/sim"
	"github.com/handoff-run/handoff/store"
)

// The example's numbers (backend.js and access.js).
const (
	scnDB          = "jobs"
	scnLease       = 30 * time.Second
	scnTick        = 5 * time.Second
	scnMaxAttempts = 3
	scnRunLimit    = 2 * time.Minute
	scnBackoff     = 10 * time.Second // the first retry of a failed onChange, ±10%
)

// scnStart is off the 5 s grid, so no lease ends exactly on a tick and
// "within one tick of the lease expiry" is a real window, not a tie.
var scnStart = sim.DefaultStart.Add(1234 * time.Millisecond)

type scn struct {
	*sim.Env
	t       *testing.T
	t0      time.Time // when the jobs were queued
	jobs    []string  // every job's id, in the order queued
	special string
}

func newScn(t *testing.T, o sim.Options) *scn {
	t.Helper()
	o.Dir, o.App, o.Start = ".", "alice/jobs", scnStart
	return &scn{Env: sim.New(t, o), t: t}
}

func scnJob(input string, extra map[string]any) map[string]any {
	j := map[string]any{"kind": "job", "status": "pending", "attempts": 0, "input": input}
	for k, v := range extra {
		j[k] = v
	}
	return j
}

// queue11 queues eleven jobs at the current instant through the CLI path:
// ten ordinary ones (no delay, no failure) with the scenario's job sixth.
func (s *scn) queue11(special string, extra map[string]any) {
	s.t.Helper()
	s.t0, s.special = s.Now(), special
	for i := 1; i <= 11; i++ {
		id, j := fmt.Sprintf("job-%02d", i), scnJob(fmt.Sprintf("ordinary job number %d", i), nil)
		if i == 6 {
			id, j = special, scnJob("the job this scenario is about", extra)
		}
		s.Put(scnDB, id, j)
		s.jobs = append(s.jobs, id)
	}
}

// queue puts the given jobs at the current instant.
func (s *scn) queue(jobs map[string]map[string]any) {
	s.t.Helper()
	s.t0 = s.Now()
	ids := make([]string, 0, len(jobs))
	for id := range jobs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		s.Put(scnDB, id, jobs[id])
		s.jobs = append(s.jobs, id)
	}
}

func (s *scn) status(id string) string { d := s.Get(scnDB, id); return str(d["status"]) }

// allTerminal: every job is done or failed and no event waits.
func (s *scn) allTerminal() bool {
	for _, id := range s.jobs {
		if st := s.status(id); st != "done" && st != "failed" {
			return false
		}
	}
	return len(s.Events(false)) == 0
}

func str(v any) string   { s, _ := v.(string); return s }
func num(v any) int64    { f, _ := v.(float64); return int64(f) }
func ms(v any) time.Time { return time.UnixMilli(num(v)).UTC() }

func statuses(h []sim.Revision) []string {
	out := make([]string, len(h))
	for i, r := range h {
		out[i] = str(r.Body["status"])
	}
	return out
}

// nextTick is the first sweep strictly after t: the sweep takes a lease
// back only once leaseUntil < now.
func nextTick(t time.Time) time.Time { return t.Truncate(scnTick).Add(scnTick) }

func onGrid(t time.Time) bool { return t.UnixMilli()%scnTick.Milliseconds() == 0 }

func at(t time.Time, t0 time.Time) string { return fmt.Sprintf("t0+%v", t.Sub(t0)) }

// claimsOf lists the revisions that claimed the job (pending → running).
func claimsOf(h []sim.Revision) []sim.Revision {
	var out []sim.Revision
	for i := 1; i < len(h); i++ {
		if str(h[i-1].Body["status"]) == "pending" && str(h[i].Body["status"]) == "running" {
			out = append(out, h[i])
		}
	}
	return out
}

// checkOrdinary: every ordinary job ran once, on its first attempt.
func (s *scn) checkOrdinary() {
	s.t.Helper()
	for _, id := range s.jobs {
		if id == s.special {
			continue
		}
		h := s.History(scnDB, id)
		if got := statuses(h); !slices.Equal(got, []string{"pending", "running", "done"}) {
			s.t.Errorf("ordinary %s went %v, want pending → running → done", id, got)
			continue
		}
		done := h[2].Body
		out, _ := done["output"].(map[string]any)
		if num(done["attempts"]) != 1 || str(out["runKey"]) != id+":1" || num(out["words"]) != 4 {
			s.t.Errorf("ordinary %s finished as %v", id, done)
		}
	}
}

// checkChainsEnd is scenario (e) for whatever ran: every committed
// pending revision of the app, the sweep's included, reached onChange and
// was acked, and no other revision reached it (config.onChange.when);
// nothing waits in the outbox, nothing is dead, and the loop guard
// stopped nothing. The sweep ticked on its grid.
func (s *scn) checkChainsEnd() {
	s.t.Helper()
	if evs := s.Events(false); len(evs) != 0 {
		s.t.Errorf("%d events still wait in the outbox: %+v", len(evs), evs)
	}
	if dead := s.Events(true); len(dead) != 0 {
		s.t.Errorf("%d dead events: %+v", len(dead), dead)
	}
	if info := s.Schedule(); info.LoopStopped != 0 {
		s.t.Errorf("the loop guard stopped %d writes of the job pattern", info.LoopStopped)
	}
	last := map[int64]sim.Run{}
	for _, r := range s.Runs() {
		if r.Handler == "onChange" {
			last[r.Seq] = r
		}
	}
	byPath := map[string]int{}
	for _, rev := range s.Ledger("") {
		byPath[rev.Path]++
		r, ok := last[rev.Seq]
		switch {
		case str(rev.Body["status"]) != "pending":
			if ok {
				s.t.Errorf("revision seq %d (%s/%s %s by %s) reached onChange, though when lets only pending jobs through", rev.Seq, rev.DB, rev.ID, rev.Body["status"], rev.Path)
			}
		case !ok:
			s.t.Errorf("revision seq %d (%s/%s %s by %s) never reached onChange", rev.Seq, rev.DB, rev.ID, rev.Body["status"], rev.Path)
		case !r.Ended() || r.Err != nil:
			s.t.Errorf("the last delivery of seq %d did not ack: %v", rev.Seq, r)
		}
	}
	if byPath["onChange"] == 0 || byPath["cli"] == 0 {
		s.t.Errorf("ledger paths %v: want writes by the CLI and by onChange", byPath)
	}
	ticks := s.Ticks()
	for i, r := range ticks {
		if !onGrid(r.Planned) || !r.Start.Equal(r.Planned) || !r.Ended() || r.Err != nil ||
			i > 0 && r.Planned.Sub(ticks[i-1].Planned) != scnTick {
			s.t.Errorf("sweep %d off its 5 s schedule: %v (previous %v)", i, r, ticks[max(i-1, 0)])
		}
	}
}

// (a) A 3 s job runs pending → running → done exactly once, claimed the
// instant it is queued and finished 3 s later.
func TestScenarioSlowJobRunsOnce(t *testing.T) {
	t.Parallel()
	s := newScn(t, sim.Options{})
	s.queue11("slow", map[string]any{"delayMs": 3000})
	took := s.RunUntil(s.allTerminal, time.Minute)
	if took != 3*time.Second {
		t.Errorf("all eleven jobs settled after %v, want exactly 3s (the slow job's work)", took)
	}

	h := s.History(scnDB, "slow")
	if got := statuses(h); !slices.Equal(got, []string{"pending", "running", "done"}) {
		t.Fatalf("slow went %v, want pending → running → done", got)
	}
	put, claim, done := h[0], h[1], h[2]
	if !put.Time.Equal(s.t0) || put.Path != "cli" {
		t.Errorf("put: %s by %s", at(put.Time, s.t0), put.Path)
	}
	// No added delay: the claim commits at the put's own virtual instant.
	if !claim.Time.Equal(put.Time) || claim.Path != "onChange" || claim.Writer.User != "alice" {
		t.Errorf("claim at %s by %s/%s, want at the put's instant by onChange as alice", at(claim.Time, s.t0), claim.Path, claim.Writer.User)
	}
	if num(claim.Body["attempts"]) != 1 || !ms(claim.Body["leaseUntil"]).Equal(s.t0.Add(scnLease)) {
		t.Errorf("claim: %v, want attempts 1 and a lease to t0+30s", claim.Body)
	}
	if !done.Time.Equal(s.t0.Add(3*time.Second)) || done.Path != "onChange" {
		t.Errorf("done at %s by %s, want t0+3s by onChange", at(done.Time, s.t0), done.Path)
	}
	out, _ := done.Body["output"].(map[string]any)
	if num(done.Body["attempts"]) != 1 || str(out["runKey"]) != "slow:1" || num(out["words"]) != 6 ||
		str(done.Body["claimId"]) != str(claim.Body["claimId"]) || done.Body["lastError"] != nil {
		t.Errorf("done: %v", done.Body)
	}
	// The pending commit reached onChange at its own instant, once; the
	// claim and the finish, filtered out by config.onChange.when, never.
	runs := s.OnChangeRuns(scnDB, "slow")
	if len(runs) != 1 {
		t.Fatalf("slow's commits were delivered %d times, want once (the pending one): %v", len(runs), runs)
	}
	if r := runs[0]; r.Seq != put.Seq || r.Attempt != 1 || !r.Start.Equal(put.Time) || r.Err != nil {
		t.Errorf("delivery: %v, want seq %d delivered at %s on attempt 1", r, put.Seq, at(put.Time, s.t0))
	}
	if !runs[0].End.Equal(s.t0.Add(3 * time.Second)) {
		t.Errorf("the working run ended at %s, want t0+3s", at(runs[0].End, s.t0))
	}
	s.checkOrdinary()
	s.checkChainsEnd()
}

// (b) A handler that throws after claiming: the original event comes
// back after the backoff and its stale claim is refused; the sweep takes
// the job back after its lease, and the second attempt finishes it.
func TestScenarioThrowAfterClaim(t *testing.T) {
	t.Parallel()
	s := newScn(t, sim.Options{})
	s.queue11("flaky", map[string]any{"failAttempts": 1})
	first := func() []sim.Run { return s.OnChangeRuns(scnDB, "flaky") }
	// The first attempt throws at once.
	if took := s.RunUntil(func() bool { r := first(); return len(r) > 0 && r[0].Ended() }, time.Minute); took != 0 {
		t.Fatalf("the first run ended after %v, want at once", took)
	}
	h := s.History(scnDB, "flaky")
	if got := statuses(h); !slices.Equal(got, []string{"pending", "running", "running"}) {
		t.Fatalf("after the throw flaky went %v, want pending → running → running (error noted)", got)
	}
	pending, claim1, noted := h[0], h[1], h[2]
	throw := first()[0]
	if throw.Seq != pending.Seq || throw.Attempt != 1 || throw.Err == nil || !strings.Contains(throw.Err.Error(), "attempt 1 failed on purpose") {
		t.Fatalf("first run: %v", throw)
	}
	if !claim1.Time.Equal(s.t0) || !noted.Time.Equal(s.t0) || !strings.Contains(str(noted.Body["lastError"]), "failed on purpose") {
		t.Errorf("claim at %s, error noted at %s: %v", at(claim1.Time, s.t0), at(noted.Time, s.t0), noted.Body)
	}
	// The event waits for its retry, 10 s ± 10% away.
	var retryAt time.Time
	for _, ev := range s.Events(false) {
		if ev.Seq == pending.Seq {
			retryAt = ev.NextAt
			if ev.Attempts != 1 || !strings.Contains(ev.LastError, "failed on purpose") {
				t.Errorf("waiting event: %+v", ev)
			}
		}
	}
	if wait := retryAt.Sub(s.t0); wait < scnBackoff*9/10 || wait > scnBackoff*11/10 {
		t.Fatalf("the event's retry is due at %s, want t0+10s ± 10%%", at(retryAt, s.t0))
	}
	if l := s.LogsContaining(fmt.Sprintf("onChange for jobs/flaky (seq %d, attempt 1) failed; retrying in", pending.Seq)); len(l) != 1 || l[0].Level != "warn" {
		t.Errorf("retry log lines: %+v", l)
	}

	s.RunUntil(s.allTerminal, 5*time.Minute)

	// Redelivered once, at the retry time, with the original event.
	runs := first()
	var redelivered []sim.Run
	for _, r := range runs {
		if r.Seq == pending.Seq {
			redelivered = append(redelivered, r)
		}
	}
	if len(redelivered) != 2 {
		t.Fatalf("the pending event was delivered %d times, want 2: %v", len(redelivered), redelivered)
	}
	again := redelivered[1]
	doc := sim.Decode(t, again.Doc)
	if again.Attempt != 2 || !again.Start.Equal(retryAt) || string(again.Doc) != string(throw.Doc) ||
		str(doc["_rev"]) != pending.Rev || str(doc["status"]) != "pending" || num(doc["attempts"]) != 0 || again.Err != nil {
		t.Errorf("redelivery: %v with doc %s; want attempt 2 at %s with the pending doc at rev %s, acked",
			again, again.Doc, at(retryAt, s.t0), pending.Rev)
	}
	// Its claim was refused: the job had moved on from that rev.
	skipped := s.LogsContaining("claim skipped")
	if len(skipped) != 1 || !skipped[0].Time.Equal(retryAt) || skipped[0].Source != "onChange" ||
		!strings.Contains(skipped[0].Message, fmt.Sprintf("is at rev %s, not %s", noted.Rev, pending.Rev)) {
		t.Errorf("claim skipped lines: %+v; want one at %s naming the conflict with rev %s", skipped, at(retryAt, s.t0), pending.Rev)
	}

	h = s.History(scnDB, "flaky")
	if got := statuses(h); !slices.Equal(got, []string{"pending", "running", "running", "pending", "running", "done"}) {
		t.Fatalf("flaky went %v", got)
	}
	for _, r := range h {
		if r.Time.Equal(retryAt) {
			t.Errorf("something committed on flaky at the stale redelivery: %+v", r.Body)
		}
	}
	swept, claim2, done := h[3], h[4], h[5]
	expiry := ms(claim1.Body["leaseUntil"])
	if !expiry.Equal(s.t0.Add(scnLease)) {
		t.Errorf("first lease until %s, want t0+30s", at(expiry, s.t0))
	}
	if d := swept.Time.Sub(expiry); d <= 0 || d > scnTick || !swept.Time.Equal(nextTick(expiry)) || swept.Path != "scheduled" {
		t.Errorf("swept back at %s by %s, %v after the lease ended; want the first tick after it", at(swept.Time, s.t0), swept.Path, d)
	}
	if !strings.Contains(str(swept.Body["lastError"]), "failed on purpose") {
		t.Errorf("the sweep dropped the noted error: %v", swept.Body)
	}
	if !claim2.Time.Equal(swept.Time) || num(claim2.Body["attempts"]) != 2 || str(claim2.Body["claimId"]) == str(claim1.Body["claimId"]) {
		t.Errorf("re-claim at %s: %v", at(claim2.Time, s.t0), claim2.Body)
	}
	out, _ := done.Body["output"].(map[string]any)
	if !done.Time.Equal(claim2.Time) || num(done.Body["attempts"]) != 2 || str(out["runKey"]) != "flaky:2" || done.Body["lastError"] != nil {
		t.Errorf("done at %s: %v", at(done.Time, s.t0), done.Body)
	}
	// About one lease plus at most one tick after the throw.
	total := done.Time.Sub(throw.End)
	if total <= scnLease || total > scnLease+scnTick {
		t.Errorf("done %v after the throw, want in (30s, 35s]", total)
	}
	t.Logf("throw at t0, retry (refused) at +%v, swept at +%v, done at +%v", retryAt.Sub(s.t0), swept.Time.Sub(s.t0), total)
	s.checkOrdinary()
	s.checkChainsEnd()
}

// (c) A worker that claims and never finishes: each lease is taken back
// within one tick of its end, and after 3 attempts the job is failed.
func TestScenarioWorkerNeverFinishes(t *testing.T) {
	t.Parallel()
	s := newScn(t, sim.Options{})
	s.queue11("stuck", map[string]any{"delayMs": int64(time.Hour / time.Millisecond)})
	s.RunUntil(s.allTerminal, 15*time.Minute)

	h := s.History(scnDB, "stuck")
	want := []string{"pending", "running", "pending", "running", "pending", "running", "failed"}
	if got := statuses(h); !slices.Equal(got, want) {
		t.Fatalf("stuck went %v, want %v", got, want)
	}
	claims := claimsOf(h)
	if len(claims) != scnMaxAttempts {
		t.Fatalf("%d claims, want %d", len(claims), scnMaxAttempts)
	}
	for i := 1; i < len(h); i++ {
		if str(h[i-1].Body["status"]) != "running" {
			continue
		}
		claim, back := h[i-1], h[i]
		expiry := ms(claim.Body["leaseUntil"])
		d := back.Time.Sub(expiry)
		// leaseUntil is in milliseconds; a re-claim may come at any instant.
		if !expiry.Equal(claim.Time.Add(scnLease).Truncate(time.Millisecond)) || d <= 0 || d > scnTick || !back.Time.Equal(nextTick(expiry)) ||
			!onGrid(back.Time) || back.Path != "scheduled" {
			t.Errorf("attempt %d: claimed at %s, lease to %s, taken back (%s) at %s by %s: %v after the lease",
				num(claim.Body["attempts"]), at(claim.Time, s.t0), at(expiry, s.t0), back.Body["status"], at(back.Time, s.t0), back.Path, d)
		}
		if num(claim.Body["attempts"]) < scnMaxAttempts {
			// The re-claim waits for the document's earlier event (below).
			if str(back.Body["lastError"]) != "lease expired" || claims[num(claim.Body["attempts"])].Time.Before(back.Time) {
				t.Errorf("after attempt %d: %v, re-claimed at %s", num(claim.Body["attempts"]), back.Body, at(claims[num(claim.Body["attempts"])].Time, s.t0))
			}
		} else if str(back.Body["lastError"]) != "no attempts left after 3" || num(back.Body["attempts"]) != 3 {
			t.Errorf("failed as %v", back.Body)
		}
	}
	if !claims[0].Time.Equal(s.t0) {
		t.Errorf("first claim at %s, want t0", at(claims[0].Time, s.t0))
	}
	// Each claiming run was stopped at the run limit, and its event came
	// back once, after the backoff, to a claim that was refused. Only then
	// did the sweep's pending event run and claim again: one run at a time
	// per document (docs/architecture.md, "backend.js and delivery").
	runsBySeq := map[int64][]sim.Run{}
	for _, r := range s.OnChangeRuns(scnDB, "stuck") {
		runsBySeq[r.Seq] = append(runsBySeq[r.Seq], r)
	}
	for i, claim := range claims {
		pending := h[slices.IndexFunc(h, func(r sim.Revision) bool { return r.Seq == claim.Seq })-1]
		rs := runsBySeq[pending.Seq]
		if len(rs) != 2 {
			t.Errorf("claim %d: its pending event was delivered %d times, want 2: %v", i+1, len(rs), rs)
			continue
		}
		stopped, again := rs[0], rs[1]
		if !stopped.Start.Equal(claim.Time) || !stopped.End.Equal(claim.Time.Add(scnRunLimit)) || stopped.Err == nil ||
			!strings.Contains(stopped.Err.Error(), "run limit") {
			t.Errorf("claim %d: the working run %v, want stopped at the 2 min run limit", i+1, stopped)
		}
		if wait := again.Start.Sub(stopped.End); again.Attempt != 2 || wait < scnBackoff*9/10 || wait > scnBackoff*11/10 ||
			string(again.Doc) != string(stopped.Doc) || again.Err != nil {
			t.Errorf("claim %d: redelivery %v, %v after the stop", i+1, again, wait)
		}
		if i+1 < len(claims) && !claims[i+1].Time.Equal(again.End) {
			t.Errorf("claim %d at %s, want when claim %d's event settled, %s", i+2, at(claims[i+1].Time, s.t0), i+1, at(again.End, s.t0))
		}
	}
	if skipped := s.LogsContaining("claim skipped"); len(skipped) != scnMaxAttempts {
		t.Errorf("%d refused stale claims, want %d: %+v", len(skipped), scnMaxAttempts, skipped)
	}
	// Nothing more happens to it, however long we wait.
	n := len(s.Ledger(scnDB))
	s.RunFor(2 * time.Minute)
	if got := len(s.Ledger(scnDB)); got != n {
		t.Errorf("%d more revisions after the job failed", got-n)
	}
	t.Logf("claims at %s, %s, %s; failed at %s", at(claims[0].Time, s.t0), at(claims[1].Time, s.t0), at(claims[2].Time, s.t0), at(h[6].Time, s.t0))
	s.checkOrdinary()
	s.checkChainsEnd()
}

// (d) Two racing claims: the pending event of one job is delivered twice
// at once, and both claims reach the store's compare-and-set against the
// same head. Exactly one commits; the other is a conflict; the work runs
// once.
func TestScenarioRacingClaims(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var inner []error
	duplicated := 0
	var s *scn
	o := sim.Options{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext, next sim.NextFunc) error {
		var doc map[string]any
		_ = json.Unmarshal(ev.Doc, &doc) // not t: this runs on the engine's goroutine
		if ev.DocID != "raced" || ev.Attempt != 1 || doc["status"] != "pending" {
			return next(ctx, ev, hc)
		}
		mu.Lock()
		duplicated++
		mu.Unlock()
		// The same event, twice at once, each on its own runtime. The
		// run counts as one piece of work in progress (sim.Env.Settle):
		// the second call counts as another until it returns, unless it
		// returns last, when this goes on with its count.
		s.Clock.Busy(1)
		var left atomic.Int32
		left.Store(2)
		var wg sync.WaitGroup
		errs := make([]error, 2)
		start := make(chan struct{})
		for i := range errs {
			wg.Go(func() {
				<-start
				errs[i] = next(ctx, ev, hc)
				if left.Add(-1) > 0 {
					s.Clock.Busy(-1)
				}
			})
		}
		close(start)
		wg.Wait()
		mu.Lock()
		inner = append(inner, errs...)
		mu.Unlock()
		return errors.Join(errs...)
	}}
	s = newScn(t, o)
	// Hold both claims at the store until the second arrives, so both have
	// passed the ifRev check and access.js on the same head before either
	// commits: a real race at the compare-and-set, not one claim after
	// the other.
	arrived := 0
	both := make(chan struct{})
	lined := true
	s.Store.OnCommit(func(w *store.Write) {
		if w.DB != scnDB || w.ID != "raced" || w.Writer.Handler != "onChange" || !strings.HasPrefix(w.BaseRev, "1-") {
			return
		}
		mu.Lock()
		arrived++
		if arrived == 2 {
			close(both)
		}
		mu.Unlock()
		select {
		case <-both:
		case <-time.After(10 * time.Second):
			mu.Lock()
			lined = false
			mu.Unlock()
		}
	})
	s.queue11("raced", map[string]any{"delayMs": 3000})
	s.RunUntil(s.allTerminal, time.Minute)
	s.Store.OnCommit(nil)

	mu.Lock()
	defer mu.Unlock()
	if duplicated != 1 || arrived != 2 || !lined {
		t.Fatalf("race not staged: event duplicated %d times, %d claims reached the store, lined up: %v", duplicated, arrived, lined)
	}
	if len(inner) != 2 || inner[0] != nil || inner[1] != nil {
		t.Errorf("both runs should ack (the loser steps aside): %v", inner)
	}
	h := s.History(scnDB, "raced")
	if got := statuses(h); !slices.Equal(got, []string{"pending", "running", "done"}) {
		t.Fatalf("raced went %v, want pending → running → done", got)
	}
	if c := claimsOf(h); len(c) != 1 || !c[0].Time.Equal(s.t0) {
		t.Errorf("claims: %d", len(c))
	}
	done := h[2]
	out, _ := done.Body["output"].(map[string]any)
	if num(done.Body["attempts"]) != 1 || str(out["runKey"]) != "raced:1" || !done.Time.Equal(s.t0.Add(3*time.Second)) {
		t.Errorf("done at %s: %v", at(done.Time, s.t0), done.Body)
	}
	skipped := s.LogsContaining("claim skipped")
	if len(skipped) != 1 || !skipped[0].Time.Equal(s.t0) ||
		!strings.Contains(skipped[0].Message, fmt.Sprintf("is at rev %s, not %s", h[1].Rev, h[0].Rev)) {
		t.Errorf("the losing claim: %+v; want one conflict on rev %s", skipped, h[0].Rev)
	}
	s.checkOrdinary()
	s.checkChainsEnd()
}

// (e) Eleven jobs of every kind at once. The sweep's pending writes fire
// onChange again, and every chain ends: all jobs end done or failed as
// their kind says, the outbox drains, nothing is dead, the loop guard
// stops nothing. The 45 s job outlives its lease each time, so its late
// finishes are fenced off by claimId.
func TestScenarioEveryChainEnds(t *testing.T) {
	t.Parallel()
	s := newScn(t, sim.Options{})
	type want struct {
		status   string
		attempts int64
	}
	kinds := map[string]struct {
		extra map[string]any
		want  want
	}{
		"plain-1":     {nil, want{"done", 1}},
		"plain-2":     {nil, want{"done", 1}},
		"plain-3":     {nil, want{"done", 1}},
		"plain-4":     {nil, want{"done", 1}},
		"slow-3s":     {map[string]any{"delayMs": 3000}, want{"done", 1}},
		"slow-20s":    {map[string]any{"delayMs": 20000}, want{"done", 1}},
		"fail-once":   {map[string]any{"failAttempts": 1}, want{"done", 2}},
		"fail-twice":  {map[string]any{"failAttempts": 2}, want{"done", 3}},
		"fail-always": {map[string]any{"failAttempts": 3}, want{"failed", 3}},
		"slow-45s":    {map[string]any{"delayMs": 45000}, want{"failed", 3}},
		"stuck":       {map[string]any{"delayMs": 3600000}, want{"failed", 3}},
	}
	jobs := map[string]map[string]any{}
	for id, k := range kinds {
		jobs[id] = scnJob("a job of kind "+id, k.extra)
	}
	s.queue(jobs)
	took := s.RunUntil(s.allTerminal, 15*time.Minute)

	for id, k := range kinds {
		d := s.Get(scnDB, id)
		if str(d["status"]) != k.want.status || num(d["attempts"]) != k.want.attempts {
			t.Errorf("%s ended %v after %d attempts, want %s after %d", id, d["status"], num(d["attempts"]), k.want.status, k.want.attempts)
		}
		h := s.History(scnDB, id)
		if c := claimsOf(h); int64(len(c)) != k.want.attempts {
			t.Errorf("%s was claimed %d times, want %d", id, len(c), k.want.attempts)
		}
		dones := 0
		for _, r := range h {
			if str(r.Body["status"]) == "done" {
				dones++
			}
		}
		if k.want.status == "done" && dones != 1 || k.want.status == "failed" && dones != 0 {
			t.Errorf("%s has %d done revisions", id, dones)
		}
	}
	// Each of the 45 s job's runs finished after its lease was taken
	// back: all three finishes were refused, none committed.
	fenced := 0
	for _, l := range s.LogsContaining("finish skipped") {
		if strings.Contains(string(l.Fields), `"slow-45s"`) {
			fenced++
		}
	}
	if fenced != 3 {
		t.Errorf("%d refused finishes of slow-45s, want 3", fenced)
	}
	// Handler and sweep both wrote, and a sweep's pending was claimed
	// again through onChange.
	paths := map[string]int{}
	for _, rev := range s.Ledger(scnDB) {
		paths[rev.Path]++
	}
	if paths["scheduled"] == 0 || paths["onChange"] == 0 {
		t.Errorf("writes by path: %v", paths)
	}
	t.Logf("settled after %v of virtual time; writes by path %v; %d onChange runs, %d ticks", took, paths, len(s.Runs())-len(s.Ticks()), len(s.Ticks()))
	s.checkChainsEnd()
}

// The loop guard: an onChange that always writes back to the document
// that fired it is stopped past depth 4.
func TestScenarioLoopGuardStopsAChain(t *testing.T) {
	t.Parallel()
	dir := sim.WriteApp(t, map[string]string{"backend.js": `
export async function onChange(event, ctx) {
  if (event.deleted) return;
  await ctx.db.put({ ...event.doc, n: (event.doc.n || 0) + 1 }, { ifRev: event.doc._rev });
}
`})
	env := sim.New(t, sim.Options{Dir: dir, Start: scnStart})
	t0 := env.Now()
	env.Put("loop", "echo", map[string]any{"n": 0})
	env.RunFor(time.Minute)

	// The client's write has depth 0, onChange's writes 1..5. Events of
	// depth 0..4 are delivered; the write at depth 5 gets none.
	h := env.History("loop", "echo")
	if len(h) != 1+engine.MaxEventDepth+1 {
		t.Fatalf("%d revisions, want the put and %d onChange writes", len(h), engine.MaxEventDepth+1)
	}
	for i, r := range h {
		if num(r.Body["n"]) != int64(i) || i > 0 && (r.Path != "onChange" || !r.Time.Equal(t0)) {
			t.Errorf("revision %d: n=%v by %s at %s", i, r.Body["n"], r.Path, at(r.Time, t0))
		}
	}
	runs := env.OnChangeRuns("loop", "echo")
	if len(runs) != engine.MaxEventDepth+1 {
		t.Errorf("%d onChange runs, want %d (depths 0 to 4)", len(runs), engine.MaxEventDepth+1)
	}
	for i, r := range runs {
		if r.Seq != h[i].Seq || r.Err != nil {
			t.Errorf("run %d: %v", i, r)
		}
	}
	if info := env.Schedule(); info.LoopStopped != 1 {
		t.Errorf("LoopStopped = %d, want 1", info.LoopStopped)
	}
	warn := env.LogsContaining("loop guard")
	if len(warn) != 1 || warn[0].Level != "warn" || !strings.Contains(warn[0].Message, "depth 5") {
		t.Errorf("loop guard lines: %+v", warn)
	}
	if evs := env.Events(false); len(evs) != 0 {
		t.Errorf("events waiting: %+v", evs)
	}
}

// The scheduled handler ticks on its 5 s grid: 12 ticks in 60 s, each at
// its planned instant; a failing tick is logged with its error, shown by
// Schedule, and the next tick comes on time.
func TestScenarioTicksOnSchedule(t *testing.T) {
	t.Parallel()
	dir := sim.WriteApp(t, map[string]string{"backend.js": `
export const config = { scheduled: { interval: "5s" } };
export async function scheduled(event, ctx) {
  ctx.log("info", "tick", { planned: event.scheduledTime, now: Date.now() });
  if (Math.floor(event.scheduledTime / 5000) % 4 === 0) throw new Error("tick " + event.scheduledTime + " failed on purpose");
}
`})
	env := sim.New(t, sim.Options{Dir: dir, Start: scnStart})
	fails := func(p time.Time) bool { return (p.UnixMilli()/5000)%4 == 0 }
	tick := nextTick(scnStart)
	end := scnStart.Add(time.Minute)
	failed := 0
	for ; !tick.After(end); tick = tick.Add(scnTick) {
		env.RunFor(tick.Sub(env.Now()))
		info := env.Schedule()
		if info.Planned == nil || !info.Planned.Equal(tick) || !info.LastRun.Equal(tick) || info.Running || info.Interval != "5s" {
			t.Fatalf("at %s: schedule %+v", tick.Format(time.TimeOnly), info)
		}
		if fails(tick) {
			failed++
			if !strings.Contains(info.LastError, "failed on purpose") {
				t.Errorf("after the failing tick at %s, LastError = %q", tick.Format(time.TimeOnly), info.LastError)
			}
		} else if info.LastError != "" {
			t.Errorf("after the good tick at %s, LastError = %q", tick.Format(time.TimeOnly), info.LastError)
		}
	}
	env.RunFor(end.Sub(env.Now()))
	ticks := env.Ticks()
	if len(ticks) != 12 {
		t.Fatalf("%d ticks in 60 s, want 12: %v", len(ticks), ticks)
	}
	for i, r := range ticks {
		want := nextTick(scnStart).Add(time.Duration(i) * scnTick)
		if !r.Planned.Equal(want) || !r.Start.Equal(want) || !onGrid(r.Start) || (r.Err != nil) != fails(want) {
			t.Errorf("tick %d: %v, want at %s", i, r, want.Format(time.TimeOnly))
		}
	}
	errLines := env.LogsContaining("scheduled tick failed")
	if len(errLines) != failed || failed == 0 {
		t.Fatalf("%d tick error lines for %d failing ticks", len(errLines), failed)
	}
	for _, l := range errLines {
		f := sim.Decode(t, l.Fields)
		if l.Level != "error" || !strings.Contains(l.Message, "failed on purpose") || !ms(f["scheduledTime"]).Equal(l.Time) || !fails(l.Time) {
			t.Errorf("tick error line: %+v", l)
		}
	}
	for _, l := range env.LogsContaining("tick") {
		if f := sim.Decode(t, l.Fields); l.Message == "tick" && f["planned"] != f["now"] {
			t.Errorf("a tick ran at Date.now() %v, planned %v", f["now"], f["planned"])
		}
	}
}

// A tick that overruns skips the ticks it missed: no overlap, no
// pile-up, and the schedule resumes on its grid.
func TestScenarioSlowTickDoesNotPileUp(t *testing.T) {
	t.Parallel()
	dir := sim.WriteApp(t, map[string]string{"backend.js": `
export const config = { scheduled: { interval: "5s" } };
export async function scheduled(event, ctx) {
  if (Math.floor(event.scheduledTime / 5000) % 6 === 1) await new Promise((r) => setTimeout(r, 12000));
}
`})
	env := sim.New(t, sim.Options{Dir: dir, Start: scnStart})
	env.RunFor(time.Minute)
	ticks := env.Ticks()
	slow := func(p time.Time) bool { return (p.UnixMilli()/5000)%6 == 1 }
	sawSlow := false
	for i, r := range ticks {
		if !onGrid(r.Planned) || !r.Start.Equal(r.Planned) || !r.Ended() {
			t.Errorf("tick %d: %v", i, r)
		}
		if i == 0 {
			continue
		}
		prev := ticks[i-1]
		if r.Start.Before(prev.End) {
			t.Errorf("tick %d overlaps the previous one: %v after %v", i, r, prev)
		}
		gap := scnTick
		if slow(prev.Planned) {
			sawSlow, gap = true, 15*time.Second // 12 s of work: the next two ticks are skipped, not piled up
		}
		if r.Planned.Sub(prev.Planned) != gap {
			t.Errorf("tick %d planned %v after the previous (%v), want %v", i, r.Planned.Sub(prev.Planned), prev, gap)
		}
	}
	if !sawSlow {
		t.Fatalf("no slow tick in %v", ticks)
	}
}
