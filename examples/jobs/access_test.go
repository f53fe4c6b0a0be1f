// Package jobs_test walks the transition table of examples/jobs/access.js
// through the engine: every allowed edge commits, and every forbidden one
// is refused with its own reason.
package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/access"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store/sqlite"
)

const app = "alice/jobs"

var (
	admin = engine.Actor{User: engine.AdminUser, Admin: true}
	anon  = engine.Actor{}
	alice = engine.Actor{User: "alice"} // the owner
	bob   = engine.Actor{User: "bob"}   // signed in, not a member
)

func onChange(a engine.Actor) engine.Actor  { a.Handler = "onChange"; return a }
func scheduled(a engine.Actor) engine.Actor { a.Handler = "scheduled"; return a }

const lease = 30 * time.Second

type job = map[string]any

type env struct {
	t   *testing.T
	ctx context.Context
	clk *clock.Virtual
	e   *engine.Engine
	n   int
}

// newEnv runs the engine and Date.now() on one virtual clock, so leases
// expire when the test says so.
func newEnv(t *testing.T) *env {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewVirtual(time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC))
	e := engine.New(st, engine.Options{Clock: clk, Code: jsapp.New(jsapp.Options{Access: access.Options{Now: clk.Now}})})
	en := &env{t: t, ctx: context.Background(), clk: clk, e: e}
	if _, err := e.Bootstrap(en.ctx, ""); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob"} {
		if _, err := e.AddUser(en.ctx, admin, u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.CreateApp(en.ctx, admin, app, false); err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("access.js")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Deploy(en.ctx, alice, app, string(src), ""); err != nil {
		t.Fatalf("deploying examples/jobs/access.js: %v", err)
	}
	// A generous deadline: these tests are about the table, and under
	// -race on a loaded machine a call can spend 100ms descheduled.
	if err := e.SetAccessTimeout(en.ctx, alice, app, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	return en
}

func (en *env) leaseIn(d time.Duration) int64 { return en.clk.Now().Add(d).UnixMilli() }

func (en *env) write(a engine.Actor, id string, j job) error {
	b, err := json.Marshal(j)
	if err != nil {
		en.t.Fatal(err)
	}
	_, err = en.e.Put(en.ctx, a, app, "jobs", id, b, appcode.PutOptions{})
	return err
}

func (en *env) must(a engine.Actor, id string, j job) {
	en.t.Helper()
	if err := en.write(a, id, j); err != nil {
		en.t.Fatalf("setting up %s with %v as %+v: %v", id, j, a, err)
	}
}

// head reads a job as the owner, without _id and _rev, and its rev.
func (en *env) head(id string) (job, string) {
	en.t.Helper()
	raw, err := en.e.Get(en.ctx, alice, app, "jobs", id)
	if err != nil {
		en.t.Fatalf("Get %s: %v", id, err)
	}
	var j job
	if err := json.Unmarshal(raw, &j); err != nil {
		en.t.Fatal(err)
	}
	rev := j["_rev"].(string)
	delete(j, "_id")
	delete(j, "_rev")
	return j, rev
}

func newJob() job {
	return job{"kind": "job", "status": "pending", "attempts": 0, "input": "slide-1.jpg"}
}

func claimOf(j job, claimID string, until int64) job {
	j = maps.Clone(j)
	j["status"], j["claimId"], j["leaseUntil"] = "running", claimID, until
	j["attempts"] = j["attempts"].(float64) + 1
	return j
}

func with(j job, kv ...any) job {
	j = maps.Clone(j)
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(j, kv[i].(string))
		} else {
			j[kv[i].(string)] = kv[i+1]
		}
	}
	return j
}

// seed makes a new job and walks allowed edges to state:
//
//	pending    new
//	running    claimed (attempts 1, claimId c1), lease not expired
//	expired    running with its lease expired
//	done       finished by the run that holds c1
//	failed     given up by the sweep after the lease expired
//	requeued   pending again after the sweep took the lease back (keeps c1)
//	exhausted  running on its 3rd attempt with the lease expired
func (en *env) seed(state string) string {
	en.t.Helper()
	en.n++
	id := fmt.Sprintf("job-%d", en.n)
	en.must(alice, id, newJob())
	step := func(a engine.Actor, next func(job) job) {
		en.t.Helper()
		j, _ := en.head(id)
		en.must(a, id, next(j))
	}
	claim := func(c string) {
		en.t.Helper()
		step(onChange(alice), func(j job) job { return claimOf(j, c, en.leaseIn(lease)) })
	}
	expire := func() { en.clk.Advance(lease + time.Second) }
	switch state {
	case "pending":
	case "running":
		claim("c1")
	case "expired":
		claim("c1")
		expire()
	case "done":
		claim("c1")
		step(onChange(alice), func(j job) job { return with(j, "status", "done", "output", "ok") })
	case "failed":
		claim("c1")
		expire()
		step(scheduled(alice), func(j job) job { return with(j, "status", "failed") })
	case "requeued":
		claim("c1")
		expire()
		step(scheduled(alice), func(j job) job { return with(j, "status", "pending") })
	case "exhausted":
		for i := 1; i <= 3; i++ {
			claim(fmt.Sprintf("c%d", i))
			expire()
			if i < 3 {
				step(scheduled(alice), func(j job) job { return with(j, "status", "pending") })
			}
		}
	default:
		en.t.Fatalf("unknown state %q", state)
	}
	return id
}

