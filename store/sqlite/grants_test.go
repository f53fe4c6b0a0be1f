package sqlite

import (
	"context"
	"fmt"
	"testing"

	"github.com/handoff-run/handoff/store"
)

// commitTogether commits ws in one transaction: the writer is held while
// they queue, then released.
func commitTogether(t *testing.T, st *Store, ws []*store.Write) {
	t.Helper()
	release, commits := holdWriter(t, st)
	waits := st.wdb.Stats().WaitCount
	first := commitAsync(st, ws[0])
	waitWriterBlocked(t, st, waits)
	var rest []<-chan result
	for i, w := range ws[1:] {
		rest = append(rest, commitAsync(st, w))
		waitQueued(t, st, i+1)
	}
	release()
	for i, ch := range append([]<-chan result{first}, rest...) {
		if r := <-ch; r.err != nil {
			t.Fatalf("commit %d: %v", i, r.err)
		}
	}
	// The first went alone while the writer was held; the rest together.
	if n := commits.Load(); len(ws) > 1 && n != 2 {
		t.Fatalf("%d writes took %d transactions, want 2", len(ws), n)
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
	st := open(t, t.TempDir())
	app := newApp(t, st)
	crew := store.Grant{Kind: "role", Principal: "crew", Channel: "c"}
	bob := store.Grant{Kind: "user", Principal: "bob", Channel: "c"}

	// 30 new documents give one grant in one transaction.
	var ws []*store.Write
	for i := range 30 {
		ws = append(ws, withGrants(put(app, "d", fmt.Sprintf("crew-%02d", i), `{}`), crew))
	}
	commitTogether(t, st, ws)
	if n := countOf(t, st, app, crew); n != 30 {
		t.Fatalf("grant_counts for %v = %d, want 30", crew, n)
	}
	for i, w := range ws[1:] {
		// ws[0] committed alone and made the grant appear; the others
		// added to a count that was already above zero.
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
	commitTogether(t, st, []*store.Write{withGrants(put(app, "d", "filler", `{}`)), drop, take})
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
	commitTogether(t, st, ws)
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
