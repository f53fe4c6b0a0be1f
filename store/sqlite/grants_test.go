package sqlite

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/storetest"
)

// inOneTransaction commits ws in one transaction, after a write to
// blockerID that the writer takes alone while it is held, and returns
// each write's error. A refused write (head moved) does not fail the
// transaction.
func inOneTransaction(t *testing.T, st *Store, blockerID string, ws ...*store.Write) []error {
	t.Helper()
	release, commits := holdWriter(t, st)
	waits := st.wdb.Stats().WaitCount
	blocker := commitAsync(st, put(ws[0].AppID, "d", blockerID, `{}`))
	waitWriterBlocked(t, st, waits)
	var chs []<-chan result
	for i, w := range ws {
		chs = append(chs, commitAsync(st, w))
		waitQueued(t, st, i+1)
	}
	release()
	if r := <-blocker; r.err != nil {
		t.Fatalf("the blocking write: %v", r.err)
	}
	var errs []error
	for _, ch := range chs {
		errs = append(errs, (<-ch).err)
	}
	// A write that fails its transaction has the others retried alone.
	if n := commits.Load(); n != 2 && errors.Join(errs...) == nil {
		t.Fatalf("the blocking write and %d more took %d transactions, want 2", len(ws), n)
	}
	return errs
}

