package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoff-run/handoff/internal/placement"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
	"github.com/handoff-run/handoff/store/sqlite"
)

// Store names reported in JobsResult.Store.
const (
	StoreSQLite   = "sqlite"
	StorePostgres = "postgres"
)

// ErrStore marks a run that failed because its store could not be set
// up (a PostgreSQL server out of reach, a role without CREATEDB).
var ErrStore = errors.New("cannot set up the store")

// ErrEarlierRun marks a database given to run in that already holds a
// bench run (JobsOptions.PostgresDB).
var ErrEarlierRun = errors.New("the database already holds a bench run")

// openStore opens the fresh durable store a run measures: a PostgreSQL
// database made for the run when o.Postgres is set, else SQLite in o.Dir
// or a temporary directory. cleanup closes it and removes what it made.
func openStore(ctx context.Context, o JobsOptions) (st store.Store, name string, cleanup func(), err error) {
	defer func() {
		if err != nil && !errors.Is(err, ErrEarlierRun) {
			err = fmt.Errorf("%w: %w", ErrStore, err)
		}
	}()
	if o.Databases > 1 {
		return openPlaced(ctx, o)
	}
	if o.Postgres != "" {
		dbURL, drop, err := "", func() {}, error(nil)
		if o.PostgresDB != "" {
			if err := postgres.CheckURL(o.Postgres); err != nil {
				return nil, "", nil, fmt.Errorf("postgres URL: %w", err)
			}
			dbURL = withDatabase(o.Postgres, o.PostgresDB)
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "  database %s on %s, left in place\n", o.PostgresDB, postgres.Redact(o.Postgres))
			}
		} else {
			if dbURL, drop, err = freshPostgres(ctx, o.Postgres); err != nil {
				return nil, "", nil, err
			}
			if o.Progress != nil {
				fmt.Fprintf(o.Progress, "  database %s on %s, dropped at the end\n", dbName(dbURL), postgres.Redact(o.Postgres))
			}
		}
		pg, err := postgres.Open(ctx, dbURL)
		if err != nil {
			drop()
			return nil, "", nil, err
		}
		if o.PostgresDB != "" {
			if err := noEarlierRun(ctx, pg, o.PostgresDB); err != nil {
				pg.Close()
				return nil, "", nil, err
			}
		}
		return pg, StorePostgres, func() { pg.Close(); drop() }, nil
	}
	dir, rm := o.Dir, func() {}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "handoff-bench-")
		if err != nil {
			return nil, "", nil, err
		}
		dir, rm = tmp, func() { os.RemoveAll(tmp) }
	}
	sq, err := sqlite.Open(dir)
	if err != nil {
		rm()
		return nil, "", nil, err
	}
	return sq, StoreSQLite, func() { sq.Close(); rm() }, nil
}

// noEarlierRun refuses a database that already holds a bench run: its
// jobs would be counted with the new ones.
func noEarlierRun(ctx context.Context, st store.Store, db string) error {
	apps, err := st.Apps(ctx)
	if err != nil {
		return err
	}
	for _, a := range apps {
		if ref := a.Owner + "/" + a.Name; strings.HasPrefix(ref, jobsApp) {
			return fmt.Errorf("%w: database %s has app %s; give an empty database, or leave the database out for a fresh one", ErrEarlierRun, db, ref)
		}
	}
	return nil
}

// freshPostgres creates an empty database, named uniquely, on the server
// of base (a postgres:// URL or a libpq connection string), so a run
// starts from nothing and never touches existing data. It returns the
// new database's URL and a function that drops it.
func freshPostgres(ctx context.Context, base string) (string, func(), error) {
	if err := postgres.CheckURL(base); err != nil {
		return "", nil, fmt.Errorf("postgres URL: %w", err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "handoff_bench_" + hex.EncodeToString(b[:])
	admin := func(ctx context.Context, sql string) error {
		// Through the pool's parser, which takes the pool_* settings a
		// serve URL may carry out of what the server is sent.
		cfg, err := pgxpool.ParseConfig(base)
		if err != nil {
			return err
		}
		conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, sql)
		return err
	}
	if err := admin(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, fmt.Errorf("create database %s on %s: %w", name, postgres.Redact(base), err)
	}
	drop := func() {
		// The run's own context may be over: dropping must still happen.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := admin(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "bench: could not drop database %s: %v; drop it with DROP DATABASE %s\n", name, err, name)
		}
	}
	return withDatabase(base, name), drop, nil
}

// withDatabase returns base pointing at database name.
func withDatabase(base, name string) string {
	if u, err := url.Parse(base); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + name
		return u.String()
	}
	// A libpq key=value string: a later key overrides an earlier one.
	return base + " dbname=" + name
}

// dbName is the database a connection string names.
func dbName(conn string) string {
	cfg, err := pgx.ParseConfig(conn)
	if err != nil {
		return "?"
	}
	return cfg.Database
}

// openPlaced opens a router over o.Databases fresh databases, dropped at
// the end.
func openPlaced(ctx context.Context, o JobsOptions) (store.Store, string, func(), error) {
	var urls []string
	var drops []func()
	dropAll := func() {
		for _, d := range drops {
			d()
		}
	}
	for range o.Databases {
		u, drop, err := freshPostgres(ctx, o.Postgres)
		if err != nil {
			dropAll()
			return nil, "", nil, err
		}
		urls, drops = append(urls, u), append(drops, drop)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "  database %s on %s, dropped at the end\n", dbName(u), postgres.Redact(o.Postgres))
		}
	}
	r, err := placement.Open(ctx, urls)
	if err != nil {
		dropAll()
		return nil, "", nil, err
	}
	return r, StorePostgres, func() { r.Close(); dropAll() }, nil
}
