// Package placement spreads apps over several PostgreSQL databases. Apps
// share nothing in the store but their identity, so each app's data (its
// ledger, heads, outbox, ticks, logs and code) lives in one database, its
// placement, while users, tokens, devices, apps, members, secrets and
// visitors stay in the first database, home. A Router is the store.Store
// the engine sees: it sends each call about an app's data to the app's
// database and every other call home, and it moves an app from one
// database to another (Move).
//
// The placements table in home maps each app to its database; an app
// without a row lives in home, so a single database needs no migration.
// Every node caches the map and drops an app's entry when told the app
// changed (store.AppWatcher); a database refuses the writes of an app
// not placed in it (postgres.Store.Fence), so a node that has not heard
// yet of a move retries instead of writing where nobody reads.
package placement

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
)

// WriteWait is how long a write waits for a move of its app to end
// before it is refused as unavailable, to retry.
var WriteWait = 3 * time.Second

// schema is the placements table in home. moving_to is set while a move
// copies the app; moved_from after the switch, until the database the
// app left is emptied of it.
const schema = `CREATE TABLE IF NOT EXISTS placements (
	app_id     int8 PRIMARY KEY,
	db         int4 NOT NULL,
	moving_to  int4,
	moved_from int4
)`

// place is where an app lives; -1 for none in the move fields.
type place struct{ db, movingTo, movedFrom int }

// Router is a store.Store over several PostgreSQL databases.
type Router struct {
	dbs  []*postgres.Store // dbs[0] is home
	pool *pgxpool.Pool     // home, for the placements table

	mu     sync.RWMutex
	places map[int64]place
	gen    uint64 // moves on every forget, so a lookup racing one is not cached

	// refused counts the writes a database refused because their app
	// moved, each then tried again.
	refused atomic.Int64
}

var (
	_ store.Store        = (*Router)(nil)
	_ store.GrantWatcher = (*Router)(nil)
	_ store.AppWatcher   = (*Router)(nil)
	_ store.NonceKeeper  = (*Router)(nil)
	_ store.HeadHinter   = (*Router)(nil)
)

// Open opens the databases at urls, the first one home, and the
// placements table in it. The order of urls numbers the databases, as
// Move and the placements table name them: keep it, and add new ones at
// the end.
func Open(ctx context.Context, urls []string) (*Router, error) {
	if len(urls) == 0 {
		return nil, errors.New("no database given: pass at least one PostgreSQL URL")
	}
	r := &Router{places: map[int64]place{}}
	fail := func(err error) (*Router, error) {
		r.Close()
		return nil, err
	}
	for i, u := range urls {
		st, err := postgres.Open(ctx, u)
		if err != nil {
			return fail(fmt.Errorf("database %d: %w", i, err))
		}
		if i > 0 {
			st.ShareNode(r.dbs[0])
		}
		r.dbs = append(r.dbs, st)
		if err := st.PreparePlacement(ctx); err != nil {
			return fail(fmt.Errorf("prepare database %d (%s) for placement: %w", i, postgres.Redact(u), err))
		}
		// First of all the app watchers: a node forgets where an app
		// lives before its caches of the app are reloaded.
		st.WatchApps(r.forget)
	}
	cfg, err := pgxpool.ParseConfig(urls[0])
	if err != nil {
		return fail(err)
	}
	cfg.MaxConns = 4
	if r.pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return fail(err)
	}
	if n, err := spread(ctx, r.pool); err != nil {
		return fail(err)
	} else if n > len(urls) {
		return fail(fmt.Errorf("the apps of %s are spread over %d databases, and %d were given: pass every --postgres URL, in the same order as the other nodes", postgres.Redact(urls[0]), n, len(urls)))
	}
	if _, err := r.pool.Exec(ctx, schema); err != nil {
		return fail(fmt.Errorf("create the placements table in %s: %w", postgres.Redact(urls[0]), err))
	}
	return r, nil
}

// Node is the name of this process's leases in every database.
func (r *Router) Node() string { return r.dbs[0].Node() }

// Close closes every database.
func (r *Router) Close() error {
	var first error
	for _, st := range r.dbs {
		if err := st.Close(); err != nil && first == nil {
			first = err
		}
	}
	if r.pool != nil {
		r.pool.Close()
	}
	return first
}

func (r *Router) forget(app int64) {
	r.mu.Lock()
	delete(r.places, app)
	r.gen++
	r.mu.Unlock()
}

