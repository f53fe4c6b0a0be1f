package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/storetest"
)

// holdApp holds the write barrier (seqs.go), as a fence does, until
// release is called: the app's next batch waits for it with its heads
// locked, as behind a batch of another node, and its Commits queue up
// behind that batch.
func holdApp(t *testing.T, st *Store, app int64) (release func()) {
	t.Helper()
	ctx := context.Background()
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+writeBarrierSQL+`) FROM apps WHERE id = $1`, app); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if err := tx.Commit(ctx); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(release)
	return release
}

// stallApp holds the app's row and starts a batch (a write of "first")
// that waits for it, so the writes committed next queue for the batch
// after. release lets both go.
func stallApp(t *testing.T, st *Store, app int64) (release func(), blocker *pending) {
	t.Helper()
	return stallAppWith(t, st, app, "first")
}

// stallAppWith is stallApp with the blocking batch's write to doc id.
func stallAppWith(t *testing.T, st *Store, app int64, id string) (release func(), blocker *pending) {
	t.Helper()
	release = holdApp(t, st, app)
	blocker = commitAsync(st, context.Background(), doc(app, id, "", "1-a", `{}`))
	waitUntil(t, 30*time.Second, "a batch to wait for the app's row", func() bool { return lockWaiters(t, st) == 1 })
	return release, blocker
}

// inOneBatch commits ws, in order, in one batch of their app (after a
// blocking write to blockerID) and waits for them all.
func inOneBatch(t *testing.T, st *Store, blockerID string, ws ...*store.Write) []*pending {
	t.Helper()
	release, blocker := stallAppWith(t, st, ws[0].AppID, blockerID)
	ps := commitInOrder(t, st, context.Background(), ws...)
	release()
	wait(blocker)
	wait(ps...)
	if blocker.err != nil {
		t.Fatalf("the blocking write: %v", blocker.err)
	}
	return ps
}

