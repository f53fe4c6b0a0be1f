package server

import (
	"os"
	"testing"

	"github.com/handoff-run/handoff/internal/pgtest/pgstore"
)

// TestMain keeps the PostgreSQL tests' databases for reuse (pgtest.Main)
// and ends the Chromium the browser tests share.
func TestMain(m *testing.M) {
	code := pgstore.Main(m)
	closeChromium()
	os.Exit(code)
}
