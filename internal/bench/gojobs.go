package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/handoff-run/handoff"
	"github.com/handoff-run/handoff/errs"
)

// The job pattern again, in Go: the same transition table as
// examples/jobs/access.js and the same handlers as its backend.js, as an
// app of package handoff, so `handoff bench jobs --handlers go` shows what
// the engine and the store cost on their own, and what JavaScript adds to
// a job can be read off the difference. The JSON work a handler does
// (decode the event's document, encode the write) stays in, in Go.

const (
	goLease       = 30 * time.Second
	goMaxAttempts = 3
)

// goJob is a job document as the handlers read and write it. Unknown
// fields would be lost, but the bench writes only these; it never asks
// for failing work (failAttempts).
type goJob struct {
	ID         string          `json:"_id,omitempty"`
	Rev        string          `json:"_rev,omitempty"`
	Deleted    bool            `json:"_deleted,omitempty"`
	Kind       string          `json:"kind"`
	Status     string          `json:"status"`
	Input      *string         `json:"input,omitempty"`
	Attempts   int             `json:"attempts"`
	ClaimID    string          `json:"claimId,omitempty"`
	LeaseUntil int64           `json:"leaseUntil,omitempty"`
	LastError  string          `json:"lastError,omitempty"`
	Output     json.RawMessage `json:"output,omitempty"`
	FinishedAt string          `json:"finishedAt,omitempty"`
	DelayMs    int64           `json:"delayMs,omitempty"`
}

// goJobsApp is examples/jobs named name: its access.js (goTable) and its
// backend.js, config included.
func goJobsApp(name string) handoff.App {
	return handoff.App{
		Name:   name,
		Tables: map[string]handoff.Table{jobsDB: goTable},
		OnChange: handoff.OnChange{
			Handle:      goOnChange,
			Concurrency: 64,
			Timeout:     2 * time.Minute,
			MaxAttempts: 5,
			DBs:         []string{jobsDB},
			When:        map[string][]any{"kind": {"job"}, "status": {"pending"}},
		},
		Scheduled: handoff.Scheduled{Handle: goSweep, Interval: 5 * time.Second},
	}
}

var goVisible = handoff.Decision{
	Channels: []string{"jobs"},
	Grant:    handoff.Grant{Public: []string{"jobs"}},
}

// goTable is examples/jobs/access.js.
func goTable(w *handoff.Write) (handoff.Decision, error) {
	refuse := func(reason string) (handoff.Decision, error) { return handoff.Decision{}, handoff.Forbid(reason) }
	if w.User == nil {
		return refuse("sign in to queue jobs")
	}
	if w.Deleted {
		if !w.User.IsOwner {
			return refuse("only the owner deletes jobs")
		}
		return handoff.Decision{}, nil
	}
	var job goJob
	if err := w.Doc.Decode(&job); err != nil {
		return handoff.Decision{}, err
	}
	if job.Kind != "job" {
		return refuse(`documents in jobs need kind: "job"`)
	}
	if w.Old == nil {
		switch {
		case job.Status != "pending":
			return refuse("a new job starts as pending")
		case job.Attempts != 0:
			return refuse("a new job starts with attempts: 0")
		case job.Input == nil:
			return refuse("a job needs an input string")
		}
		return goVisible, nil
	}
	var was goJob
	if err := w.Old.Decode(&was); err != nil {
		return handoff.Decision{}, err
	}
	if (job.Input == nil) != (was.Input == nil) || job.Input != nil && *job.Input != *was.Input {
		return refuse("a job's input cannot change")
	}
	now := w.Now.UnixMilli()
	var err error
	switch was.Status + "->" + job.Status {
	case "pending->running":
		err = w.RequireBackend(handoff.HandlerOnChange)
		switch {
		case err != nil:
		case job.Attempts != was.Attempts+1:
			err = handoff.Forbid("a claim takes exactly one more attempt")
		case job.ClaimID == "" || job.ClaimID == was.ClaimID:
			err = handoff.Forbid("a claim needs a new claimId")
		case job.LeaseUntil <= now:
			err = handoff.Forbid("a claim needs a lease in the future")
		}
	case "running->running":
		err = w.RequireBackend(handoff.HandlerOnChange)
		switch {
		case err != nil:
		case job.ClaimID != was.ClaimID:
			err = handoff.Forbid("this run no longer holds the job (stale claimId)")
		case job.Attempts != was.Attempts || job.LeaseUntil != was.LeaseUntil:
			err = handoff.Forbid("a running job keeps its attempts and lease")
		}
	case "running->done":
		err = w.RequireBackend(handoff.HandlerOnChange)
		switch {
		case err != nil:
		case job.ClaimID != was.ClaimID:
			err = handoff.Forbid("this run no longer holds the job (stale claimId)")
		case job.Attempts != was.Attempts:
			err = handoff.Forbid("attempts change only when a job is claimed")
		}
	case "running->pending", "running->failed":
		err = w.RequireBackend(handoff.HandlerScheduled)
		switch {
		case err != nil:
		case was.LeaseUntil >= now:
			err = handoff.Forbid("the lease has not expired yet")
		case job.Status == "pending" && was.Attempts >= goMaxAttempts:
			err = handoff.Forbid("no attempts left: the job must fail")
		}
	default:
		err = handoff.Forbid("no transition from " + was.Status + " to " + job.Status)
	}
	if err != nil {
		return handoff.Decision{}, err
	}
	return goVisible, nil
}

