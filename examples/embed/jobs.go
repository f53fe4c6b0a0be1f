package main

import (
	"context"
	"strings"

	"github.com/handoff-run/handoff"
	"github.com/handoff-run/handoff/errs"
)

// job is the document: its status walks pending → running → done.
type job struct {
	ID       string         `json:"_id,omitempty"`
	Rev      string         `json:"_rev,omitempty"`
	Status   string         `json:"status"`
	Input    string         `json:"input"`
	Attempts int            `json:"attempts"`
	Output   map[string]int `json:"output,omitempty"`
}

// queue is the app: a transition table for the jobs database and an
// onChange handler that claims, works and finishes each new job. done
// hears of each job the handler finished; the handler and the program
// share a process, so a channel is all it takes.
type queue struct {
	done chan string
}

func (q *queue) app() handoff.App {
	return handoff.App{
		Name:   "demo/queue",
		Public: true, // users read what the table grants everyone
		Tables: map[string]handoff.Table{"jobs": table},
		// Only pending jobs are work: the handler's own claims and
		// finishes get no run at all.
		OnChange: handoff.OnChange{Handle: q.work, DBs: []string{"jobs"}, When: map[string][]any{"status": {"pending"}}},
	}
}

var everyone = handoff.Decision{Channels: []string{"jobs"}, Grant: handoff.Grant{Public: []string{"jobs"}}}

// table is the state machine. Anyone signed in queues a job; after that
// only the onChange handler moves it, one step at a time.
func table(w *handoff.Write) (handoff.Decision, error) {
	if w.User == nil {
		return handoff.Decision{}, handoff.Forbid("sign in to queue jobs")
	}
	var j, was job
	if err := w.Doc.Decode(&j); err != nil {
		return handoff.Decision{}, err
	}
	if w.Old == nil {
		if j.Status != "pending" || j.Attempts != 0 {
			return handoff.Decision{}, handoff.Forbid("a new job is pending, with attempts: 0")
		}
		return everyone, nil
	}
	if err := w.Old.Decode(&was); err != nil {
		return handoff.Decision{}, err
	}
	if j.Input != was.Input {
		return handoff.Decision{}, handoff.Forbid("a job's input cannot change")
	}
	switch was.Status + "->" + j.Status {
	case "pending->running":
		if j.Attempts != was.Attempts+1 {
			return handoff.Decision{}, handoff.Forbid("a claim takes exactly one more attempt")
		}
	case "running->done":
		if j.Output == nil {
			return handoff.Decision{}, handoff.Forbid("a done job has its output")
		}
	default:
		return handoff.Decision{}, handoff.Forbid("no transition from " + was.Status + " to " + j.Status)
	}
	return everyone, w.RequireBackend(handoff.HandlerOnChange)
}

// work claims a pending job, does it and finishes it. A commit may be
// delivered twice; the claim is a compare-and-set on the revision the
// run was for, so only one run gets past it.
func (q *queue) work(ctx context.Context, c handoff.Change, db *handoff.Docs) error {
	var j job
	if err := c.Doc.Decode(&j); err != nil || j.Status != "pending" {
		return err
	}
	j.Status, j.Attempts = "running", j.Attempts+1
	claim, err := db.Put(ctx, c.DB, c.ID, j, handoff.PutOptions{IfRev: j.Rev})
	if errs.Is(err, errs.Conflict) {
		return nil // another run claimed it first
	}
	if err != nil {
		return err
	}
	j.Status = "done"
	j.Output = map[string]int{"words": len(strings.Fields(j.Input))}
	if _, err := db.Put(ctx, c.DB, c.ID, j, handoff.PutOptions{IfRev: claim.Rev}); err != nil {
		return err
	}
	select {
	case q.done <- c.ID:
	case <-ctx.Done():
	}
	return nil
}