// lockWaiters counts the database's sessions waiting for a lock.
func lockWaiters(t *testing.T, st *Store) int {
	t.Helper()
	var n int
	err := st.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func queued(st *Store, app int64) int {
	st.commits.mu.Lock()
	defer st.commits.mu.Unlock()
	return len(st.commits.queues[app])
}

// pending is a Commit running in the background.
type pending struct {
	w    *store.Write
	seq  int64
	err  error
	done chan struct{}
}

// commitAsync starts a Commit of w.
func commitAsync(st *Store, ctx context.Context, w *store.Write) *pending {
	p := &pending{w: w, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.seq, p.err = st.Commit(ctx, w)
	}()
	return p
}

// commitInOrder starts a Commit of each write, each queued after the one
// before, so that they make one batch in this order once the app's
// current batch is done.
func commitInOrder(t *testing.T, st *Store, ctx context.Context, ws ...*store.Write) []*pending {
	t.Helper()
	var ps []*pending
	for _, w := range ws {
		n := queued(st, w.AppID)
		p := commitAsync(st, ctx, w)
		waitUntil(t, 30*time.Second, "a commit to queue", func() bool { return queued(st, w.AppID) == n+1 })
		ps = append(ps, p)
	}
	return ps
}

func wait(ps ...*pending) {
	for _, p := range ps {
		<-p.done
	}
}

func doc(app int64, id, base, rev, body string) *store.Write {
	return &store.Write{AppID: app, DB: "jobs", ID: id, BaseRev: base, Rev: rev, Body: []byte(body), Path: "http", Time: t0}
}

// TestGroupCommitBatch: writes queued while the app's row is held make
// one transaction, checked write by write in queue order: against the
// heads in the database and against the batch's earlier writes. A write
// whose head moved is refused without failing the others, the accepted
// ones take consecutive seqs in queue order, and grants, events and the
// announcement come out as if they had committed one by one.
func TestGroupCommitBatch(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	bob := []store.Grant{{Kind: "user", Principal: "bob", Channel: "c1"}}
	old := doc(app, "old", "", "1-a", `{"n":1}`)
	old.Grants = bob
	if seq, err := st.Commit(ctx, old); err != nil || seq != 1 {
		t.Fatalf("first commit: %d, %v", seq, err)
	}
	var heard []int64
	var mu sync.Mutex
	st.Watch(func(a, seq int64) {
		mu.Lock()
		heard = append(heard, seq)
		mu.Unlock()
	})

	release, blocker := stallApp(t, st, app)

	moveGrant := doc(app, "old", "1-a", "2-a", `{"n":2}`)
	moveGrant.Grants = []store.Grant{{Kind: "user", Principal: "bob", Channel: "c2"}}
	moveGrant.Event = &store.EventSpec{Depth: 1, NextAt: t0}
	moveGrant.PrevSeq = 1
	deleteOld := doc(app, "old", "2-a", "3-a", "")
	deleteOld.Deleted, deleteOld.Body = true, nil
	deleteOld.Grants = moveGrant.Grants
	public := doc(app, "z", "", "1-a", `{"p":1}`)
	public.Grants = []store.Grant{{Kind: "public", Channel: "jobs"}}
	public.Event = &store.EventSpec{NextAt: t0}
	other := doc(app, "x", "", "1-a", `{"db":"other"}`)
	other.DB = "other"
	ps := commitInOrder(t, st, ctx,
		doc(app, "x", "", "1-a", `{"x":1}`),     // 0: new
		doc(app, "x", "", "1-b", `{"x":"b"}`),   // 1: x is no longer new
		doc(app, "x", "1-a", "2-a", `{"x":2}`),  // 2: on 0, in the same batch
		doc(app, "old", "0-stale", "2-z", `{}`), // 3: stale
		moveGrant,                               // 4
		deleteOld,                               // 5: on 4
		public,                                  // 6
		other,                                   // 7: same id, other database
	)
	release()
	wait(blocker)
	wait(ps...)
	if blocker.err != nil || blocker.seq != 2 {
		t.Fatalf("the blocked commit: %d, %v", blocker.seq, blocker.err)
	}
	wantSeq := map[int]int64{0: 3, 2: 4, 4: 5, 5: 6, 6: 7, 7: 8}
	for i, p := range ps {
		if s, ok := wantSeq[i]; ok {
			if p.err != nil || p.seq != s {
				t.Errorf("write %d (%s %s): seq %d, %v; want seq %d", i, p.w.ID, p.w.Rev, p.seq, p.err, s)
			}
		} else if !errors.Is(p.err, store.ErrHeadMoved) || p.seq != 0 {
			t.Errorf("write %d (%s on %q): seq %d, %v; want ErrHeadMoved", i, p.w.ID, p.w.BaseRev, p.seq, p.err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	var xacts int
	if err := st.pool.QueryRow(ctx, `SELECT count(DISTINCT xmin::text) FROM revisions WHERE app_id = $1 AND seq >= 3`, app).Scan(&xacts); err != nil || xacts != 1 {
		t.Fatalf("the queued writes were committed by %d transactions, %v; want 1", xacts, err)
	}

	if seq, _ := st.LastSeq(ctx, app); seq != 8 {
		t.Fatalf("LastSeq = %d, want 8", seq)
	}
	changes, err := st.Changes(ctx, app, "", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range changes {
		got = append(got, fmt.Sprintf("%d:%s/%s@%s", c.Seq, c.DB, c.ID, c.Rev))
	}
	want := []string{"1:jobs/old@1-a", "2:jobs/first@1-a", "3:jobs/x@1-a", "4:jobs/x@2-a", "5:jobs/old@2-a", "6:jobs/old@3-a", "7:jobs/z@1-a", "8:other/x@1-a"}
	if !slices.Equal(got, want) {
		t.Fatalf("Changes = %v, want %v", got, want)
	}
	for _, h := range []struct {
		db, id, rev string
		seq         int64
		deleted     bool
	}{{"jobs", "x", "2-a", 4, false}, {"jobs", "old", "3-a", 6, true}, {"jobs", "z", "1-a", 7, false}, {"other", "x", "1-a", 8, false}} {
		d, err := st.Get(ctx, app, h.db, h.id)
		if err != nil || d == nil || d.Rev != h.rev || d.Seq != h.seq || d.Deleted != h.deleted {
			t.Fatalf("head of %s/%s = %+v, %v; want rev %s seq %d deleted %v", h.db, h.id, d, err, h.rev, h.seq, h.deleted)
		}
	}
	if d, _ := st.Get(ctx, app, "jobs", "x"); string(d.Body) != `{"x":2}` {
		t.Fatalf("body of x = %s", d.Body)
	}

	// Grants: c1 gave way to c2, which went with the tombstone; z made
	// jobs public.
	if !moveGrant.GrantsChanged || !deleteOld.GrantsChanged || !public.GrantsChanged || ps[0].w.GrantsChanged {
		t.Fatalf("GrantsChanged: move %v, delete %v, public %v, plain %v; want true, true, true, false",
			moveGrant.GrantsChanged, deleteOld.GrantsChanged, public.GrantsChanged, ps[0].w.GrantsChanged)
	}
	gs, err := st.GrantsFor(ctx, app, "bob")
	if err != nil || len(gs) != 1 || gs[0] != public.Grants[0] {
		t.Fatalf("GrantsFor(bob) = %v, %v; want only %v", gs, err, public.Grants)
	}
	var counts []string
	rows, _ := st.pool.Query(ctx, `SELECT kind || ':' || principal || ':' || channel || '=' || n FROM grant_counts WHERE app_id = $1 ORDER BY 1`, app)
	if counts, err = collect(rows, pgx.RowTo[string]); err != nil || !slices.Equal(counts, []string{"public::jobs=1"}) {
		t.Fatalf("grant_counts = %v, %v", counts, err)
	}

	// Events: the two writes that asked for one, with their seqs.
	evs, err := st.ListEvents(ctx, app, false, 0, 10)
	if err != nil || !slices.Equal(seqsOf(evs), []int64{5, 7}) || evs[0].Depth != 1 || evs[0].Old == nil || evs[0].Old.Rev != "1-a" {
		t.Fatalf("events = %+v, %v; want seqs 5 and 7", evs, err)
	}
	if dbs, err := st.Databases(ctx, app); err != nil || !slices.Equal(dbs, []string{"jobs", "other"}) {
		t.Fatalf("Databases = %v, %v", dbs, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(heard) == 0 || heard[len(heard)-1] != 8 {
		t.Fatalf("Watch heard %v, want it to end at 8", heard)
	}
}

// TestGroupCommitBadWrite: a write the database refuses fails alone; the
// others of its batch commit, in order (the failed batch's seqs are
// left unused).
func TestGroupCommitBadWrite(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	release, blocker := stallApp(t, st, app)
	ps := commitInOrder(t, st, ctx,
		doc(app, "a", "", "1-a", `{"a":1}`),
		doc(app, "bad", "", "1-a", `{"not json`), // jsonb refuses it
		doc(app, "c", "", "1-a", `{"c":1}`),
	)
	release()
	wait(blocker)
	wait(ps...)
	if ps[0].err != nil || ps[2].err != nil || ps[0].seq <= blocker.seq || ps[2].seq <= ps[0].seq {
		t.Fatalf("good writes: %d %v, %d %v; want seqs in order after the first write's %d", ps[0].seq, ps[0].err, ps[2].seq, ps[2].err, blocker.seq)
	}
	if ps[1].err == nil || errors.Is(ps[1].err, store.ErrHeadMoved) {
		t.Fatalf("bad write: %v, want the database's error", ps[1].err)
	}
	if d, err := st.Get(ctx, app, "jobs", "bad"); err != nil || d != nil {
		t.Fatalf("Get of the refused write = %+v, %v", d, err)
	}
	if seq, _ := st.LastSeq(ctx, app); seq != ps[2].seq {
		t.Fatalf("LastSeq = %d, want %d", seq, ps[2].seq)
	}
}

// TestGroupCommitRefusedAtCommit: a batch whose COMMIT the server refuses
// (here a deferred check, run at commit) did not commit, though the
// connection ends idle as after a commit: its writes are tried alone and
// only the refused one fails.
func TestGroupCommitRefusedAtCommit(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	if _, err := st.pool.Exec(ctx, `CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.id = 'refused' THEN RAISE EXCEPTION 'refused at commit'; END IF; RETURN NULL; END $$;
		CREATE CONSTRAINT TRIGGER refuse_at_commit AFTER INSERT ON revisions DEFERRABLE INITIALLY DEFERRED
		FOR EACH ROW EXECUTE FUNCTION refuse_at_commit()`); err != nil {
		t.Fatal(err)
	}
	ps := inOneBatch(t, st, "first",
		doc(app, "a", "", "1-a", `{"a":1}`),
		doc(app, "refused", "", "1-a", `{}`),
		doc(app, "c", "", "1-a", `{"c":1}`),
	)
	if ps[0].err != nil || ps[2].err != nil || ps[0].seq <= 1 || ps[2].seq <= ps[0].seq {
		t.Fatalf("good writes: %d %v, %d %v; want seqs in order after the first write's", ps[0].seq, ps[0].err, ps[2].seq, ps[2].err)
	}
	if ps[1].err == nil || !strings.Contains(ps[1].err.Error(), "refused at commit") {
		t.Fatalf("write refused at commit: seq %d, %v; want the server's error", ps[1].seq, ps[1].err)
	}
	for _, id := range []string{"a", "c"} {
		if d, err := st.Get(ctx, app, "jobs", id); err != nil || d == nil {
			t.Fatalf("Get(%s) = %+v, %v; want the committed head", id, d, err)
		}
	}
	if d, err := st.Get(ctx, app, "jobs", "refused"); err != nil || d != nil {
		t.Fatalf("Get of the refused write = %+v, %v", d, err)
	}
	if seq, _ := st.LastSeq(ctx, app); seq != ps[2].seq {
		t.Fatalf("LastSeq = %d, want %d", seq, ps[2].seq)
	}
}

// TestGroupCommitCancelQueued: a caller that gives up while its write is
// still queued gets its context's error, and the write is never made.
func TestGroupCommitCancelQueued(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	release, blocker := stallApp(t, st, app)
	cctx, cancel := context.WithCancel(ctx)
	gone := commitInOrder(t, st, cctx, doc(app, "gone", "", "1-a", `{}`))
	kept := commitInOrder(t, st, ctx, doc(app, "kept", "", "1-a", `{}`))
	cancel()
	wait(gone...)
	if !errors.Is(gone[0].err, context.Canceled) {
		t.Fatalf("cancelled queued commit: %d, %v; want context.Canceled", gone[0].seq, gone[0].err)
	}
	release()
	wait(blocker)
	wait(kept...)
	if kept[0].err != nil || kept[0].seq != 2 {
		t.Fatalf("commit queued after the cancelled one: %d, %v; want seq 2", kept[0].seq, kept[0].err)
	}
	if d, err := st.Get(ctx, app, "jobs", "gone"); err != nil || d != nil {
		t.Fatalf("Get of the cancelled write = %+v, %v", d, err)
	}
}

// TestGroupCommitNewDocRace: two nodes' batches create the same document
// at once. Both found no head; the second to take the app's row finds
// the first's head, so exactly one wins and the other gets ErrHeadMoved.
func TestGroupCommitNewDocRace(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	ctx := context.Background()
	app := newApp(t, a, "jobs")
	release := holdApp(t, a, app)
	defer release()
	pa := commitAsync(a, ctx, doc(app, "n", "", "1-a", `{"node":"a"}`))
	pb := commitAsync(b, ctx, doc(app, "n", "", "1-b", `{"node":"b"}`))
	waitUntil(t, 30*time.Second, "both batches to wait for the write barrier", func() bool { return lockWaiters(t, a) == 2 })
	release()
	wait(pa, pb)
	win, lose := pa, pb
	if win.err != nil {
		win, lose = lose, win
	}
	if win.err != nil || win.seq <= 0 || !errors.Is(lose.err, store.ErrHeadMoved) {
		t.Fatalf("a: %d %v; b: %d %v; want one seq and one ErrHeadMoved", pa.seq, pa.err, pb.seq, pb.err)
	}
	if d, _ := a.Get(ctx, app, "jobs", "n"); d == nil || d.Rev != win.w.Rev {
		t.Fatalf("head = %+v, want the winner's %s", d, win.w.Rev)
	}
	if seq, _ := a.LastSeq(ctx, app); seq != win.seq {
		t.Fatalf("LastSeq = %d, want the winner's %d", seq, win.seq)
	}
}

// TestGroupCommitAcrossNodes: two nodes, each with writers on the same
// app, update a few hot documents (read the head, write on it, again on
// ErrHeadMoved), create documents both nodes create too, and change
// grants. Every committed write is in the ledger once, in seq order;
// each document's history is one unbroken chain, and grant_counts matches
// the grants of the live heads.
func TestGroupCommitAcrossNodes(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	ctx := context.Background()
	app := newApp(t, a, "jobs")
	const writers, writes = 8, 40
	hot := []string{"h0", "h1", "h2"}
	var mu sync.Mutex
	committed := 0
	var wg sync.WaitGroup
	for n, st := range []*Store{a, b} {
		for w := range writers {
			wg.Go(func() {
				for i := range writes {
					id := hot[(w+i)%len(hot)]
					if i%4 == 3 {
						id = fmt.Sprint("new", i) // both nodes create these
					}
					for {
						head, err := st.Get(ctx, app, "jobs", id)
						if err != nil {
							t.Error(err)
							return
						}
						base, gen := "", 0
						if head != nil {
							base = head.Rev
							fmt.Sscanf(base, "%d-", &gen)
						}
						if strings.HasPrefix(id, "new") && head != nil {
							break
						}
						wr := doc(app, id, base, fmt.Sprintf("%d-n%dw%di%d", gen+1, n, w, i), fmt.Sprintf(`{"base":%q}`, base))
						if i%3 == 0 {
							wr.Grants = []store.Grant{{Kind: "user", Principal: fmt.Sprint("u", w%3), Channel: "c"}}
						}
						if i%5 == 0 {
							wr.Grants = append(wr.Grants, store.Grant{Kind: "public", Channel: "hot"})
						}
						if i%7 == 6 {
							wr.Deleted, wr.Body, wr.Grants = true, nil, nil
						}
						if _, err := st.Commit(ctx, wr); errors.Is(err, store.ErrHeadMoved) {
							continue
						} else if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						committed++
						mu.Unlock()
						break
					}
				}
			})
		}
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	changes, err := a.Changes(ctx, app, "", 0, -1)
	if err != nil || len(changes) != committed {
		t.Fatalf("Changes: %d, %v; want %d, one per committed write", len(changes), err, committed)
	}
	if last, err := a.LastSeq(ctx, app); err != nil || last != changes[len(changes)-1].Seq {
		t.Fatalf("LastSeq = %d, %v; want the last change's", last, err)
	}
	heads := map[string]string{}
	for i, c := range changes {
		if i > 0 && c.Seq <= changes[i-1].Seq {
			t.Fatalf("change %d has seq %d after %d", i, c.Seq, changes[i-1].Seq)
		}
		var body struct{ Base string }
		if !c.Deleted {
			if err := json.Unmarshal(c.Body, &body); err != nil {
				t.Fatal(err)
			}
			if body.Base != heads[c.ID] {
				t.Fatalf("seq %d wrote %s on %q, but its head was %q: a lost update", c.Seq, c.ID, body.Base, heads[c.ID])
			}
		}
		heads[c.ID] = c.Rev
	}
	// Each live head gives the grants of its last write, and grant_counts
	// counts them.
	want := map[string]int{}
	for id, rev := range heads {
		var gen, n, w, i int
		if _, err := fmt.Sscanf(rev, "%d-n%dw%di%d", &gen, &n, &w, &i); err != nil {
			t.Fatalf("rev %s: %v", rev, err)
		}
		var gs []string
		if i%7 != 6 {
			if i%3 == 0 {
				gs = append(gs, fmt.Sprintf("user:u%d:c", w%3))
			}
			if i%5 == 0 {
				gs = append(gs, "public::hot")
			}
		}
		for _, g := range gs {
			want[g]++
		}
		rows, err := a.pool.Query(ctx, `SELECT kind || ':' || principal || ':' || channel FROM grants WHERE app_id = $1 AND db = 'jobs' AND doc_id = $2 ORDER BY 1`, app, id)
		if err != nil {
			t.Fatal(err)
		}
		got, err := collect(rows, pgx.RowTo[string])
		if slices.Sort(gs); err != nil || !slices.Equal(got, gs) {
			t.Fatalf("grants of %s at %s = %v, %v; want %v", id, rev, got, err, gs)
		}
		if d, _ := a.Get(ctx, app, "jobs", id); d.HasGrants != (len(gs) > 0) {
			t.Fatalf("head of %s at %s: HasGrants %v with grants %v", id, rev, d.HasGrants, gs)
		}
	}
	if got := grantCounts(t, a, app); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("grant_counts = %v, want %v", got, want)
	}
}

// grantCounts reads app's grant_counts, keyed kind:principal:channel.
func grantCounts(t *testing.T, st *Store, app int64) map[string]int {
	t.Helper()
	rows, err := st.pool.Query(context.Background(), `SELECT kind || ':' || principal || ':' || channel, n FROM grant_counts WHERE app_id = $1`, app)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		got[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

// TestGrantCountsNetPerBatch: a batch moves each grant's count once, by
// its net change, and reports a change of the grants in force only when
// a count leaves or reaches zero.
func TestGrantCountsNetPerBatch(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	crew := store.Grant{Kind: "role", Principal: "crew", Channel: "c"}
	bob := store.Grant{Kind: "user", Principal: "bob", Channel: "c"}
	count := func(g store.Grant) int64 {
		t.Helper()
		var n int64
		err := st.pool.QueryRow(ctx, `SELECT coalesce(sum(n), 0) FROM grant_counts WHERE app_id = $1 AND kind = $2 AND principal = $3 AND channel = $4`,
			app, g.Kind, g.Principal, g.Channel).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := doc(app, "a", "", "1-a", `{}`)
	a.Grants = []store.Grant{bob}
	if _, err := st.Commit(ctx, a); err != nil {
		t.Fatal(err)
	}

	// In one batch: 30 new documents give crew, and bob's grant passes
	// from a, its only giver, to b.
	var ws []*store.Write
	for i := range 30 {
		w := doc(app, fmt.Sprintf("crew-%02d", i), "", "1-a", `{}`)
		w.Grants = []store.Grant{crew}
		ws = append(ws, w)
	}
	drop := doc(app, "a", "1-a", "2-a", `{}`)
	take := doc(app, "b", "", "1-a", `{}`)
	take.Grants = []store.Grant{bob}
	for _, p := range inOneBatch(t, st, "first", append(ws, drop, take)...) {
		if p.err != nil {
			t.Fatalf("%s: %v", p.w.ID, p.err)
		}
	}
	if n := count(crew); n != 30 {
		t.Fatalf("grant_counts for %v = %d, want 30", crew, n)
	}
	if n := count(bob); n != 1 {
		t.Fatalf("grant_counts for %v = %d, want 1", bob, n)
	}
	for _, w := range ws {
		if !w.GrantsChanged {
			t.Fatalf("%s: GrantsChanged is false in a batch that made %v appear", w.ID, crew)
		}
	}

	// In one batch: bob's grant passes back from b to a; nothing else.
	drop = doc(app, "b", "1-a", "2-a", `{}`)
	take = doc(app, "a", "2-a", "3-a", `{}`)
	take.Grants = []store.Grant{bob}
	ps := inOneBatch(t, st, "second", drop, take)
	if ps[0].err != nil || ps[1].err != nil {
		t.Fatalf("commits: %v, %v", ps[0].err, ps[1].err)
	}
	if drop.GrantsChanged || take.GrantsChanged {
		t.Fatalf("a grant passed from one document to another: GrantsChanged %v, %v; want false, false", drop.GrantsChanged, take.GrantsChanged)
	}
	if n := count(bob); n != 1 {
		t.Fatalf("grant_counts for %v = %d, want 1", bob, n)
	}
	gs, err := st.GrantsFor(ctx, app, "bob")
	if err != nil || len(gs) != 2 {
		t.Fatalf("GrantsFor(bob) = %v, %v; want crew's and bob's", gs, err)
	}
}

// checkGrantRows fails unless grant_counts holds, for each grant, the
// number of grants rows giving it, and no tombstone keeps grants rows.
func checkGrantRows(t *testing.T, st *Store, app int64) {
	t.Helper()
	var wrong int
	err := st.pool.QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM (SELECT * FROM grant_counts WHERE app_id = $1) c
			FULL JOIN (SELECT kind, principal, channel, count(*) AS n FROM grants WHERE app_id = $1 GROUP BY 1, 2, 3) g
			USING (kind, principal, channel) WHERE c.n IS DISTINCT FROM g.n)
		+ (SELECT count(*) FROM grants r JOIN docs d ON d.app_id = r.app_id AND d.db = r.db AND d.id = r.doc_id
			WHERE r.app_id = $1 AND (d.deleted OR NOT d.has_grants))`, app).Scan(&wrong)
	if err != nil || wrong != 0 {
		t.Fatalf("grant_counts and grants disagree in %d places (%v)", wrong, err)
	}
}

// TestGrantsThroughOneBatch writes documents several times in one batch:
// grants that move and come back, a delete and a recreate, a refused
// write, a document created and deleted, a grant given twice. Then a
// batch that fails is retried write by write. The counts always match
// the rows, and the grants in force are those of the live heads.
func TestGrantsThroughOneBatch(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	first, ws, refused, appear, roles := storetest.GrantRewrites(app, "jobs", t0)
	for _, w := range first {
		if _, err := st.Commit(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	for i, p := range inOneBatch(t, st, "blocker-1", ws...) {
		if want := i == refused; (p.err != nil) != want || want && !errors.Is(p.err, store.ErrHeadMoved) {
			t.Fatalf("write %d (%s on %q): %v", i, p.w.ID, p.w.BaseRev, p.err)
		}
	}
	checkGrantRows(t, st, app)
	for _, i := range appear {
		if !ws[i].GrantsChanged {
			t.Fatalf("write %d (%s) made a role appear: GrantsChanged is false", i, ws[i].ID)
		}
	}
	storetest.WantRoles(t, st, app, roles...)

	// PostgreSQL refuses a NUL in text: the batch fails, and the others
	// are committed alone, each reporting its own change.
	role := func(p string) []store.Grant { return []store.Grant{{Kind: "role", Principal: p, Channel: "c"}} }
	p1, p2, bad := doc(app, "p1", "", "1-a", `{}`), doc(app, "p2", "", "1-a", `{}`), doc(app, "bad", "", "1-a", `{}`)
	p1.Grants, p2.Grants, bad.Grants = role("P"), role("P"), role("Q\x00")
	ws = []*store.Write{p1, doc(app, "x", "3-a", "4-a", `{}`), bad, p2}
	for i, p := range inOneBatch(t, st, "blocker-2", ws...) {
		if (p.err != nil) != (i == 2) {
			t.Fatalf("write %d (%s): %v", i, p.w.ID, p.err)
		}
	}
	checkGrantRows(t, st, app)
	if !ws[0].GrantsChanged || !ws[1].GrantsChanged || ws[3].GrantsChanged {
		t.Fatalf("GrantsChanged: P appears %v, A vanishes %v, P again %v; want true, true, false",
			ws[0].GrantsChanged, ws[1].GrantsChanged, ws[3].GrantsChanged)
	}
	storetest.WantRoles(t, st, app, "C", "D", "E", "H", "P")
}

// planCase is one statement whose generic plan must find its rows by
// key: the plan of EXECUTE name args must name want and no scan, bitmap
// or hash.
type planCase struct{ name, params, sql, args, want string }

// plans prepares each case on one connection after settings (a
// statement run first in the same transaction) and returns the plans
// EXPLAIN EXECUTE shows.
func plans(t *testing.T, st *Store, settings string, cases []planCase) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := st.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	var out []string
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, settings); err != nil {
			return err
		}
		for _, c := range cases {
			stmt := c.params // with sql empty, params holds "AS query" too
			if c.sql != "" {
				stmt += ` AS ` + c.sql
			}
			if _, err := tx.Exec(ctx, `PREPARE `+c.name+` `+stmt); err != nil {
				return fmt.Errorf("%s: %w", c.name, err)
			}
			rows, err := tx.Query(ctx, `EXPLAIN EXECUTE `+c.name+c.args)
			if err != nil {
				return err
			}
			lines, err := collect(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `DEALLOCATE `+c.name); err != nil {
				return err
			}
			out = append(out, strings.Join(lines, "\n"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkKeyPlans checks that each case's plan names its want and no scan,
// bitmap or hash.
func checkKeyPlans(t *testing.T, st *Store, when, settings string, cases []planCase) {
	t.Helper()
	for i, plan := range plans(t, st, settings, cases) {
		if !strings.Contains(plan, cases[i].want) || strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Bitmap") || strings.Contains(plan, "Hash") {
			t.Errorf("%s: plan of %s does not look its rows up by key:\n%s", when, cases[i].name, plan)
		}
	}
}

// TestCommitPlansUseKeys: the batch's statements, those of a flush of
// acks and the read of the next event due find each row through its key, in the generic plan they run with,
// on tables too fresh to have statistics, or whose statistics say empty:
// a scan of the app's documents, grants or events would make every commit
// or ack cost the size of the app.
func TestCommitPlansUseKeys(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	heads := `(int8, int8, text[], text[], text[], bool[], text[], text[], int8[], int8[], text[], bool[])`
	headArgs := `(1, 0, '{jobs}', '{d7}', '{2-b}', '{f}', '{"{}"}', '{"{}"}', '{1}', '{0}', '{NULL}', '{f}')`
	commits := []planCase{
		{"lock", `(int8, text, text[])`, sqlLockHeads, `(1, 'jobs', '{d5,d7}')`, "Index Cond: ((app_id = $1) AND (db = $2) AND (id = k.id))"},
		{"grants", `(int8, text, text[])`, sqlDocGrants, `(1, 'jobs', '{d5,d7}')`, "Index Cond: ((app_id = $1) AND (db = $2) AND (doc_id = k.id))"},
		{"save", heads, sqlSaveHeads, headArgs, "Conflict Arbiter Indexes: docs_pkey"},
		{"count", `(int8, text[], text[], text[], int8[])`, sqlCountGrants, `(1, '{public}', '{""}', '{jobs}', '{1}')`, "Conflict Arbiter Indexes: grant_counts_pkey"},
		{"gone", `(int8, text, text, text)`, sqlCountGone, `(1, 'public', '', 'jobs')`, "Index Cond: ((app_id = $1) AND (kind = $2) AND (principal = $3) AND (channel = $4))"},
		{"claimed", `(int8, int8, int8[], int4[], int8[], int8[], text[], text[], int8[], text)`, sqlAddClaimedEvents,
			`(1, 1, '{1}', '{0}', '{0}', '{0}', '{jobs}', '{d7}', '{5}', 'n')`, "Index Cond: ((app_id = $1) AND (db = (unnest($7))) AND (doc_id = (unnest($8))))"},
	}
	acks := []planCase{
		{"ack", `(int8, int8[])`, sqlAck, `(1, '{5,7}')`, "Index Cond: ((app_id = $1) AND (seq = k.seq))"},
		{"start", `(int8, int8[], text)`, sqlStart, `(1, '{5,7}', 'n')`, "Index Cond: ((app_id = $1) AND (seq = k.seq))"},
		{"due", `(int8)`, sqlNextDue, `(1)`, "Index Scan using events_due"},
	}
	check := func(when string) {
		t.Helper()
		checkKeyPlans(t, st, when, sqlGenericPlans, commits)
		checkKeyPlans(t, st, when, sqlKeyPlans, acks)
	}
	// Each connection keeps one generic plan per statement, maybe made
	// while the tables were empty: check them then, once analyzed empty
	// (as autovacuum leaves an outbox it emptied), and once full.
	check("tables new")
	if _, err := st.pool.Exec(ctx, `ANALYZE docs, grants, grant_counts, events`); err != nil {
		t.Fatal(err)
	}
	check("tables analyzed empty")
	for _, q := range []string{
		`INSERT INTO docs (app_id, db, id, rev, deleted, body_text, body, seq, time, has_grants)
		SELECT $1, 'jobs', 'd' || i, '1-a', false, '{}', '{}', i, 0, true FROM generate_series(1, 5000) i`,
		`INSERT INTO grants (app_id, db, doc_id, kind, principal, channel)
		SELECT $1, 'jobs', 'd' || i, 'public', '', 'jobs' FROM generate_series(1, 5000) i`,
		`INSERT INTO events (app_id, seq, depth, next_at, db, doc_id)
		SELECT $1, i, 0, 0, 'jobs', 'd' || i FROM generate_series(1, 5000) i`,
	} {
		if _, err := st.pool.Exec(ctx, q, app); err != nil {
			t.Fatal(err)
		}
	}
	check("tables full")
}