// move writes one transition; it reports false when another writer moved
// the job first or the table refused, as the example's move does.
// The put drops the _rev the job was read with.
func move(ctx context.Context, db *handoff.Docs, job *goJob, ifRev string) (string, bool, error) {
	r, err := db.Put(ctx, jobsDB, job.ID, job, handoff.PutOptions{IfRev: ifRev})
	if errs.Is(err, errs.Conflict) || errs.Is(err, errs.Forbidden) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return r.Rev, true, nil
}

// goOnChange is the example's onChange: claim, work, finish.
func goOnChange(ctx context.Context, ev handoff.Change, db *handoff.Docs) error {
	if ev.DB != jobsDB || ev.Deleted {
		return nil
	}
	var job goJob
	if err := ev.Doc.Decode(&job); err != nil {
		return err
	}
	if job.Kind != "job" || job.Status != "pending" {
		return nil
	}
	claimed := job
	claimed.Status = "running"
	claimed.Attempts++
	claimed.ClaimID = strconv.FormatInt(time.Now().UnixMilli(), 36) + "-" + rand.Text()[:8]
	claimed.LeaseUntil = time.Now().Add(goLease).UnixMilli()
	rev, ok, err := move(ctx, db, &claimed, job.Rev)
	if err != nil || !ok {
		return err
	}
	if claimed.DelayMs > 0 {
		select {
		case <-time.After(time.Duration(claimed.DelayMs) * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	input := ""
	if claimed.Input != nil {
		input = *claimed.Input
	}
	runKey := claimed.ID + ":" + strconv.Itoa(claimed.Attempts)
	out, err := json.Marshal(map[string]any{"words": len(strings.Fields(input)), "chars": len(input), "runKey": runKey})
	if err != nil {
		return err
	}
	finished := claimed
	finished.Rev = rev
	finished.LastError = ""
	finished.Status = "done"
	finished.Output = out
	finished.FinishedAt = time.Now().UTC().Format("2006-01-02T15:04:05.000Z")
	_, _, err = move(ctx, db, &finished, "")
	return err
}

// goSweep is the example's scheduled sweep of expired leases.
func goSweep(ctx context.Context, _ handoff.Tick, db *handoff.Docs) error {
	now := time.Now().UnixMilli()
	after := ""
	for {
		page, err := db.Query(ctx, jobsDB, "status", json.RawMessage(`"running"`), 200, after)
		if err != nil {
			return err
		}
		for _, d := range page.Docs {
			var job goJob
			if err := d.Decode(&job); err != nil {
				return err
			}
			if job.Kind != "job" || job.LeaseUntil >= now {
				continue
			}
			next := job
			next.Status, next.LastError = "pending", job.LastError
			if job.Attempts >= goMaxAttempts {
				next.Status, next.LastError = "failed", "no attempts left after "+strconv.Itoa(job.Attempts)
			}
			if next.LastError == "" {
				next.LastError = "lease expired"
			}
			if _, _, err := move(ctx, db, &next, job.Rev); err != nil {
				return err
			}
		}
		if after = page.Next; after == "" {
			return nil
		}
	}
}
