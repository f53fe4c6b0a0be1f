package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/pgtest"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
)

// hinting is a store that gives one hint.
type hinting struct {
	store.Store
	doc *store.Doc
}

func (h hinting) HeadHint(appID int64, db, id string) *store.Doc { return h.doc }

func (h hinting) Capabilities() store.Capabilities { return store.Capabilities{Heads: h} }

// TestWatchStoreKeepsCapabilities: the bench's store passes on the
// capabilities of the store it wraps (head hints, grant watching), so the
// engine writes as it does under serve.
func TestWatchStoreKeepsCapabilities(t *testing.T) {
	d := &store.Doc{ID: "x", Rev: "1-a"}
	var s store.Store = &watchStore{Store: hinting{doc: d}}
	if h := s.Capabilities().Heads; h == nil || h.HeadHint(1, "jobs", "x") != d {
		t.Fatalf("the bench's store does not pass its store's hints")
	}
}

// TestJobsWork: with Work, each job's work takes that long, so a run
// cannot be done before one job's work is (and the result says so).
func TestJobsWork(t *testing.T) {
	for _, h := range []string{HandlersGo, HandlersJS} {
		res, err := Jobs(context.Background(), JobsOptions{Jobs: 3, Concurrency: 3, Work: 200 * time.Millisecond, Handlers: h})
		if err != nil {
			t.Fatalf("%s: %v", h, err)
		}
		if res.WorkSeconds != 0.2 || res.WallSeconds < 0.2 || res.Job.P50 < 200 {
			t.Errorf("%s: work %vs, wall %vs, pending→done p50 %v ms: the jobs did not work 200 ms each", h, res.WorkSeconds, res.WallSeconds, res.Job.P50)
		}
	}
}

// TestJobsOverApps: with Apps, job i goes to app i mod Apps and is done
// there exactly once; the ledger check reads each app's own jobs only, so
// a job put into the wrong app would count as not done.
func TestJobsOverApps(t *testing.T) {
	for _, h := range []string{HandlersGo, HandlersJS} {
		res, err := Jobs(context.Background(), JobsOptions{Jobs: 30, Concurrency: 4, Apps: 3, Handlers: h})
		if err != nil {
			t.Fatalf("%s: %v", h, err)
		}
		if res.Apps != 3 || res.Done != 30 || res.DoneTwice != 0 || res.NotDone != 0 || !res.OK {
			t.Errorf("%s: %d apps, %d done, %d twice, %d not done (ok %v); want 3 apps and 30 jobs done once", h, res.Apps, res.Done, res.DoneTwice, res.NotDone, res.OK)
		}
	}
}

// TestJobsInAGivenDatabase: with PostgresDB the run uses that database on
// the server, not a fresh one, and leaves it in place; a second run there
// is refused, since the first run's jobs would be counted with its own.
func TestJobsInAGivenDatabase(t *testing.T) {
	server := pgtest.Need(t)
	db := pgtest.Fresh(t, 4) // dropped when the test ends
	name := dbName(db)
	o := JobsOptions{Jobs: 20, Concurrency: 4, Handlers: HandlersGo, Postgres: server, PostgresDB: name}
	res, err := Jobs(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.Store != StorePostgres || res.Done != 20 || !res.OK {
		t.Fatalf("store %s, %d done (ok %v); want 20 done on PostgreSQL", res.Store, res.Done, res.OK)
	}
	st, err := postgres.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	apps, err := st.Apps(context.Background())
	st.Close()
	if err != nil || len(apps) == 0 {
		t.Fatalf("the run's database holds apps %v (%v); the run should have been left there", apps, err)
	}
	if _, err := Jobs(context.Background(), o); !errors.Is(err, ErrEarlierRun) {
		t.Fatalf("a second run in the same database = %v, want ErrEarlierRun", err)
	}
}
