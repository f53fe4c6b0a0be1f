// Package postgres is handoff's shared store: PostgreSQL through pgx, for
// running several `handoff serve` nodes on one database (docs/architecture.md, "Storage and the write path").
//
// Concurrent Commits of one app share a transaction (group commit: one
// goroutine per app takes every write waiting), and different apps share
// WAL flushes through PostgreSQL's own group commit; synchronous_commit
// stays on, so an acknowledged write survives a crash. Seqs come from one
// sequence per database, which no commit holds through its WAL flush, so
// the batches of an app on several nodes commit side by side; readers of
// the ledger read up to a horizon below which every seq handed out has
// ended (seqs.go), so none misses a commit.
//
// Everything several nodes must agree on lives in the database: event
// leases (claimed with FOR UPDATE SKIP LOCKED), scheduled-tick leases, and
// the schema version (migrations run under an advisory lock). Watch hears
// of every node's commits through LISTEN/NOTIFY, with polling as a safety
// net; WatchGrants and WatchApps hear the same way of grant and settings
// changes, so that every node's caches follow them.
package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoff-run/handoff/store"
)

// defaultMaxConns is each node's pool size unless the URL sets
// pool_max_conns.
const defaultMaxConns = 16

// Store is a store.Store on a PostgreSQL database.
type Store struct {
	pool *pgxpool.Pool
	// node names this Store in the database (event and tick leases), so
	// nodes sharing it tell their leases apart.
	node string

	indexes sync.Map // index name -> struct{}: field indexes known to exist
	dbs     sync.Map // dbKey -> struct{}: rows of dbs known to exist

	watch   *watcher
	commits committer
	acks    acker
	hints   hints
	// dues holds, per app, what a claim's look at events_due found when
	// nothing was due (dueMemo), for the NextEventDue that follows it and
	// the claims that the next commits' wake-ups make.
	dues dueMemos
	// dueLife is how long a memo in dues is used (dueMemoLife; tests set
	// it longer), and dueReads counts the looks at events_due.
	dueLife  time.Duration
	dueReads atomic.Int64
	// afterDueRead, set by tests, runs between a claim's look at
	// events_due and the memo it stores.
	afterDueRead func()
	// trustedCommits counts the batches that trusted their heads
	// (expect.go).
	trustedCommits atomic.Int64
	// pids holds the backend process ids of the pool's connections.
	pids *sync.Map
	// noncesSwept is when this node last deleted expired nonces (ns).
	noncesSwept atomic.Int64

	closeOnce sync.Once
	closeErr  error
}

var (
	_ store.Store        = (*Store)(nil)
	_ store.GrantWatcher = (*Store)(nil)
	_ store.AppWatcher   = (*Store)(nil)
	_ store.NonceKeeper  = (*Store)(nil)
	_ store.HeadHinter   = (*Store)(nil)
)

type dbKey struct {
	app int64
	db  string
}

// Open connects to the database at url (a postgres:// URL or a libpq
// connection string), brings its schema up to date and starts listening
// for commits. Several nodes may open the same database at once.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres URL: %w", err)
	}
	if !strings.Contains(url, "pool_max_conns") {
		// Concurrent commits share a WAL flush only if they run on
		// different connections at once; each node also keeps one for
		// LISTEN. Several nodes must fit PostgreSQL's max_connections
		// (100 by default): set pool_max_conns in the URL to change it.
		cfg.MaxConns = defaultMaxConns
	}
	// The backends of this node's pool, so the watcher tells this node's
	// own announcements from other nodes'.
	pids := &sync.Map{}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		pids.Store(c.PgConn().PID(), struct{}{})
		return nil
	}
	cfg.BeforeClose = func(c *pgx.Conn) { pids.Delete(c.PgConn().PID()) }
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", Redact(url), err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to %s: %w", Redact(url), err)
	}
	if err := migrate(ctx, pool); err != nil {
		pool.Close()
		return nil, fmt.Errorf("prepare the schema of %s: %w", Redact(url), err)
	}
	var id [8]byte
	rand.Read(id[:])
	s := &Store{pool: pool, node: hex.EncodeToString(id[:]), pids: pids,
		commits: committer{queues: map[int64][]*commitReq{}, running: map[int64]bool{}}}
	if err := s.loadIndexes(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	s.watch, err = startWatcher(ctx, s, cfg.ConnConfig.Copy())
	if err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

// CheckURL reports whether raw is a connection URL (or libpq string)
// that Open can use, without connecting.
func CheckURL(raw string) error {
	_, err := pgxpool.ParseConfig(raw)
	return err
}

// Redact returns url with its password, if any, replaced by "xxxxx", for
// messages and logs.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" {
		return "the database"
	}
	return u.Redacted()
}

// Node is this Store's name in the database: the owner of the event
// leases it claims, and what it passes to AcquireTick.
func (s *Store) Node() string { return s.node }

// Close waits for the queued commits, stops listening, hands back the
// event leases this Store still holds (their deliveries did not finish,
// so other nodes may take them at once) and closes the connections.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closeCommits()
		s.closeAcks()
		s.watch.stop()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := s.pool.Exec(ctx, `UPDATE events SET lease_until = 0, lease_owner = '' WHERE lease_owner = $1`, s.node)
		if err != nil {
			s.closeErr = fmt.Errorf("release event leases: %w", err)
		}
		s.pool.Close()
	})
	return s.closeErr
}

// Watch registers fn to hear of every commit, this node's and the
// others'; see store.Store.
func (s *Store) Watch(fn func(appID, seq int64)) { s.watch.add(fn) }

// WatchGrants registers fn to hear, before the Watch callbacks hear of
// the commit, of each commit of any node that changed an app's live
// grants; see store.GrantWatcher.
func (s *Store) WatchGrants(fn func(appID int64)) { s.watch.addGrants(fn) }

// WatchApps registers fn to hear of each change to an app's settings, by
// any node; see store.AppWatcher.
func (s *Store) WatchApps(fn func(appID int64)) { s.watch.addApps(fn) }

// Capabilities: several nodes share the database, so the store tells
// them of each other's app changes and nonces, and hints heads to save
// round trips.
func (s *Store) Capabilities() store.Capabilities {
	return store.Capabilities{Grants: s, Apps: s, Nonces: s, Heads: s, Revocations: s, CommitClaims: true, SharedTicks: true}
}

// asyncBatch starts a batch that runs as one transaction that does not
// wait for the WAL flush. Every statement of a batch before its one Sync
// runs in one implicit transaction, so the batch needs no BEGIN and
// COMMIT: two statements fewer a round trip. set_config rather than SET
// LOCAL, which would warn outside BEGIN.
func asyncBatch() *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue(sqlAsyncCommit)
	return b
}

const sqlAsyncCommit = `SELECT set_config('synchronous_commit', 'off', true)`

// pgCode is the SQLSTATE of a PostgreSQL error, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

const uniqueViolation = "23505"

func isUnique(err error) bool { return pgCode(err) == uniqueViolation }

// noRows reports a QueryRow that found nothing.
func noRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// fromNanos is the inverse of time.UnixNano, as the embedded store reads
// times back.
func fromNanos(n int64) time.Time { return time.Unix(0, n) }

// collect reads every row with fn; like the embedded store it returns nil,
// not an empty slice, when there are none.
func collect[T any](rows pgx.Rows, fn pgx.RowToFunc[T]) ([]T, error) {
	return pgx.AppendRows([]T(nil), rows, fn)
}

// limit passes n as a LIMIT; a negative n means no limit, as in SQLite.
func limit(n int) *int {
	if n < 0 {
		return nil
	}
	return &n
}
