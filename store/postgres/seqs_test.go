package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoff-run/handoff/store"
)

// TestChangesMissNoCommitUnderRacingWriters races writers of three apps
// on two nodes of one database, which take their seqs from one sequence
// and commit in another order than they took them, against followers of
// each app on both nodes that read Changes page by page: every follower
// reads exactly the acknowledged writes of its app, each once, in seq
// order. A follower that read past a seq still being committed would miss
// it (seqs.go).
func TestChangesMissNoCommitUnderRacingWriters(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	nodes := []*Store{a, b}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const (
		apps    = 3
		writers = 18
		each    = 60
	)
	var ids []int64
	for i := range apps {
		ids = append(ids, newApp(t, a, fmt.Sprint("race", i)))
	}

	var mu sync.Mutex
	acked := map[int64][]int64{} // app → acknowledged seqs
	var writing sync.WaitGroup
	for w := range writers {
		writing.Add(1)
		go func() {
			defer writing.Done()
			st, app := nodes[w%2], ids[w%apps]
			base := ""
			for i := range each {
				// Each writer keeps its own document and makes a new one
				// now and then, so batches hold both kinds.
				id, rev := fmt.Sprintf("w%d", w), fmt.Sprintf("%d-w%d", i+1, w)
				if i%3 == 0 {
					id, rev = fmt.Sprintf("w%d-%d", w, i), "1-n"
				}
				wbase := base
				if i%3 == 0 {
					wbase = ""
				}
				seq, err := st.Commit(ctx, doc(app, id, wbase, rev, fmt.Sprintf(`{"w":%d,"i":%d}`, w, i)))
				if err != nil {
					t.Errorf("writer %d, write %d: %v", w, i, err)
					return
				}
				if i%3 != 0 {
					base = rev
				}
				mu.Lock()
				acked[app] = append(acked[app], seq)
				mu.Unlock()
			}
		}()
	}
	done := make(chan struct{})
	go func() { writing.Wait(); close(done) }()

	type result struct {
		app   int64
		node  int
		seqs  []int64
		since int64
		err   error
	}
	results := make(chan result, 2*apps)
	follow := func(app int64, node int, since int64) {
		r := result{app: app, node: node, since: since}
		defer func() { results <- r }()
		for {
			finished := false
			select {
			case <-done:
				finished = true
			default:
			}
			page, err := nodes[node].Changes(ctx, app, "", since, 7)
			if err != nil {
				r.err = err
				return
			}
			for _, c := range page {
				r.seqs = append(r.seqs, c.Seq)
				since = c.Seq
			}
			// Once the writers are done, an empty page means the end.
			if finished && len(page) == 0 {
				return
			}
			if len(page) < 7 {
				// Caught up: leave the cores to the writers a moment, as
				// a follower waiting for the next commit does.
				time.Sleep(time.Millisecond)
			}
		}
	}
	for _, app := range ids {
		for node := range nodes {
			go follow(app, node, 0)
		}
	}
	for range 2 * apps {
		r := <-results
		if r.err != nil {
			t.Fatalf("follower of app %d on node %d: %v", r.app, r.node, r.err)
		}
		want := slices.Sorted(slices.Values(acked[r.app]))
		if !slices.Equal(r.seqs, want) {
			missing, extra := diffSeqs(want, r.seqs)
			t.Fatalf("follower of app %d on node %d read %d changes, want the %d acknowledged: missing %v, extra or out of order %v",
				r.app, r.node, len(r.seqs), len(want), missing, extra)
		}
	}
	if t.Failed() {
		return
	}
	for _, app := range ids {
		if n := len(acked[app]); n != writers/apps*each {
			t.Fatalf("app %d has %d acknowledged writes, want %d", app, n, writers/apps*each)
		}
	}
}

// diffSeqs lists the seqs of want that got lacks, and those of got that
// want lacks or that break its order.
func diffSeqs(want, got []int64) (missing, extra []int64) {
	in := map[int64]bool{}
	for _, s := range got {
		in[s] = true
	}
	for _, s := range want {
		if !in[s] {
			missing = append(missing, s)
		}
	}
	ok := map[int64]bool{}
	for _, s := range want {
		ok[s] = true
	}
	for i, s := range got {
		if !ok[s] || i > 0 && s <= got[i-1] {
			extra = append(extra, s)
		}
	}
	return missing, extra
}

