// Package sqlite is handoff's embedded store: one SQLite file in WAL mode
// with synchronous=FULL, so an acknowledged write survives a crash. All
// writes go through one writer goroutine that batches whatever is queued
// into one transaction (group commit): 32 concurrent writers pay for one
// fsync, not 32.
package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	_ "modernc.org/sqlite" // the pure-Go SQLite driver

	"github.com/handoff-run/handoff/store"
)

// FileName is the database file inside the data directory.
const FileName = "handoff.db"

// Store is a store.Store on one SQLite file.
type Store struct {
	path string
	wdb  *sql.DB // one connection, owned by the writer
	rdb  *sql.DB // a pool of read-only connections

	writes  chan *commitReq
	stop    chan struct{}
	stopped chan struct{}
	closeMu sync.RWMutex
	closed  bool

	reads   readStmts
	indexes sync.Map // field -> struct{}: expression indexes that exist
	leases  leases
	ticks   tickLeases
	watch   watchers
	heads   heads
	recent  recentEvents
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the store in the data directory dir.
func Open(dir string) (*Store, error) { return openSync(dir, "FULL") }

// OpenUnsynced opens the store without waiting for the disk at each
// commit (synchronous=OFF): a crash of the machine may lose the last
// commits. It is for stores that live only as long as a test of an app
// on the virtual clock, where waiting for the disk would be most of the
// run.
func OpenUnsynced(dir string) (*Store, error) { return openSync(dir, "OFF") }

func openSync(dir, synchronous string) (*Store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, FileName)
	dsn := "file:" + path + "?_pragma=journal_mode(WAL)&_pragma=synchronous(" + synchronous + ")" +
		"&_pragma=busy_timeout(10000)&_pragma=foreign_keys(ON)&_pragma=cache_size(-65536)&_txlock=immediate"
	wdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	wdb.SetMaxOpenConns(1)
	wdb.SetMaxIdleConns(1)
	wdb.SetConnMaxLifetime(0)
	if err := migrate(wdb); err != nil {
		wdb.Close()
		return nil, fmt.Errorf("prepare %s: %w", path, err)
	}
	rdb, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=query_only(ON)")
	if err != nil {
		wdb.Close()
		return nil, fmt.Errorf("open %s for reading: %w", path, err)
	}
	n := max(4, 2*runtime.GOMAXPROCS(0))
	rdb.SetMaxOpenConns(n)
	rdb.SetMaxIdleConns(n)
	s := &Store{
		path: path, wdb: wdb, rdb: rdb,
		writes:  make(chan *commitReq, 1024),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	if err := s.reads.prepare(rdb); err != nil {
		s.wdb.Close()
		s.rdb.Close()
		return nil, err
	}
	if err := s.loadIndexes(); err != nil {
		s.wdb.Close()
		s.rdb.Close()
		return nil, err
	}
	if s.leases.runs, err = openRuns(wdb, path+runsSuffix); err != nil {
		s.wdb.Close()
		s.rdb.Close()
		return nil, fmt.Errorf("recover the onChange runs of %s: %w", path, err)
	}
	w, err := newWriter(wdb)
	if err != nil {
		s.leases.runs.close()
		s.wdb.Close()
		s.rdb.Close()
		return nil, err
	}
	w.watchers = &s.watch
	w.heads = &s.heads
	w.recent = &s.recent
	go w.run(s.writes, s.stop, s.stopped)
	return s, nil
}

// Path is the database file.
func (s *Store) Path() string { return s.path }

// Close waits for queued writes to commit, then closes the file.
func (s *Store) Close() error {
	s.closeMu.Lock()
	if s.closed {
		s.closeMu.Unlock()
		return nil
	}
	s.closed = true
	close(s.stop)
	s.closeMu.Unlock()
	<-s.stopped
	s.reads.close()
	// The runs file keeps the runs that never settled: on the next open
	// they count, as after a crash.
	return errors.Join(s.leases.runs.close(), s.rdb.Close(), s.wdb.Close())
}

var errClosed = errors.New("sqlite store is closed")

// Watch registers fn to hear of every commit; see store.Store.
func (s *Store) Watch(fn func(appID, seq int64)) { s.watch.add(fn) }

// WatchGrants registers fn to hear, before Watch's callbacks, of each
// commit that changed an app's live grants; see store.GrantWatcher.
func (s *Store) WatchGrants(fn func(appID int64)) { s.watch.addGrants(fn) }

// Capabilities: one process uses the file, so it needs no cross-node app
// watch or nonces, and reading a head is no round trip worth a hint.
func (s *Store) Capabilities() store.Capabilities { return store.Capabilities{Grants: s} }
