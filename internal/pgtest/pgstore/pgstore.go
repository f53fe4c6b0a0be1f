// Package pgstore is pgtest for the tests of packages above the
// PostgreSQL store: their test databases come with the store's schema.
// (pgtest itself cannot import the store, whose own tests use it.)
package pgstore

import (
	"context"
	"testing"

	"github.com/handoff-run/handoff/internal/pgtest"
	"github.com/handoff-run/handoff/store/postgres"
)

// Main is pgtest.Main with Schema:
//
//	func TestMain(m *testing.M) { os.Exit(pgstore.Main(m)) }
func Main(m *testing.M) int { return pgtest.Main(m, Schema) }

// Schema gives an empty database the store's schema, as the first server
// started on it would.
func Schema(ctx context.Context, url string) error {
	st, err := postgres.Open(ctx, url)
	if err != nil {
		return err
	}
	return st.Close()
}
