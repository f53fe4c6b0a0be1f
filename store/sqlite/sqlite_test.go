package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	msqlite "modernc.org/sqlite"

	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/storetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) func() store.Store {
			dir := t.TempDir()
			return func() store.Store {
				st, err := Open(dir)
				if err != nil {
					t.Fatalf("Open(%s): %v", dir, err)
				}
				return st
			}
		},
	})
}

func open(t *testing.T, dir string) *Store {
	t.Helper()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newApp(t *testing.T, st *Store) int64 {
	t.Helper()
	ctx := context.Background()
	if err := st.CreateUser(ctx, store.User{Name: "alice", Created: time.Now()}); err != nil && !errors.Is(err, store.ErrExists) {
		t.Fatal(err)
	}
	a, err := st.CreateApp(ctx, store.App{Owner: "alice", Name: fmt.Sprint("app", time.Now().UnixNano()), Created: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	return a.ID
}

func put(app int64, db, id, body string) *store.Write {
	return &store.Write{AppID: app, DB: db, ID: id, Rev: "1-a", Body: []byte(body), Path: "http", Time: time.Now()}
}

// recordingConnector opens modernc connections that record the SQL text
// they prepare, so a test can explain exactly the query the store ran.
type recordingConnector struct {
	dsn string
	drv driver.Driver
	mu  sync.Mutex
	sql []string
}

func (c *recordingConnector) Connect(context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return recordingConn{conn, c}, nil
}

func (c *recordingConnector) Driver() driver.Driver { return c.drv }

func (c *recordingConnector) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.sql
	c.sql = nil
	return out
}

// recordingConn has only driver.Conn's methods, so database/sql prepares
// every query through it.
type recordingConn struct {
	driver.Conn
	c *recordingConnector
}

func (r recordingConn) Prepare(q string) (driver.Stmt, error) {
	r.c.mu.Lock()
	r.c.sql = append(r.c.sql, q)
	r.c.mu.Unlock()
	return r.Conn.Prepare(q)
}

// recordReads swaps the store's read pool for one that records the SQL
// of Query (the prepared reads keep the old pool).
func recordReads(t *testing.T, st *Store) *recordingConnector {
	t.Helper()
	c := &recordingConnector{
		dsn: "file:" + st.path + "?_pragma=busy_timeout(10000)&_pragma=query_only(ON)",
		drv: st.rdb.Driver(),
	}
	old := st.rdb
	st.rdb = sql.OpenDB(c)
	t.Cleanup(func() { old.Close() })
	return c
}

// explain runs EXPLAIN QUERY PLAN for q on a separate read-only
// connection to the file, with every parameter NULL (SQLite plans a
// prepared statement without its values).
func explain(t *testing.T, path, q string) string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	args := make([]any, strings.Count(q, "?"))
	rows, err := db.Query("EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// queryPlan runs a field query through the store and returns the plan of
// the SQL it ran.
func queryPlan(t *testing.T, st *Store, rec *recordingConnector, q store.Query) string {
	t.Helper()
	rec.take()
	if _, err := st.Query(context.Background(), q); err != nil {
		t.Fatal(err)
	}
	var ran []string
	for _, s := range rec.take() {
		if strings.Contains(s, "json_extract") || strings.Contains(s, "json_type") {
			ran = append(ran, s)
		}
	}
	if len(ran) != 1 {
		t.Fatalf("Query ran %d field queries, want 1: %q", len(ran), ran)
	}
	return explain(t, st.path, ran[0])
}

// TestQueryUsesFieldIndex checks docs/architecture.md, "Storage and the write path": a field query searches the
// field's expression index, by equality then id order, before and after a
// reopen, so its cost does not grow with the database.
func TestQueryUsesFieldIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := open(t, dir)
	app := newApp(t, st)
	var ws []*store.Write
	for i := range 200 {
		ws = append(ws, put(app, "jobs", fmt.Sprintf("d%03d", i),
			fmt.Sprintf(`{"status":"s%d","n":%d,"ok":%v,"lease":{"owner":"w%d"}}`, i%5, i%7, i%2 == 0, i%3)))
	}
	commitAll(t, st, ws)
	cases := []struct{ field, key string }{
		{"status", `"s1"`}, {"n", `3`}, {"n", `2.5`}, {"ok", `true`}, {"lease.owner", `"w1"`},
	}
	check := func(st *Store, when string) {
		t.Helper()
		rec := recordReads(t, st)
		for _, c := range cases {
			for _, after := range []string{"", "d100"} {
				plan := queryPlan(t, st, rec, store.Query{AppID: app, DB: "jobs", Field: c.field, Key: []byte(c.key), After: after, Limit: 7})
				idx := indexName(c.field)
				if !strings.Contains(plan, "USING INDEX "+idx) || !strings.HasPrefix(idx, "docs_field_") {
					t.Fatalf("%s: Query(%s = %s) does not search index %s: %s", when, c.field, c.key, idx, plan)
				}
				if strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "SCAN") {
					t.Fatalf("%s: Query(%s = %s) scans or sorts: %s", when, c.field, c.key, plan)
				}
			}
		}
	}
	check(st, "first use")
	indexes := func(st *Store) []string {
		rows, err := st.rdb.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND name LIKE 'docs_field_%' ORDER BY name`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var names []string
		for rows.Next() {
			var n string
			rows.Scan(&n)
			names = append(names, n)
		}
		return names
	}
	before := indexes(st)
	if len(before) != 4 {
		t.Fatalf("field indexes %q, want one per field (4)", before)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	st = open(t, dir)
	for _, c := range cases {
		if _, ok := st.indexes.Load(c.field); !ok {
			t.Errorf("after reopen the store does not know the index of %s", c.field)
		}
	}
	check(st, "after reopen")
	if after := indexes(st); !slices.Equal(before, after) {
		t.Fatalf("indexes changed across reopen: %q -> %q", before, after)
	}
}

func commitAll(t *testing.T, st *Store, ws []*store.Write) []int64 {
	t.Helper()
	seqs := make([]int64, len(ws))
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seqs[i], errs[i] = st.Commit(context.Background(), w)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return seqs
}

// holdWriter takes the writer's only connection, so queued commits wait,
// and counts the transactions it commits from then on.
func holdWriter(t *testing.T, st *Store) (release func(), commits *atomic.Int64) {
	t.Helper()
	conn, err := st.wdb.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	commits = new(atomic.Int64)
	err = conn.Raw(func(dc any) error {
		h, ok := dc.(interface{ RegisterCommitHook(msqlite.CommitHookFn) })
		if !ok {
			return fmt.Errorf("%T has no commit hook", dc)
		}
		h.RegisterCommitHook(func() int32 { commits.Add(1); return 0 })
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return func() { conn.Close() }, commits
}

// waitWriterBlocked waits until the writer has taken a batch and waits
// for the connection holdWriter holds.
func waitWriterBlocked(t *testing.T, st *Store, before int64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for st.wdb.Stats().WaitCount <= before {
		if time.Now().After(deadline) {
			t.Fatal("the writer never waited for its connection")
		}
		time.Sleep(time.Millisecond)
	}
}

// waitQueued waits until n commits wait in the writer's queue.
func waitQueued(t *testing.T, st *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(st.writes) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d commits queued, want %d", len(st.writes), n)
		}
		time.Sleep(time.Millisecond)
	}
}

type result struct {
	seq int64
	err error
}

func commitAsync(st *Store, w *store.Write) <-chan result {
	ch := make(chan result, 1)
	go func() {
		seq, err := st.Commit(context.Background(), w)
		ch <- result{seq, err}
	}()
	return ch
}

// TestGroupCommit checks that commits queued while the writer is busy
// share one transaction.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir())
	app := newApp(t, st)
	release, commits := holdWriter(t, st)
	// The first commit is taken by the writer, which then waits for the
	// connection; the next 63 queue behind it.
	waits := st.wdb.Stats().WaitCount
	results := []<-chan result{commitAsync(st, put(app, "jobs", "d00", `{}`))}
	waitWriterBlocked(t, st, waits)
	for i := 1; i < 64; i++ {
		results = append(results, commitAsync(st, put(app, "jobs", fmt.Sprintf("d%02d", i), `{}`)))
	}
	waitQueued(t, st, 63)
	release()
	var seqs []int64
	for i, ch := range results {
		r := <-ch
		if r.err != nil {
			t.Fatalf("commit %d: %v", i, r.err)
		}
		seqs = append(seqs, r.seq)
	}
	slices.Sort(seqs)
	if seqs[0] != 1 || seqs[63] != 64 || len(slices.Compact(seqs)) != 64 {
		t.Fatalf("seqs %v, want 1..64", seqs)
	}
	if n := commits.Load(); n != 2 {
		t.Fatalf("64 commits took %d transactions, want 2 (the first alone, then 63 together)", n)
	}
}

// TestBatchFailureIsolated: a write that fails inside a group commit fails
// alone; its neighbours commit with contiguous sequence numbers.
func TestBatchFailureIsolated(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir())
	app := newApp(t, st)
	release, _ := holdWriter(t, st)
	waits := st.wdb.Stats().WaitCount
	first := commitAsync(st, put(app, "jobs", "first", `{}`))
	waitWriterBlocked(t, st, waits)
	var good []<-chan result
	for i := range 10 {
		good = append(good, commitAsync(st, put(app, "jobs", fmt.Sprint("g", i), `{}`)))
		waitQueued(t, st, 2*i+1)
		if i == 4 {
			// An app that does not exist: the batch's transaction fails.
			good = append(good, nil)
			bad := commitAsync(st, put(app+1000, "jobs", "bad", `{}`))
			defer func() {
				if r := <-bad; r.err == nil {
					t.Errorf("commit to a missing app succeeded with seq %d", r.seq)
				}
			}()
		} else {
			good = append(good, commitAsync(st, put(app, "jobs", fmt.Sprint("h", i), `{}`)))
		}
		waitQueued(t, st, 2*i+2)
	}
	release()
	if r := <-first; r.err != nil || r.seq != 1 {
		t.Fatalf("first commit: %+v", r)
	}
	var seqs []int64
	for _, ch := range good {
		if ch == nil {
			continue
		}
		r := <-ch
		if r.err != nil {
			t.Fatalf("a good commit failed with its batch: %v", r.err)
		}
		seqs = append(seqs, r.seq)
	}
	slices.Sort(seqs)
	for i, s := range seqs {
		if s != int64(i+2) {
			t.Fatalf("seqs of the good commits %v, want 2..%d", seqs, len(seqs)+1)
		}
	}
	if last, err := st.LastSeq(context.Background(), app); err != nil || last != int64(len(seqs)+1) {
		t.Fatalf("LastSeq = %d, %v", last, err)
	}
}

// TestCloseKeepsAcknowledgedWrites closes the store while commits are in
// flight: each commit either succeeds, and is there after a reopen, or
// fails; none hangs.
func TestCloseKeepsAcknowledgedWrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	app := newApp(t, st)
	var chans []<-chan result
	closed := make(chan error, 1)
	for i := range 64 {
		chans = append(chans, commitAsync(st, put(app, "jobs", fmt.Sprintf("d%02d", i), `{}`)))
		if i == 32 {
			go func() { closed <- st.Close() }()
		}
	}
	acked := map[string]int64{}
	for i, ch := range chans {
		select {
		case r := <-ch:
			if r.err == nil {
				acked[fmt.Sprintf("d%02d", i)] = r.seq
			}
		case <-time.After(time.Minute):
			t.Fatalf("commit %d hangs after Close", i)
		}
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := st.Commit(context.Background(), put(app, "jobs", "late", `{}`)); err == nil {
		t.Fatal("Commit after Close succeeded")
	}
	st = open(t, dir)
	for id, seq := range acked {
		d, err := st.Get(context.Background(), app, "jobs", id)
		if err != nil || d == nil || d.Seq != seq {
			t.Fatalf("acknowledged write %s (seq %d) lost after reopen: %+v, %v", id, seq, d, err)
		}
	}
	if last, _ := st.LastSeq(context.Background(), app); last != int64(len(acked)) {
		t.Fatalf("LastSeq = %d after %d acknowledged writes", last, len(acked))
	}
	if _, err := st.Commit(context.Background(), put(app, "jobs", "after", `{}`)); err != nil {
		t.Fatalf("commit after reopen: %v", err)
	}
}