const (
	onlyOnChange  = "only the backend's onChange handler may make this change"
	onlyScheduled = "only the backend's scheduled handler may make this change"
)

func TestTransitionTable(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	future := func() int64 { return en.leaseIn(lease) }
	cases := []struct {
		name   string
		from   string // "" creates a new job
		who    engine.Actor
		del    bool
		next   func(head job) job
		reason string // "" must commit
		status string // the status after an allowed write
	}{
		// Allowed edges.
		{name: "create pending (owner)", who: alice, next: func(job) job { return newJob() }, status: "pending"},
		{name: "create pending (any signed-in user)", who: bob, next: func(job) job { return newJob() }, status: "pending"},
		{name: "claim pending->running by onChange", from: "pending", who: onChange(bob),
			next: func(j job) job { return claimOf(j, "c1", future()) }, status: "running"},
		{name: "re-claim requeued job with a fresh claimId", from: "requeued", who: onChange(alice),
			next: func(j job) job { return claimOf(j, "c2", future()) }, status: "running"},
		{name: "finish running->done by onChange, same claimId", from: "running", who: onChange(alice),
			next: func(j job) job { return with(j, "status", "done", "output", "ok") }, status: "done"},
		{name: "sweep running->pending by scheduled after the lease", from: "expired", who: scheduled(alice),
			next: func(j job) job { return with(j, "status", "pending") }, status: "pending"},
		{name: "sweep running->failed by scheduled after the lease", from: "expired", who: scheduled(alice),
			next: func(j job) job { return with(j, "status", "failed") }, status: "failed"},
		{name: "give up exhausted running->failed", from: "exhausted", who: scheduled(alice),
			next: func(j job) job { return with(j, "status", "failed") }, status: "failed"},
		{name: "finish by onChange acting as another writer", from: "running", who: onChange(bob),
			next: func(j job) job { return with(j, "status", "done") }, status: "done"},
		{name: "the run notes progress running->running, same claim", from: "running", who: onChange(alice),
			next: func(j job) job { return with(j, "progress", 0.5, "error", "retrying a download") }, status: "running"},
		{name: "owner deletes a job", from: "done", who: alice, del: true},

		// Wrong actor for each edge.
		{name: "client claims", from: "pending", who: alice,
			next: func(j job) job { return claimOf(j, "c1", future()) }, reason: onlyOnChange},
		{name: "client claims with a handler field", from: "pending", who: alice,
			next: func(j job) job { return with(claimOf(j, "c1", future()), "handler", "onChange") }, reason: onlyOnChange},
		{name: "scheduled claims", from: "pending", who: scheduled(alice),
			next: func(j job) job { return claimOf(j, "c1", future()) }, reason: onlyOnChange},
		{name: "client finishes", from: "running", who: alice,
			next: func(j job) job { return with(j, "status", "done") }, reason: onlyOnChange},
		{name: "scheduled finishes", from: "running", who: scheduled(alice),
			next: func(j job) job { return with(j, "status", "done") }, reason: onlyOnChange},
		{name: "client requeues", from: "expired", who: alice,
			next: func(j job) job { return with(j, "status", "pending") }, reason: onlyScheduled},
		{name: "onChange requeues", from: "expired", who: onChange(alice),
			next: func(j job) job { return with(j, "status", "pending") }, reason: onlyScheduled},
		{name: "client fails a job", from: "expired", who: bob,
			next: func(j job) job { return with(j, "status", "failed") }, reason: onlyScheduled},
		{name: "onChange fails a job", from: "expired", who: onChange(alice),
			next: func(j job) job { return with(j, "status", "failed") }, reason: onlyScheduled},

		// Claims that break the rules.
		{name: "claim without bumping attempts", from: "pending", who: onChange(alice),
			next:   func(j job) job { return with(claimOf(j, "c1", future()), "attempts", 0) },
			reason: "a claim takes exactly one more attempt"},
		{name: "claim bumping attempts by two", from: "pending", who: onChange(alice),
			next:   func(j job) job { return with(claimOf(j, "c1", future()), "attempts", 2) },
			reason: "a claim takes exactly one more attempt"},
		{name: "claim reusing the previous claimId", from: "requeued", who: onChange(alice),
			next: func(j job) job { return claimOf(j, "c1", future()) }, reason: "a claim needs a new claimId"},
		{name: "claim without a claimId", from: "pending", who: onChange(alice),
			next: func(j job) job { return with(claimOf(j, "c1", future()), "claimId", nil) }, reason: "a claim needs a new claimId"},
		{name: "claim with an empty claimId", from: "pending", who: onChange(alice),
			next: func(j job) job { return claimOf(j, "", future()) }, reason: "a claim needs a new claimId"},
		{name: "claim with a lease in the past", from: "pending", who: onChange(alice),
			next: func(j job) job { return claimOf(j, "c1", en.leaseIn(-time.Second)) }, reason: "a claim needs a lease in the future"},
		{name: "claim without a lease", from: "pending", who: onChange(alice),
			next: func(j job) job { return with(claimOf(j, "c1", 0), "leaseUntil", nil) }, reason: "a claim needs a lease in the future"},

		// Progress notes that break the rules.
		{name: "client notes progress", from: "running", who: alice,
			next: func(j job) job { return with(j, "progress", 0.5) }, reason: onlyOnChange},
		{name: "progress note extends the lease", from: "running", who: onChange(alice),
			next:   func(j job) job { return with(j, "leaseUntil", en.leaseIn(time.Hour)) },
			reason: "a running job keeps its attempts and lease"},
		{name: "progress note changes attempts", from: "running", who: onChange(alice),
			next:   func(j job) job { return with(j, "attempts", 2) },
			reason: "a running job keeps its attempts and lease"},

		// Finishes that break the rules.
		{name: "finish with a stale claimId", from: "running", who: onChange(alice),
			next:   func(j job) job { return with(j, "status", "done", "claimId", "c0") },
			reason: "this run no longer holds the job (stale claimId)"},
		{name: "finish changing attempts", from: "running", who: onChange(alice),
			next:   func(j job) job { return with(j, "status", "done", "attempts", 5) },
			reason: "attempts change only when a job is claimed"},

		// Sweeps that break the rules.
		{name: "requeue before the lease expired", from: "running", who: scheduled(alice),
			next: func(j job) job { return with(j, "status", "pending") }, reason: "the lease has not expired yet"},
		{name: "fail before the lease expired", from: "running", who: scheduled(alice),
			next: func(j job) job { return with(j, "status", "failed") }, reason: "the lease has not expired yet"},
		{name: "requeue a job out of attempts", from: "exhausted", who: scheduled(alice),
			next: func(j job) job { return with(j, "status", "pending") }, reason: "no attempts left: the job must fail"},

		// The input is fixed, and there are no other edges.
		{name: "claim changing the input", from: "pending", who: onChange(alice),
			next:   func(j job) job { return with(claimOf(j, "c1", future()), "input", "other.jpg") },
			reason: "a job's input cannot change"},
		{name: "owner edits a pending job's input", from: "pending", who: alice,
			next: func(j job) job { return with(j, "input", "other.jpg") }, reason: "a job's input cannot change"},
		{name: "done->running", from: "done", who: onChange(alice),
			next: func(j job) job { return claimOf(j, "c9", future()) }, reason: "no transition from done to running"},
		{name: "failed->pending", from: "failed", who: scheduled(alice),
			next: func(j job) job { return with(j, "status", "pending") }, reason: "no transition from failed to pending"},
		{name: "pending->done", from: "pending", who: onChange(alice),
			next: func(j job) job { return with(j, "status", "done") }, reason: "no transition from pending to done"},
		{name: "second claim of a running job", from: "running", who: onChange(alice),
			next:   func(j job) job { return with(claimOf(j, "c2", future()), "attempts", 1) },
			reason: "this run no longer holds the job (stale claimId)"},
		{name: "pending->pending by the owner", from: "pending", who: alice,
			next: func(j job) job { return with(j, "note", "x") }, reason: "no transition from pending to pending"},

		// New jobs.
		{name: "new job not pending", who: alice,
			next: func(job) job { return with(newJob(), "status", "running") }, reason: "a new job starts as pending"},
		{name: "new job with attempts", who: alice,
			next: func(job) job { return with(newJob(), "attempts", 1) }, reason: "a new job starts with attempts: 0"},
		{name: "new job without attempts", who: alice,
			next: func(job) job { return with(newJob(), "attempts", nil) }, reason: "a new job starts with attempts: 0"},
		{name: "new job without input", who: alice,
			next: func(job) job { return with(newJob(), "input", nil) }, reason: "a job needs an input string"},
		{name: "new job with an object input", who: alice,
			next: func(job) job { return with(newJob(), "input", map[string]any{"url": "x"}) }, reason: "a job needs an input string"},
		{name: "anonymous create", who: anon, next: func(job) job { return newJob() }, reason: "sign in to queue jobs"},
		{name: "anonymous claim", from: "pending", who: onChange(anon),
			next: func(j job) job { return claimOf(j, "c1", future()) }, reason: "sign in to queue jobs"},
		{name: "wrong kind on create", who: alice,
			next: func(job) job { return with(newJob(), "kind", "task") }, reason: `documents in jobs need kind: "job"`},
		{name: "no kind on create", who: alice,
			next: func(job) job { return with(newJob(), "kind", nil) }, reason: `documents in jobs need kind: "job"`},
		{name: "wrong kind on update", from: "pending", who: onChange(alice),
			next: func(j job) job { return with(claimOf(j, "c1", future()), "kind", "task") }, reason: `documents in jobs need kind: "job"`},

		// Deletes.
		{name: "non-owner deletes", from: "done", who: bob, del: true, reason: "only the owner deletes jobs"},
		{name: "onChange deletes as a non-owner", from: "pending", who: onChange(bob), del: true, reason: "only the owner deletes jobs"},
		{name: "anonymous deletes", from: "pending", who: anon, del: true, reason: "sign in to queue jobs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			en.t = t
			var id, rev string
			var head job
			if c.from != "" {
				id = en.seed(c.from)
				head, rev = en.head(id)
			} else {
				en.n++
				id = fmt.Sprintf("job-%d", en.n)
			}
			var err error
			if c.del {
				_, err = en.e.Delete(en.ctx, c.who, app, "jobs", id, "")
			} else {
				err = en.write(c.who, id, c.next(head))
			}
			if c.reason == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				_, gerr := en.e.Get(en.ctx, alice, app, "jobs", id)
				if c.del {
					if !errs.Is(gerr, errs.NotFound) {
						t.Fatalf("after the delete, Get: %v", gerr)
					}
					return
				}
				if got, _ := en.head(id); got["status"] != c.status {
					t.Fatalf("status %v after the write, want %s", got["status"], c.status)
				}
				return
			}
			var ee *errs.Error
			if !errors.As(err, &ee) || ee.Code != errs.Forbidden || ee.Reason != c.reason {
				t.Fatalf("got %v, want forbidden with reason %q", err, c.reason)
			}
			if c.from == "" {
				if _, err := en.e.Get(en.ctx, alice, app, "jobs", id); !errs.Is(err, errs.NotFound) {
					t.Fatalf("a refused create left a document: %v", err)
				}
			} else if _, now := en.head(id); now != rev {
				t.Fatalf("a refused write moved the head from %s to %s", rev, now)
			}
		})
	}
}

