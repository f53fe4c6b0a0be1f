// Package pgtest gives tests a PostgreSQL database of their own. Without
// a reachable server the tests skip and say how to enable them; under CI
// (the CI environment variable set) they fail instead, because there the
// PostgreSQL suite must run.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	return baseURL
}

// Fresh creates an empty database for one test, drops it when the test
// ends, and returns its URL with a pool of at most maxConns connections.
func Fresh(t testing.TB, maxConns int) string {
	t.Helper()
	base := Need(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "handoff_test_" + hex.EncodeToString(b[:])
	admin := func(sql string) error {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return err
		}
		defer conn.Close(ctx)
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := admin(`CREATE DATABASE ` + name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := admin(`DROP DATABASE IF EXISTS ` + name + ` WITH (FORCE)`); err != nil {
			t.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("HANDOFF_TEST_POSTGRES must be a postgres:// URL: %v", err)
	}
	u.Path = "/" + name
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
