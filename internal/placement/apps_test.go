package placement

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff"
	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
)

// TestAppsRunOnTheirDatabases runs four apps through the engine on a
// router over two databases, each with an onChange handler and a
// scheduled one: each app's documents, changes, handler writes and ticks
// are its own and live in its database only.
func TestAppsRunOnTheirDatabases(t *testing.T) {
	r := openRouter(t, freshPair(t))
	defer r.Close()
	ctx := context.Background()
	clk := clock.NewVirtual(time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC))
	var apps []handoff.App
	for i := range 4 {
		apps = append(apps, handoff.App{
			Name: fmt.Sprintf("alice/app%d", i),
			OnChange: handoff.OnChange{DBs: []string{"jobs"}, Handle: func(ctx context.Context, c handoff.Change, db *handoff.Docs) error {
				_, err := db.Put(ctx, "seen", c.ID, map[string]any{"seq": c.Seq}, handoff.PutOptions{IfAbsent: true})
				return err
			}},
			Scheduled: handoff.Scheduled{Interval: time.Second, Handle: func(ctx context.Context, tk handoff.Tick, db *handoff.Docs) error {
				_, err := db.Put(ctx, "ticks", "tick", map[string]any{"at": tk.Planned.UnixNano()}, handoff.PutOptions{IfAbsent: true})
				return err
			}},
		})
	}
	in, err := handoff.New(ctx, r, handoff.Options{Apps: apps, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	for i, a := range apps {
		if _, err := in.As(a.Name, "alice").Put(ctx, "jobs", fmt.Sprintf("job-of-%d", i), map[string]any{"n": i}, handoff.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Waiting for outcomes: the handlers run as the commits land, and
	// the ticks once the virtual clock passes the interval.
	deadline := time.Now().Add(30 * time.Second)
	for i, a := range apps {
		as := in.As(a.Name, "alice")
		for _, want := range []struct{ db, id string }{{"seen", fmt.Sprintf("job-of-%d", i)}, {"ticks", "tick"}} {
			for {
				if _, err := as.Get(ctx, want.db, want.id); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: %s/%s never appeared", a.Name, want.db, want.id)
				}
				clk.Advance(time.Second)
				time.Sleep(5 * time.Millisecond) // polling for the outcome
			}
		}
	}

	all, err := r.Apps(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range all { // a tick is recorded once its handler returned
		for {
			if tk, err := r.LastTick(ctx, a.ID); err != nil {
				t.Fatal(err)
			} else if tk != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no tick recorded", a.Name)
			}
			time.Sleep(5 * time.Millisecond) // polling for the outcome
		}
	}

	placed, err := r.Placed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for db, list := range placed {
		if len(list) == 0 {
			t.Fatalf("no app placed in database %d: %v", db, placed)
		}
	}
	for i, a := range all {
		at, err := r.Where(ctx, a.ID)
		if err != nil {
			t.Fatal(err)
		}
		for db, st := range r.dbs {
			seen, err := st.Get(ctx, a.ID, "seen", fmt.Sprintf("job-of-%d", i))
			if err != nil {
				t.Fatal(err)
			}
			tick, err := st.LastTick(ctx, a.ID)
			if err != nil {
				t.Fatal(err)
			}
			if here := db == at; (seen != nil) != here || (tick != nil) != here {
				t.Errorf("app %s placed in %d: in database %d its handler's write is %v and its last tick %v", a.Name, at, db, seen, tick)
			}
		}
		changes, err := r.Changes(ctx, a.ID, "", 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range changes {
			if c.DB == "jobs" && c.ID != fmt.Sprintf("job-of-%d", i) {
				t.Errorf("app %s's changes carry %s/%s", a.Name, c.DB, c.ID)
			}
		}
	}
}

// TestJobsAcrossMoves runs the job pattern through the engine while its
// app moves to the other database and back: every job put is done, once,
// by its onChange handler, whichever database its events were in.
func TestJobsAcrossMoves(t *testing.T) {
	grace, wait := DropGrace, WriteWait
	// Long enough for the reads in flight at the switch to end: a handler
	// that read the job where it was, emptied, would find it gone.
	DropGrace = 300 * time.Millisecond
	WriteWait = time.Minute // this test is about what is kept, not how long a move pauses
	defer func() { DropGrace, WriteWait = grace, wait }()
	r := openRouter(t, freshPair(t))
	defer r.Close()
	ctx := context.Background()
	clk := clock.NewVirtual(time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC))
	type job struct {
		Rev    string `json:"_rev,omitempty"`
		Status string `json:"status"`
	}
	app := handoff.App{Name: "alice/jobs", OnChange: handoff.OnChange{
		DBs: []string{"jobs"}, When: map[string][]any{"status": {"pending"}},
		Handle: func(ctx context.Context, c handoff.Change, db *handoff.Docs) error {
			var j job
			if err := c.Doc.Decode(&j); err != nil {
				return err
			}
			run, err := db.Put(ctx, "jobs", c.ID, job{Status: "running"}, handoff.PutOptions{IfRev: j.Rev})
			if errs.CodeOf(err) == errs.Conflict {
				return nil // claimed already: a delivery again
			}
			if err != nil {
				return err
			}
			_, err = db.Put(ctx, "jobs", c.ID, job{Status: "done"}, handoff.PutOptions{IfRev: run.Rev})
			return err
		}}}
	in, err := handoff.New(ctx, r, handoff.Options{Apps: []handoff.App{app}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	alice := in.As(app.Name, "alice")
	a, err := r.App(ctx, "alice", "jobs")
	if err != nil {
		t.Fatal(err)
	}
	start, _ := r.Where(ctx, a.ID)

	const jobs = 200
	var wg sync.WaitGroup
	var put atomic.Int64
	fails := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := g; i < jobs; i += 8 {
				if _, err := alice.Put(ctx, "jobs", fmt.Sprint("job-", i), job{Status: "pending"}, handoff.PutOptions{}); err != nil {
					var ee *errs.Error
					if errors.As(err, &ee) && ee.Detail != "" {
						err = fmt.Errorf("%w (%s)", err, ee.Detail)
					}
					fails <- fmt.Errorf("put job-%d: %w", i, err)
					return
				}
				put.Add(1)
			}
		}()
	}
	for put.Load() < jobs/4 {
		time.Sleep(time.Millisecond) // waiting for the puts to be under way
	}
	before, began := put.Load(), time.Now()
	for _, to := range []int{1 - start, start} {
		if _, err := r.Move(ctx, *a, to); err != nil {
			t.Fatalf("move to %d: %v", to, err)
		}
	}
	t.Logf("two moves in %v while jobs %d to %d were put", time.Since(began), before, put.Load())
	wg.Wait()
	close(fails)
	for err := range fails {
		t.Fatal(err)
	}
	// Events settled where the app was come back once their lease ends:
	// the virtual clock gets them there.
	deadline := time.Now().Add(60 * time.Second)
	for {
		page, err := alice.Query(ctx, "jobs", "status", "done", 1000, "")
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Docs) == jobs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d jobs done", len(page.Docs), jobs)
		}
		clk.Advance(5 * time.Second)
		time.Sleep(10 * time.Millisecond) // polling for the outcome
	}
	for i := range jobs {
		h, err := alice.History(ctx, "jobs", fmt.Sprint("job-", i))
		if err != nil {
			t.Fatal(err)
		}
		var walk []string
		for _, rev := range h {
			var j job
			if err := rev.Doc.Decode(&j); err != nil {
				t.Fatal(err)
			}
			walk = append(walk, j.Status)
		}
		if strings.Join(walk, " ") != "pending running done" {
			t.Fatalf("job-%d went %v", i, walk)
		}
	}
}
