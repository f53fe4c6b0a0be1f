package engine_test

import (
	"os"
	"testing"

	"github.com/handoff-run/handoff/internal/pgtest/pgstore"
)

// TestMain keeps the PostgreSQL tests' databases for reuse (pgtest.Main).
func TestMain(m *testing.M) { os.Exit(pgstore.Main(m)) }
