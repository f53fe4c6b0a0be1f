package placement

import (
	"context"
	"os"
	"testing"

	"github.com/handoff-run/handoff/internal/pgtest"
)

// TestMain keeps the tests' databases for reuse (pgtest.Main), each
// prepared as a router's only database: the store's schema, the fence
// and the placements table (which a database other than the first
// holds unused).
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, routerSchema)) }

func routerSchema(ctx context.Context, url string) error {
	r, err := Open(ctx, []string{url})
	if err != nil {
		return err
	}
	return r.Close()
}
