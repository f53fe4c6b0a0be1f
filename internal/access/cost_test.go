package access_test

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/sqlite"
)

// countingStore counts the grant rows the engine reads.
type countingStore struct {
	store.Store
	rows atomic.Int64
}

func (s *countingStore) GrantsFor(ctx context.Context, appID int64, user string) ([]store.Grant, error) {
	g, err := s.Store.GrantsFor(ctx, appID, user)
	s.rows.Add(int64(len(g)))
	return g, err
}

// The example grants "jobs" to public from every job. Queueing a job must
// not cost a read of every other job's grant: the cost of a write must
// not grow with the number of documents (BenchmarkPutWithAccess shows
// what it costs when it does).
func TestGrantLookupsDoNotGrowWithDocuments(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("../../examples/jobs/access.js")
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cs := &countingStore{Store: st}
	ctx := context.Background()
	e := engine.New(cs, engine.Options{Code: jsapp.New(jsapp.Options{})})
	if _, err := e.Bootstrap(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddUser(ctx, admin, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateApp(ctx, admin, "alice/jobs", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Deploy(ctx, alice, "alice/jobs", string(src), ""); err != nil {
		t.Fatal(err)
	}
	if err := e.SetAccessTimeout(ctx, alice, "alice/jobs", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	put := func(n int) {
		for range n {
			if _, err := e.Put(ctx, alice, "alice/jobs", "jobs", "", benchJob, appcode.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	put(400)
	before := cs.rows.Load()
	put(100)
	perWrite := float64(cs.rows.Load()-before) / 100
	t.Logf("grant rows read per write with 400-500 jobs: %.0f", perWrite)
	if perWrite > 10 {
		t.Fatalf("each write reads %.0f grant rows with 400-500 jobs: the cost of a write grows with the number of documents", perWrite)
	}
}