// lookup says where app lives, from the cache or from home.
func (r *Router) lookup(ctx context.Context, app int64) (place, error) {
	r.mu.RLock()
	p, ok := r.places[app]
	gen := r.gen
	r.mu.RUnlock()
	if ok {
		return p, nil
	}
	p, err := r.read(ctx, r.pool, app)
	if err != nil {
		return p, err
	}
	r.mu.Lock()
	if r.gen == gen {
		r.places[app] = p
	}
	r.mu.Unlock()
	return p, nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func (r *Router) read(ctx context.Context, q querier, app int64) (place, error) {
	p := place{movingTo: -1, movedFrom: -1}
	err := q.QueryRow(ctx, `SELECT db, coalesce(moving_to, -1), coalesce(moved_from, -1) FROM placements WHERE app_id = $1`, app).
		Scan(&p.db, &p.movingTo, &p.movedFrom)
	if errors.Is(err, pgx.ErrNoRows) {
		return place{db: 0, movingTo: -1, movedFrom: -1}, nil
	}
	if err != nil {
		return p, err
	}
	if p.db < 0 || p.db >= len(r.dbs) {
		return p, fmt.Errorf("app %d lives in database %d, but only %d were given: start every node with the same --postgres URLs, in the same order", app, p.db, len(r.dbs))
	}
	return p, nil
}

// Where is the number of the database app lives in.
func (r *Router) Where(ctx context.Context, app int64) (int, error) {
	p, err := r.lookup(ctx, app)
	return p.db, err
}

// data is the store of app's data.
func (r *Router) data(ctx context.Context, app int64) (*postgres.Store, error) {
	p, err := r.lookup(ctx, app)
	if err != nil {
		return nil, err
	}
	return r.dbs[p.db], nil
}

// write runs fn on app's database; a write its database refuses because
// the app moves (or moved) is tried again where the app lives, for up to
// WriteWait.
func write[T any](ctx context.Context, r *Router, app int64, fn func(*postgres.Store) (T, error)) (T, error) {
	deadline := time.Now().Add(WriteWait)
	pause := 2 * time.Millisecond
	for {
		st, err := r.data(ctx, app)
		if err != nil {
			var zero T
			return zero, err
		}
		v, err := fn(st)
		if errors.Is(err, store.ErrHeadMoved) && r.movedFrom(ctx, app, st) {
			continue // the head was looked for where the app no longer is
		}
		// A write of a node not told of a move yet may also deadlock
		// with the move's copy or deletion of the app's rows.
		if !postgres.Fenced(err) && !postgres.LostDeadlock(err) {
			return v, err
		}
		r.refused.Add(1)
		r.forget(app)
		if time.Now().After(deadline) {
			return v, errs.New(errs.Unavailable, "app is moving to another database; retry in a moment")
		}
		select {
		case <-ctx.Done():
			return v, ctx.Err()
		case <-time.After(pause):
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// movedFrom reports whether app lives elsewhere than st by home's word:
// a node that has not heard of a move yet finds no head in the database
// the app left, and refuses the write before the fence would.
func (r *Router) movedFrom(ctx context.Context, app int64, st *postgres.Store) bool {
	p, err := r.read(ctx, r.pool, app)
	if err != nil || r.dbs[p.db] == st {
		return false
	}
	r.forget(app)
	return true
}

// CreateApp creates the app in home and places it in the database with
// the fewest apps, before anyone can write to it.
func (r *Router) CreateApp(ctx context.Context, a store.App) (*store.App, error) {
	created, err := r.dbs[0].CreateApp(ctx, a)
	if err != nil || len(r.dbs) == 1 {
		return created, err
	}
	n, err := r.emptiest(ctx, created.ID)
	if err != nil {
		return nil, err
	}
	if n != 0 {
		// Fenced at home first: a node that looks the app up before its
		// row is written takes it for one of home's, and its writes must
		// wait for the row rather than land there.
		if err := r.dbs[0].DropAppData(ctx, created.ID); err != nil {
			return nil, err
		}
		if err := r.dbs[n].AdoptApp(ctx, *created); err != nil {
			return nil, fmt.Errorf("place app %d in database %d: %w", created.ID, n, err)
		}
		if err := r.dbs[n].Unfence(ctx, created.ID); err != nil {
			return nil, err
		}
	}
	if _, err := r.pool.Exec(ctx, `INSERT INTO placements (app_id, db) VALUES ($1, $2)`, created.ID, n); err != nil {
		return nil, fmt.Errorf("place app %d: %w", created.ID, err)
	}
	r.forget(created.ID)
	if n != 0 {
		// A node that looked the app up before its row was written
		// took it for one of home's.
		if err := r.dbs[0].TouchApp(ctx, created.ID); err != nil {
			return nil, err
		}
	}
	return created, nil
}

// emptiest is the database with the fewest apps (but app), home on a tie.
func (r *Router) emptiest(ctx context.Context, app int64) (int, error) {
	counts := make([]int64, len(r.dbs))
	rows, err := r.pool.Query(ctx, `SELECT coalesce(p.db, 0), count(*) FROM apps a
		LEFT JOIN placements p ON p.app_id = a.id WHERE a.id <> $1 GROUP BY 1`, app)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var db int
		var n int64
		if err := rows.Scan(&db, &n); err != nil {
			return 0, err
		}
		if db >= 0 && db < len(counts) {
			counts[db] = n
		}
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	best := 0
	for i, n := range counts {
		if n < counts[best] {
			best = i
		}
	}
	return best, nil
}

// Placed lists the app ids placed in each database, for operators and
// tests.
func (r *Router) Placed(ctx context.Context) ([][]int64, error) {
	out := make([][]int64, len(r.dbs))
	rows, err := r.pool.Query(ctx, `SELECT a.id, coalesce(p.db, 0) FROM apps a
		LEFT JOIN placements p ON p.app_id = a.id ORDER BY a.id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var db int
		if err := rows.Scan(&id, &db); err != nil {
			return nil, err
		}
		if db >= 0 && db < len(out) {
			out[db] = append(out[db], id)
		}
	}
	return out, rows.Err()
}

// Spread is how many databases the apps of the database at url are
// spread over, by its placements table: 1 without one. A node given
// fewer URLs would not find some apps.
func Spread(ctx context.Context, url string) (int, error) {
	cfg, err := pgxpool.ParseConfig(url) // it knows the pool's settings in the URL
	if err != nil {
		return 0, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return 0, fmt.Errorf("connect to %s: %w", postgres.Redact(url), err)
	}
	defer conn.Close(ctx)
	return spread(ctx, conn)
}

func spread(ctx context.Context, q querier) (int, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass('placements') IS NOT NULL`).Scan(&exists); err != nil || !exists {
		return 1, err
	}
	var n int
	err := q.QueryRow(ctx, `SELECT 1 + coalesce(max(greatest(db, coalesce(moving_to, 0), coalesce(moved_from, 0))), 0) FROM placements`).Scan(&n)
	return n, err
}
