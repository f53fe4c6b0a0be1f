package placement

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/pgtest"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
	"github.com/handoff-run/handoff/store/storetest"
)

// slots bounds the pairs of test databases in use at once (the
// conformance suite runs in parallel), so their connections fit
// PostgreSQL's max_connections.
var slots = make(chan struct{}, 3)

// freshPair creates two empty databases for one test.
func freshPair(t testing.TB) []string {
	t.Helper()
	pgtest.Need(t)
	slots <- struct{}{}
	t.Cleanup(func() { <-slots })
	return []string{pgtest.Fresh(t, 6), pgtest.Fresh(t, 6)}
}

func openRouter(t testing.TB, urls []string) *Router {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := Open(ctx, urls)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return r
}

// newApp creates the app "owner/name", and its owner if missing.
func newApp(t testing.TB, r *Router, ref string) *store.App {
	t.Helper()
	ctx := context.Background()
	owner, name, _ := strings.Cut(ref, "/")
	if err := r.CreateUser(ctx, store.User{Name: owner, Created: time.Now()}); err != nil && !errors.Is(err, store.ErrExists) {
		t.Fatal(err)
	}
	a, err := r.CreateApp(ctx, store.App{Owner: owner, Name: name, Created: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestConformance runs the store suite on a router over two databases:
// its apps land on both.
func TestConformance(t *testing.T) {
	pgtest.Need(t)
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) func() store.Store {
			urls := freshPair(t)
			return func() store.Store { return openRouter(t, urls) }
		},
	})
}

// TestNewAppsSpread: new apps go to the database with the fewest, and
// their data lives only there.
func TestNewAppsSpread(t *testing.T) {
	urls := freshPair(t)
	r := openRouter(t, urls)
	defer r.Close()
	ctx := context.Background()
	for _, name := range []string{"a", "b", "c", "d"} {
		a := newApp(t, r, "alice/"+name)
		if _, err := r.Commit(ctx, &store.Write{AppID: a.ID, DB: "jobs", ID: "j1", Rev: "1-a",
			Body: []byte(`{"status":"pending"}`), Path: "http", Time: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	placed, err := r.Placed(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(placed[0]) != 2 || len(placed[1]) != 2 {
		t.Fatalf("placed = %v, want two apps in each database", placed)
	}
	for db, apps := range placed {
		for _, app := range apps {
			for other, st := range r.dbs {
				d, err := st.Get(ctx, app, "jobs", "j1")
				if err != nil {
					t.Fatal(err)
				}
				if (d != nil) != (other == db) {
					t.Errorf("app %d placed in %d: its document in database %d = %v", app, db, other, d)
				}
			}
		}
	}
	if apps, err := r.Apps(ctx); err != nil || len(apps) != 4 {
		t.Fatalf("Apps = %v, %v; want the four, from home", apps, err)
	}
	// A node given only the first database would not find half the apps.
	if n, err := Spread(ctx, urls[0]); err != nil || n != 2 {
		t.Fatalf("Spread = %d, %v; want 2", n, err)
	}
	if one, err := Open(ctx, urls[:1]); err == nil || !strings.Contains(err.Error(), "pass every --postgres URL") {
		if one != nil {
			one.Close()
		}
		t.Fatalf("a router over the first database only: %v; want a refusal that says to pass every URL", err)
	}
}

// TestTablesClassified: every table keyed by app is either the app's data
// (moved with it) or its identity (kept home), so a table added to the
// schema is not forgotten by moves.
func TestTablesClassified(t *testing.T) {
	r := openRouter(t, freshPair(t))
	defer r.Close()
	tables, err := r.dbs[0].AppTables(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if !slices.Contains(postgres.DataTables, tb) && !slices.Contains(postgres.IdentityTables, tb) &&
			tb != "placement_fence" && tb != "placements" {
			t.Errorf("table %s has an app_id but is in neither postgres.DataTables nor postgres.IdentityTables: add it to one", tb)
		}
	}
}
