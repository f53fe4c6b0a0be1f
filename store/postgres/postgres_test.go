package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/pgtest"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/storetest"
)

// needPostgres and freshDB: see internal/pgtest.
func needPostgres(t testing.TB) string { return pgtest.Need(t) }

// freshDB gives one test a database with the schema and no rows (see
// pgtest.Main); parallel tests take a
// slot each so their connections fit max_connections.
func freshDB(t testing.TB) string {
	t.Helper()
	pgtest.Need(t)
	dbSlots <- struct{}{}
	t.Cleanup(func() { <-dbSlots })
	return pgtest.Fresh(t, 8)
}

// emptyDB is freshDB without the schema.
func emptyDB(t testing.TB) string {
	t.Helper()
	pgtest.Need(t)
	dbSlots <- struct{}{}
	t.Cleanup(func() { <-dbSlots })
	return pgtest.Empty(t, 8)
}

// dbSlots bounds the test databases in use at once (the conformance
// suite runs its tests in parallel), so that their connections fit
// PostgreSQL's max_connections whatever -parallel is.
var dbSlots = make(chan struct{}, 6)

func openAt(t testing.TB, dbURL string) *Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := Open(ctx, dbURL)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return st
}

func TestConformance(t *testing.T) {
	t.Parallel()
	needPostgres(t)
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) func() store.Store {
			dbURL := freshDB(t)
			return func() store.Store { return openAt(t, dbURL) }
		},
	})
}
