package access_test

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
)

// jobsJS is the example transition table, as deployed by the walkthrough.
func jobsJS(t testing.TB) string {
	t.Helper()
	src, err := os.ReadFile("../../examples/jobs/access.js")
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// claim is a claim of job id with claimId, as onChange writes it.
func claim(id, claimID string) string {
	return fmt.Sprintf(`{"_id":%q,"kind":"job","status":"running","attempts":1,"input":"in.txt","claimId":%q,"leaseUntil":%d}`,
		id, claimID, time.Now().Add(time.Hour).UnixMilli())
}

// race releases n writers at once and collects their errors.
func race(n int, write func(i int) error) []error {
	out := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			out[i] = write(i)
		})
	}
	close(start)
	wg.Wait()
	return out
}

// docs/architecture.md, "access.js": the access function decides against the head the commit
// replaces, so 50 identical claims of one pending job commit exactly one.
func TestFiftyClaimsCommitOne(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/jobs"
	en.app(app, false)
	en.deploy(app, jobsJS(t))
	const n = 50
	for round := range 5 {
		id := fmt.Sprintf("job-%d", round)
		pending := en.put(alice, app, "jobs", id, `{"kind":"job","status":"pending","attempts":0,"input":"in.txt"}`)
		seq := en.lastSeq(app)
		errors := race(n, func(i int) error {
			_, err := en.e.Put(en.ctx, onChange(alice), app, "jobs", id, []byte(claim(id, fmt.Sprintf("c%d", i))), appcode.PutOptions{})
			return err
		})
		// Every loser decided against the winner's running head: it got
		// the refusal a claim of a running job gets.
		_, late := en.try(onChange(alice), app, "jobs", id, claim(id, "late"))
		runningReason := refusal(t, late, "a claim of the running job").Reason
		wins := 0
		for i, err := range errors {
			if err == nil {
				wins++
				continue
			}
			wantForbidden(t, err, runningReason, fmt.Sprintf("round %d claim %d", round, i))
		}
		if wins != 1 {
			t.Fatalf("round %d: %d claims committed, want exactly 1", round, wins)
		}
		if got := en.lastSeq(app); got != seq+1 {
			t.Fatalf("round %d: LastSeq %d, want %d", round, got, seq+1)
		}
		h, err := en.e.History(en.ctx, alice, app, "jobs", id)
		if err != nil || len(h) != 2 || h[0].Rev != pending.Rev || object(t, h[1].Doc)["status"] != "running" {
			t.Fatalf("round %d: history %+v, %v", round, h, err)
		}
	}
}

// With ifRev the same race ends in one commit and 49 conflicts.
func TestFiftyClaimsWithIfRev(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/jobs"
	en.app(app, false)
	en.deploy(app, jobsJS(t))
	const n = 50
	for round := range 3 {
		id := fmt.Sprintf("job-%d", round)
		pending := en.put(alice, app, "jobs", id, `{"kind":"job","status":"pending","attempts":0,"input":"in.txt"}`)
		errors := race(n, func(i int) error {
			_, err := en.e.Put(en.ctx, onChange(alice), app, "jobs", id, []byte(claim(id, fmt.Sprintf("c%d", i))), appcode.PutOptions{IfRev: pending.Rev})
			return err
		})
		wins := 0
		for i, err := range errors {
			if err == nil {
				wins++
				continue
			}
			wantCode(t, err, errs.Conflict, fmt.Sprintf("round %d claim %d", round, i), pending.Rev)
		}
		if wins != 1 {
			t.Fatalf("round %d: %d claims committed, want exactly 1", round, wins)
		}
		if h, _ := en.e.History(en.ctx, alice, app, "jobs", id); len(h) != 2 {
			t.Fatalf("round %d: %d revisions, want 2", round, len(h))
		}
	}
}
