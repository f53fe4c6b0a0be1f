package placement

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/handoff-run/handoff"
	"github.com/handoff-run/handoff/clock"
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
