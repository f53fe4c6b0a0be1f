package postgres

import (
	"context"
	"os"
	"testing"

	"github.com/handoff-run/handoff/internal/pgtest"
)

// TestMain keeps the tests' databases for reuse (pgtest.Main).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, schemaOnly)) }

// schemaOnly gives a test database the store's schema.
func schemaOnly(ctx context.Context, url string) error {
	st, err := Open(ctx, url)
	if err != nil {
		return err
	}
	return st.Close()
}