// TestSeqsContinueAcrossTheSequenceMigration: a database whose apps took
// their seqs from their rows (schema version 11) goes on above the
// highest of them once handoff_seq takes over.
func TestSeqsContinueAcrossTheSequenceMigration(t *testing.T) {
	t.Parallel()
	dbURL := emptyDB(t)
	ctx := context.Background()
	conn, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Exec(ctx, `CREATE TABLE schema_migrations (version int4 PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())`); err != nil {
		t.Fatal(err)
	}
	for i, m := range migrations[:11] {
		if _, err := conn.Exec(ctx, m); err != nil {
			t.Fatalf("migration %d: %v", i+1, err)
		}
		if _, err := conn.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, i+1); err != nil {
			t.Fatal(err)
		}
	}
	// Two apps, as commits of version 11 left them.
	if _, err := conn.Exec(ctx, `INSERT INTO users (name, created) VALUES ('alice', 0);
		INSERT INTO apps (id, owner, name, created, seq) VALUES (1, 'alice', 'a', 0, 41), (2, 'alice', 'b', 0, 7);
		INSERT INTO revisions (app_id, seq, db, id, rev, deleted, body, time, path) VALUES (1, 41, 'jobs', 'x', '1-a', false, '{}', 0, 'http');
		INSERT INTO docs (app_id, db, id, rev, deleted, body_text, body, seq, time) VALUES (1, 'jobs', 'x', '1-a', false, '{}', '{}', 41, 0)`); err != nil {
		t.Fatal(err)
	}
	st := openAt(t, dbURL)
	defer st.Close()
	for _, app := range []int64{2, 1} {
		seq, err := st.Commit(ctx, doc(app, "y", "", "1-a", `{}`))
		if err != nil || seq <= 41 {
			t.Fatalf("app %d's first commit after the migration: seq %d, %v; want one above 41", app, seq, err)
		}
	}
	if c, err := st.Changes(ctx, 1, "", 0, -1); err != nil || len(c) != 2 || c[0].Seq != 41 {
		t.Fatalf("app 1's changes after the migration: %+v, %v; want seq 41 and the new one", c, err)
	}
}

// seqInFlight opens a transaction on dbURL that has taken one seq, as a
// commit of another node does, and returns it and the seq; it is rolled
// back when the test ends unless the test commits it.
func seqInFlight(t *testing.T, dbURL string) (pgx.Tx, int64) {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback(ctx) })
	var seqs []int64
	if err := tx.QueryRow(ctx, `SELECT handoff_take_seqs(1)`).Scan(&seqs); err != nil {
		t.Fatal(err)
	}
	return tx, seqs[0]
}

// TestLastSeqWaitsForASeqInFlight: while a commit that took a seq is
// still open, a later commit of the app is visible, but LastSeq does not
// answer with it: a follower that started there after reading a snapshot
// would never see the earlier commit. It answers once that commit ends,
// and the ledger then holds both.
func TestLastSeqWaitsForASeqInFlight(t *testing.T) {
	t.Parallel()
	dbURL := freshDB(t)
	st := openAt(t, dbURL)
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	// A commit of another node, stopped between taking its seq and its end.
	tx, early := seqInFlight(t, dbURL)
	late, err := st.Commit(ctx, doc(app, "late", "", "1-a", `{}`))
	if err != nil || late <= early {
		t.Fatalf("the later commit: seq %d, %v; want one above %d", late, err, early)
	}
	type answer struct {
		seq int64
		err error
	}
	got := make(chan answer, 1)
	go func() {
		seq, err := st.LastSeq(ctx, app)
		got <- answer{seq, err}
	}()
	waitUntil(t, 30*time.Second, "LastSeq to wait for the commit in flight", func() bool {
		select {
		case a := <-got:
			t.Fatalf("LastSeq answered %d, %v while seq %d was in flight", a.seq, a.err, early)
		default:
		}
		return lockWaiters(t, st) == 1
	})
	if _, err := tx.Exec(ctx, `INSERT INTO revisions (app_id, seq, db, id, rev, deleted, body, time, path)
		VALUES ($1, $2, 'jobs', 'early', '1-a', false, '{}', 0, 'http')`, app, early); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if a := <-got; a.err != nil || a.seq != late {
		t.Fatalf("LastSeq = %d, %v; want %d", a.seq, a.err, late)
	}
	c, err := st.Changes(ctx, app, "", 0, -1)
	if err != nil || len(c) != 2 || c[0].Seq != early || c[1].Seq != late {
		t.Fatalf("Changes = %+v, %v; want seqs %d and %d", c, err, early, late)
	}
}

// TestGrantsSeqMovesForEachGrantChange: a grant change that commits after
// one with a higher seq still moves apps.grants_seq, which the watchers'
// poll compares with what they were told: a lost announcement of either
// change is found.
func TestGrantsSeqMovesForEachGrantChange(t *testing.T) {
	t.Parallel()
	dbURL := freshDB(t)
	st := openAt(t, dbURL)
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	grantsSeq := func() int64 {
		t.Helper()
		var n int64
		if err := st.pool.QueryRow(ctx, `SELECT grants_seq FROM apps WHERE id = $1`, app).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// A commit of another node that took its seq first and makes a grant
	// appear, stopped before its end.
	tx, early := seqInFlight(t, dbURL)
	if _, err := tx.Exec(ctx, `INSERT INTO grant_counts (app_id, kind, principal, channel, n) VALUES ($1, 'role', 'early', 'c', 1)`, app); err != nil {
		t.Fatal(err)
	}
	w := doc(app, "late", "", "1-a", `{}`)
	w.Grants = []store.Grant{{Kind: "role", Principal: "late", Channel: "c"}}
	late, err := st.Commit(ctx, w)
	if err != nil || late <= early {
		t.Fatalf("the later commit: seq %d, %v; want one above %d", late, err, early)
	}
	first := grantsSeq()
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if second := grantsSeq(); second <= first {
		t.Fatalf("grants_seq %d after the later seq's grant change, %d after the earlier seq's: it did not move", first, second)
	}
}