func mustCommit(t *testing.T, errs []error) {
	t.Helper()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func countOf(t *testing.T, st *Store, app int64, g store.Grant) int64 {
	t.Helper()
	var n int64
	err := st.rdb.QueryRow(`SELECT coalesce(sum(n), 0) FROM grant_counts WHERE app_id = ? AND kind = ? AND principal = ? AND channel = ?`,
		app, g.Kind, g.Principal, g.Channel).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func withGrants(w *store.Write, gs ...store.Grant) *store.Write {
	w.Channels, w.Grants = []string{}, gs
	return w
}

// TestGrantCountsNetPerTransaction: a transaction writes each grant's
// count once, netted over its writes, and reports a change of the grants
// in force only when a count leaves or reaches zero.
func TestGrantCountsNetPerTransaction(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir())
	app := newApp(t, st)
	crew := store.Grant{Kind: "role", Principal: "crew", Channel: "c"}
	bob := store.Grant{Kind: "user", Principal: "bob", Channel: "c"}

	// 30 new documents give one grant in one transaction.
	var ws []*store.Write
	for i := range 30 {
		ws = append(ws, withGrants(put(app, "d", fmt.Sprintf("crew-%02d", i), `{}`), crew))
	}
	if _, err := st.Commit(context.Background(), ws[0]); err != nil {
		t.Fatal(err)
	}
	mustCommit(t, inOneTransaction(t, st, "blocker-1", ws[1:]...))
	if n := countOf(t, st, app, crew); n != 30 {
		t.Fatalf("grant_counts for %v = %d, want 30", crew, n)
	}
	for i, w := range ws[1:] {
		// ws[0] made the grant appear; the others, together, added to a
		// count that was already above zero.
		if w.GrantsChanged {
			t.Fatalf("write %d: GrantsChanged, but the grant was in force already", i+1)
		}
	}
	if !ws[0].GrantsChanged {
		t.Fatal("the first document to give a grant: GrantsChanged is false")
	}

	// The only giver of bob's grant lets go of it while another document
	// takes it up, in one transaction: the grants in force are the same.
	a := withGrants(put(app, "d", "a", `{}`), bob)
	if _, err := st.Commit(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	drop := withGrants(&store.Write{AppID: app, DB: "d", ID: "a", BaseRev: "1-a", Rev: "2-a", Body: []byte(`{}`), Path: "http", Time: a.Time})
	take := withGrants(put(app, "d", "b", `{}`), bob)
	mustCommit(t, inOneTransaction(t, st, "blocker-2", drop, take))
	if drop.GrantsChanged || take.GrantsChanged {
		t.Fatalf("a grant passed from one document to another: GrantsChanged %v, %v; want false, false", drop.GrantsChanged, take.GrantsChanged)
	}
	if n := countOf(t, st, app, bob); n != 1 {
		t.Fatalf("grant_counts for %v = %d, want 1", bob, n)
	}

	// All but one let go of crew together; then the last one alone.
	ws = ws[:0]
	for i := range 29 {
		ws = append(ws, withGrants(&store.Write{AppID: app, DB: "d", ID: fmt.Sprintf("crew-%02d", i), BaseRev: "1-a", Rev: "2-a", Body: []byte(`{}`), Path: "http", Time: a.Time}))
	}
	mustCommit(t, inOneTransaction(t, st, "blocker-3", ws...))
	if n := countOf(t, st, app, crew); n != 1 {
		t.Fatalf("grant_counts for %v = %d, want 1", crew, n)
	}
	last := withGrants(&store.Write{AppID: app, DB: "d", ID: "crew-29", BaseRev: "1-a", Rev: "2-a", Deleted: true, Path: "http", Time: a.Time})
	if _, err := st.Commit(context.Background(), last); err != nil {
		t.Fatal(err)
	}
	if !last.GrantsChanged {
		t.Fatal("the last giver of a grant was deleted: GrantsChanged is false")
	}
	var rows int
	if err := st.rdb.QueryRow(`SELECT count(*) FROM grant_counts WHERE app_id = ? AND kind = 'role'`, app).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("grant_counts keeps %d rows for a grant nobody gives (%v)", rows, err)
	}
}

// checkGrantRows fails unless grant_counts holds, for each grant, the
// number of grants rows giving it, and no tombstone keeps grants rows.
func checkGrantRows(t *testing.T, st *Store, app int64) {
	t.Helper()
	var wrong int
	err := st.rdb.QueryRow(`WITH c AS (SELECT kind, principal, channel, n FROM grant_counts WHERE app_id = ?1),
		g AS (SELECT kind, principal, channel, count(*) AS n FROM grants WHERE app_id = ?1 GROUP BY 1, 2, 3)
		SELECT (SELECT count(*) FROM c LEFT JOIN g USING (kind, principal, channel) WHERE g.n IS NOT c.n)
			+ (SELECT count(*) FROM g LEFT JOIN c USING (kind, principal, channel) WHERE c.n IS NOT g.n)
			+ (SELECT count(*) FROM grants r JOIN docs d ON d.app_id = r.app_id AND d.db = r.db AND d.id = r.doc_id
				WHERE r.app_id = ?1 AND (d.deleted OR NOT d.has_grants))`, app).Scan(&wrong)
	if err != nil || wrong != 0 {
		t.Fatalf("grant_counts and grants disagree in %d places (%v)", wrong, err)
	}
}

// TestGrantsThroughOneTransaction writes documents several times in one
// transaction: grants that move and come back, a delete and a recreate,
// a refused write, a document created and deleted, a grant given twice.
// Then a transaction that fails is retried write by write. The counts
// always match the rows, and the grants in force are those of the live
// heads.
func TestGrantsThroughOneTransaction(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir())
	app := newApp(t, st)
	first, ws, refused, appear, roles := storetest.GrantRewrites(app, "d", time.Now())
	for _, w := range first {
		if _, err := st.Commit(context.Background(), w); err != nil {
			t.Fatal(err)
		}
	}
	for i, err := range inOneTransaction(t, st, "blocker-1", ws...) {
		if want := i == refused; (err != nil) != want || want && !errors.Is(err, store.ErrHeadMoved) {
			t.Fatalf("write %d (%s on %q): %v", i, ws[i].ID, ws[i].BaseRev, err)
		}
	}
	checkGrantRows(t, st, app)
	for _, i := range appear {
		if !ws[i].GrantsChanged {
			t.Fatalf("write %d (%s) made a role appear: GrantsChanged is false", i, ws[i].ID)
		}
	}
	storetest.WantRoles(t, st, app, roles...)

	// A write to a missing app fails the transaction; the others are
	// committed alone, each reporting its own change.
	role := func(p string) store.Grant { return store.Grant{Kind: "role", Principal: p, Channel: "c"} }
	bad := withGrants(put(app+1000, "d", "bad", `{}`), role("Q"))
	ws = []*store.Write{withGrants(put(app, "d", "p1", `{}`), role("P")),
		withGrants(&store.Write{AppID: app, DB: "d", ID: "x", BaseRev: "3-a", Rev: "4-a", Body: []byte(`{}`), Path: "http", Time: time.Now()}),
		bad, withGrants(put(app, "d", "p2", `{}`), role("P"))}
	for i, err := range inOneTransaction(t, st, "blocker-2", ws...) {
		if (err != nil) != (i == 2) {
			t.Fatalf("write %d (%s): %v", i, ws[i].ID, err)
		}
	}
	checkGrantRows(t, st, app)
	if !ws[0].GrantsChanged || !ws[1].GrantsChanged || ws[3].GrantsChanged {
		t.Fatalf("GrantsChanged: P appears %v, A vanishes %v, P again %v; want true, true, false",
			ws[0].GrantsChanged, ws[1].GrantsChanged, ws[3].GrantsChanged)
	}
	storetest.WantRoles(t, st, app, "C", "D", "E", "H", "P")
}
