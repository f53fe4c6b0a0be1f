package bench

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// The job pattern again, in Go: the same transition table as
// examples/jobs/access.js and the same handlers as its backend.js, plugged
// into the engine where the JavaScript runtimes go. Apps can't be written
// this way; it exists so `handoff bench jobs --handlers go` can show what
// the engine and the store cost on their own, and so what JavaScript adds
// to a job can be read off the difference. The JSON work a handler does
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

// goRuntime compiles every access.js into goAccess.
type goRuntime struct{}

func (goRuntime) CompileAccess(string, string) (appcode.AccessFunc, error) { return goAccess{}, nil }
func (goRuntime) CheckBackend(string, string) error                        { return nil }

// goAccess is examples/jobs/access.js.
type goAccess struct{}

func (goAccess) Gates(db string) bool { return db == jobsDB }

func refuse(reason string) error {
	return &errs.Error{Code: errs.Forbidden, Reason: reason, Message: "access.js refused the write: " + reason}
}

var goVisible = appcode.AccessDecision{
	Channels: []string{"jobs"},
	Grants:   []store.Grant{{Kind: "public", Channel: "jobs"}},
}

func (goAccess) Check(_ context.Context, in appcode.AccessInput) (appcode.AccessDecision, error) {
	if in.User == nil {
		return appcode.AccessDecision{}, refuse("sign in to queue jobs")
	}
	var job goJob
	if err := json.Unmarshal(in.Doc, &job); err != nil {
		return appcode.AccessDecision{}, err
	}
	if job.Deleted {
		if !in.User.IsOwner {
			return appcode.AccessDecision{}, refuse("only the owner deletes jobs")
		}
		return appcode.AccessDecision{}, nil
	}
	if job.Kind != "job" {
		return appcode.AccessDecision{}, refuse(`documents in jobs need kind: "job"`)
	}
	if in.OldDoc == nil {
		switch {
		case job.Status != "pending":
			return appcode.AccessDecision{}, refuse("a new job starts as pending")
		case job.Attempts != 0:
			return appcode.AccessDecision{}, refuse("a new job starts with attempts: 0")
		case job.Input == nil:
			return appcode.AccessDecision{}, refuse("a job needs an input string")
		}
		return goVisible, nil
	}
	var was goJob
	if err := json.Unmarshal(in.OldDoc, &was); err != nil {
		return appcode.AccessDecision{}, err
	}
	if (job.Input == nil) != (was.Input == nil) || job.Input != nil && *job.Input != *was.Input {
		return appcode.AccessDecision{}, refuse("a job's input cannot change")
	}
	now := in.Now.UnixMilli()
	backend := func(h appcode.Handler) error {
		if in.Handler != h {
			return refuse("only the backend's " + string(h) + " handler may make this change")
		}
		return nil
	}
	var err error
	switch was.Status + "->" + job.Status {
	case "pending->running":
		err = backend(appcode.OnChange)
		switch {
		case err != nil:
		case job.Attempts != was.Attempts+1:
			err = refuse("a claim takes exactly one more attempt")
		case job.ClaimID == "" || job.ClaimID == was.ClaimID:
			err = refuse("a claim needs a new claimId")
		case job.LeaseUntil <= now:
			err = refuse("a claim needs a lease in the future")
		}
	case "running->running":
		err = backend(appcode.OnChange)
		switch {
		case err != nil:
		case job.ClaimID != was.ClaimID:
			err = refuse("this run no longer holds the job (stale claimId)")
		case job.Attempts != was.Attempts || job.LeaseUntil != was.LeaseUntil:
			err = refuse("a running job keeps its attempts and lease")
		}
	case "running->done":
		err = backend(appcode.OnChange)
		switch {
		case err != nil:
		case job.ClaimID != was.ClaimID:
			err = refuse("this run no longer holds the job (stale claimId)")
		case job.Attempts != was.Attempts:
			err = refuse("attempts change only when a job is claimed")
		}
	case "running->pending", "running->failed":
		err = backend(appcode.Scheduled)
		switch {
		case err != nil:
		case was.LeaseUntil >= now:
			err = refuse("the lease has not expired yet")
		case job.Status == "pending" && was.Attempts >= goMaxAttempts:
			err = refuse("no attempts left: the job must fail")
		}
	default:
		err = refuse("no transition from " + was.Status + " to " + job.Status)
	}
	if err != nil {
		return appcode.AccessDecision{}, err
	}
	return goVisible, nil
}

// goCompiler compiles every backend.js into goBackend.
type goCompiler struct{}

func (goCompiler) CompileBackend(string, string) (appcode.Backend, error) {
	b := &goBackend{}
	b.cfg.Scheduled.Interval = 5 * time.Second
	b.cfg.OnChange.Concurrency = 64
	b.cfg.OnChange.Timeout = 2 * time.Minute
	b.cfg.OnChange.MaxAttempts = 5
	b.cfg.OnChange.DBs = []string{jobsDB}
	b.cfg.OnChange.When = []appcode.FieldMatch{{Field: "kind", Values: []any{"job"}}, {Field: "status", Values: []any{"pending"}}}
	return b, nil
}

// goBackend is examples/jobs/backend.js.
type goBackend struct{ cfg appcode.BackendConfig }

func (b *goBackend) Config() appcode.BackendConfig { return b.cfg }
func (b *goBackend) Has(h appcode.Handler) bool {
	return h == appcode.OnChange || h == appcode.Scheduled
}
func (b *goBackend) Close() {}

func (b *goBackend) Fetch(context.Context, appcode.FetchRequest, appcode.HandlerContext) (appcode.FetchResponse, error) {
	return appcode.FetchResponse{}, errors.New("the Go job handlers have no fetch")
}

// move writes one transition; it reports false when another writer moved
// the job first or the table refused, as the example's move does.
func move(ctx context.Context, hc appcode.HandlerContext, job *goJob, ifRev string) (string, bool, error) {
	id, rev := job.ID, job.Rev
	job.Rev = ""
	body, err := json.Marshal(job)
	job.Rev = rev
	if err != nil {
		return "", false, err
	}
	r, err := hc.Put(ctx, jobsDB, id, body, appcode.PutOptions{IfRev: ifRev})
	if errs.Is(err, errs.Conflict) || errs.Is(err, errs.Forbidden) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	return r.Rev, true, nil
}

func (b *goBackend) OnChange(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
	if ev.DB != jobsDB || ev.Deleted {
		return nil
	}
	var job goJob
	if err := json.Unmarshal(ev.Doc, &job); err != nil {
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
	rev, ok, err := move(ctx, hc, &claimed, job.Rev)
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
	_, _, err = move(ctx, hc, &finished, "")
	return err
}

func (b *goBackend) Scheduled(ctx context.Context, _ appcode.TickEvent, hc appcode.HandlerContext) error {
	now := time.Now().UnixMilli()
	after := ""
	for {
		page, err := hc.Query(ctx, jobsDB, "status", json.RawMessage(`"running"`), 200, after)
		if err != nil {
			return err
		}
		for _, d := range page.Docs {
			var job goJob
			if err := json.Unmarshal(d, &job); err != nil {
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
			if _, _, err := move(ctx, hc, &next, job.Rev); err != nil {
				return err
			}
		}
		if after = page.Next; after == "" {
			return nil
		}
	}
}
