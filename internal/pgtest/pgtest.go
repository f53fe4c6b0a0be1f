// Package pgtest gives tests a PostgreSQL database of their own. Without
// a reachable server the tests skip and say how to enable them; under CI
// (the CI environment variable set) they fail instead, because there the
// PostgreSQL suite must run.
package pgtest

import (
	"context"
	"net/url"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultURL is where tests look for PostgreSQL unless
// HANDOFF_TEST_POSTGRES says otherwise.
const DefaultURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	baseOnce sync.Once
	baseURL  string
	baseErr  error
)

// Need returns the URL to create test databases from, or ends the test
// when PostgreSQL is not reachable: a skip on a laptop, a failure in CI.
// The first call of a process may wait for a share of the server
// (share.go), so a test starts its deadlines after it, and after Fresh.
func Need(t testing.TB) string {
	t.Helper()
	baseOnce.Do(func() {
		baseURL = os.Getenv("HANDOFF_TEST_POSTGRES")
		if baseURL == "" {
			baseURL = DefaultURL
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, baseURL)
		if err != nil {
			baseErr = err
			return
		}
		conn.Close(ctx)
	})
	if baseErr != nil {
		msg := "PostgreSQL is not reachable at " + redact(baseURL) + ": " + baseErr.Error() +
			"; start it, or set HANDOFF_TEST_POSTGRES=postgres://USER@HOST:PORT/DB?sslmode=disable (a role that may CREATE DATABASE)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	if err := takeShare(t, baseURL); err != nil {
		t.Fatalf("taking this test process's share of PostgreSQL's connections at %s: %v; check that the server accepts connections", redact(baseURL), err)
	}
	return baseURL
}

// Fresh gives one test a database with no rows in it, and returns its URL
// with a pool of at most maxConns connections. Under Main it holds the
// schema Main's prepare makes (made for this test or kept from an
// earlier one); otherwise it is empty, and dropped when the test ends.
func Fresh(t testing.TB, maxConns int) string {
	t.Helper()
	return lend(t, maxConns, take, give)
}

// Empty creates an empty database for one test, even under Main (for
// tests of what prepares a schema), and drops it when the test ends.
func Empty(t testing.TB, maxConns int) string {
	t.Helper()
	return lend(t, maxConns, create, drop)
}

// lend gets a database for the test and puts it back when the test ends.
func lend(t testing.TB, maxConns int, get func(base string) (string, error), put func(base, name string) error) string {
	t.Helper()
	base := Need(t)
	name, err := get(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := put(base, name); err != nil {
			t.Error(err)
		}
	})
	u, err := url.Parse(dbURL(base, name))
	if err != nil {
		t.Fatalf("HANDOFF_TEST_POSTGRES must be a postgres:// URL: %v", err)
	}
	q := u.Query()
	q.Set("pool_max_conns", strconv.Itoa(maxConns))
	u.RawQuery = q.Encode()
	return u.String()
}

// redact hides a password in a URL for messages.
func redact(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(an unparseable URL)"
	}
	return u.Redacted()
}