// The whole life of a job, end to end: queue, claim, lose the lease,
// requeue, claim again, finish; a slow first run can no longer finish it.
func TestJobLifecycle(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	id := "life"
	en.must(bob, id, newJob())
	j, _ := en.head(id)
	en.must(onChange(bob), id, claimOf(j, "run-1", en.leaseIn(lease)))
	en.clk.Advance(lease + time.Second)
	j, _ = en.head(id)
	en.must(scheduled(alice), id, with(j, "status", "pending"))
	j, _ = en.head(id)
	en.must(onChange(bob), id, claimOf(j, "run-2", en.leaseIn(lease)))
	// Run 1 wakes up and tries to finish: refused, run 2 holds the job.
	j, _ = en.head(id)
	err := en.write(onChange(bob), id, with(j, "status", "done", "claimId", "run-1"))
	var ee *errs.Error
	if !errors.As(err, &ee) || ee.Reason != "this run no longer holds the job (stale claimId)" {
		t.Fatalf("stale finish: %v", err)
	}
	en.must(onChange(bob), id, with(j, "status", "done", "output", "ok"))
	j, _ = en.head(id)
	if j["status"] != "done" || j["attempts"] != float64(2) || j["claimId"] != "run-2" {
		t.Fatalf("final job = %v", j)
	}
	// Members of the app read jobs: the table grants "jobs" to public.
	if err := en.e.AddMember(en.ctx, alice, app, "bob", "viewer"); err != nil {
		t.Fatal(err)
	}
	if _, err := en.e.Get(en.ctx, bob, app, "jobs", id); err != nil {
		t.Fatalf("a member reads the job: %v", err)
	}
}
