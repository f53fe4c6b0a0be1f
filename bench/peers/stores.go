package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "modernc.org/sqlite" // registers "sqlite" for database/sql
)

// The stores a round runs on.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// DefaultPostgres is the server the rounds use unless told otherwise: the
// one the project's PostgreSQL tests use.
const DefaultPostgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// errNoPostgres marks a round that could not reach PostgreSQL.
var errNoPostgres = errors.New("PostgreSQL is out of reach")

// sqliteDSN opens path with the settings of handoff's embedded store:
// WAL, every commit fsynced (synchronous=FULL), writers that wait rather
// than fail, and transactions that take the write lock when they begin.
func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)" +
		"&_pragma=busy_timeout(10000)&_pragma=cache_size(-65536)&_txlock=immediate"
}

// openSQLite opens a fresh database in a temporary directory, with a
// pool of conns connections. River asks for one on SQLite: its services
// run at once, and a second connection may get SQLITE_BUSY.
func openSQLite(conns int) (*sql.DB, func(), error) {
	dir, err := os.MkdirTemp("", "peers-river-")
	if err != nil {
		return nil, nil, err
	}
	db, err := sql.Open("sqlite", sqliteDSN(filepath.Join(dir, "river.db")))
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, err
	}
	db.SetMaxOpenConns(conns)
	return db, func() { db.Close(); os.RemoveAll(dir) }, nil
}

// freshDatabase creates an empty database named prefix plus a random
// suffix on the server of base, and returns its URL and a function that
// drops it.
func freshDatabase(ctx context.Context, base, prefix string) (string, func(), error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "", nil, fmt.Errorf("%q is not a postgres://USER@HOST:PORT/DB URL", base)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := prefix + hex.EncodeToString(b[:])
	exec := func(ctx context.Context, stmt string) error {
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return fmt.Errorf("%w at %s: %w", errNoPostgres, u.Host, err)
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, stmt)
		return err
	}
	if err := exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, err
	}
	drop := func() {
		// The round's context may be over; the database must go anyway.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "peers: could not drop database %s: %v\n", name, err)
		}
	}
	u.Path = "/" + name
	return u.String(), drop, nil
}

// openPostgres makes a fresh database and a pool of maxConns on it.
func openPostgres(ctx context.Context, base string, maxConns int) (*pgxpool.Pool, func(), error) {
	dbURL, drop, err := freshDatabase(ctx, base, "river_bench_")
	if err != nil {
		return nil, nil, err
	}
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		drop()
		return nil, nil, err
	}
	cfg.MaxConns = int32(maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		drop()
		return nil, nil, err
	}
	var fsync string
	if err := pool.QueryRow(ctx, "SHOW fsync").Scan(&fsync); err == nil && fsync != "on" {
		fmt.Fprintln(os.Stderr, "peers: warning: the server runs with fsync off; its numbers are not durable ones")
	}
	return pool, func() { pool.Close(); drop() }, nil
}
