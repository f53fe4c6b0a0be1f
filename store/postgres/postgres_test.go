package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/storetest"
)

// defaultTestURL is where the tests look for PostgreSQL unless
// HANDOFF_TEST_POSTGRES says otherwise. Each test creates a database of
// its own from there and drops it afterwards.
const defaultTestURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

var (
	baseOnce sync.Once
	baseURL  string
	baseErr  error
)

// needPostgres returns the URL of the database to create test databases
// from, or skips the test when PostgreSQL is not reachable (fails under
// CI, where the suite must run).
func needPostgres(t testing.TB) string {
	t.Helper()
	baseOnce.Do(func() {
		baseURL = os.Getenv("HANDOFF_TEST_POSTGRES")
		if baseURL == "" {
			baseURL = defaultTestURL
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
		msg := "PostgreSQL is not reachable at " + Redact(baseURL) + ": " + baseErr.Error() +
			"; start it, or set HANDOFF_TEST_POSTGRES=postgres://USER@HOST:PORT/DB?sslmode=disable (a role that may CREATE DATABASE)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return baseURL
}

// freshDB creates an empty database for one test, drops it when the test
// ends, and returns its URL.
func freshDB(t testing.TB) string {
	t.Helper()
	base := needPostgres(t)
	dbSlots <- struct{}{}
	t.Cleanup(func() { <-dbSlots })
	var b [6]byte
	rand.Read(b[:])
	name := "handoff_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	admin := func(sql string) error {
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
	// Parallel tests must fit max_connections together.
	q := u.Query()
	q.Set("pool_max_conns", "8")
	u.RawQuery = q.Encode()
	return u.String()
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
	needPostgres(t)
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) func() store.Store {
			dbURL := freshDB(t)
			return func() store.Store { return openAt(t, dbURL) }
		},
	})
}
