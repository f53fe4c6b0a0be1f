package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

// testStoreChannels: a revision's channels come back from every read;
// nil (no access function) and empty (no channel) stay distinct.
func testStoreChannels(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	cases := map[string][]string{"none": nil, "empty": {}, "two": {"ops", "team:a b"}}
	for id, ch := range cases {
		w := e.write(app, "jobs", id, "", "1-a", `{"status":"pending"}`)
		w.Channels = ch
		e.commit(w)
	}
	check := func(what, id string, got []string) {
		t.Helper()
		want := cases[id]
		if (got == nil) != (want == nil) || !slices.Equal(got, want) {
			t.Fatalf("%s(%s) channels = %#v, want %#v", what, id, got, want)
		}
	}
	for id := range cases {
		check("Get", id, e.get(app, "jobs", id).Channels)
		check("History", id, e.history(app, "jobs", id)[0].Channels)
	}
	for _, r := range e.changes(app, "", 0, 100) {
		check("Changes", r.ID, r.Channels)
	}
	scan, err := e.st.Scan(e.ctx, app, "jobs", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range scan {
		check("Scan", d.ID, d.Channels)
	}
	for _, d := range e.query(store.Query{AppID: app, DB: "jobs", Field: "status", Key: []byte(`"pending"`), Limit: 100}) {
		check("Query", d.ID, d.Channels)
	}
	// A tombstone carries the channels it was given (who could read the
	// document sees it go).
	w := e.write(app, "jobs", "two", "1-a", "2-d", "")
	w.Channels = cases["two"]
	e.commit(w)
	check("Get(tombstone)", "two", e.get(app, "jobs", "two").Channels)
}

func g(kind, principal, channel string) store.Grant {
	return store.Grant{Kind: kind, Principal: principal, Channel: channel}
}

func grantSet(gs []store.Grant) []string {
	var out []string
	for _, g := range gs {
		out = append(out, g.Kind+":"+g.Principal+":"+g.Channel)
	}
	slices.Sort(out)
	return out
}

// testStoreGrants: the grants in force are those of live heads: a write
// replaces its document's grants and a tombstone drops them.
func testStoreGrants(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	grants := func(user string) []string {
		t.Helper()
		gs, err := e.st.GrantsFor(e.ctx, app, user)
		if err != nil {
			t.Fatal(err)
		}
		return grantSet(gs)
	}
	w := e.write(app, "jobs", "g1", "", "1-a", `{}`)
	w.Channels = []string{}
	w.Grants = []store.Grant{g("user", "bob", "c1"), g("user", "carol", "c2"), g("role", "ops", "c3"), g("public", "", "c4"), g("member", "bob", "editor")}
	e.commit(w)
	w = e.write(app, "grants", "g2", "", "1-a", `{}`)
	w.Grants = []store.Grant{g("user", "bob", "c5")}
	e.commit(w)
	w = e.write(other, "jobs", "g1", "", "1-a", `{}`)
	w.Grants = []store.Grant{g("user", "bob", "elsewhere"), g("public", "", "elsewhere")}
	e.commit(w)
	wantIDs(t, grants("bob"), []string{"member:bob:editor", "public::c4", "role:ops:c3", "user:bob:c1", "user:bob:c5"}, "GrantsFor(bob)")
	wantIDs(t, grants("carol"), []string{"public::c4", "role:ops:c3", "user:carol:c2"}, "GrantsFor(carol)")
	wantIDs(t, grants(""), []string{"public::c4", "role:ops:c3"}, "GrantsFor(anonymous)")
	if d := e.get(app, "jobs", "g1"); !d.HasGrants {
		t.Fatal("Get of a head with grants: HasGrants is false")
	}

	// A new revision replaces the document's grants.
	w = e.write(app, "jobs", "g1", "1-a", "2-b", `{}`)
	w.Grants = []store.Grant{g("user", "bob", "c9")}
	e.commit(w)
	wantIDs(t, grants("bob"), []string{"user:bob:c5", "user:bob:c9"}, "GrantsFor(bob) after a rewrite")
	wantIDs(t, grants("carol"), nil, "GrantsFor(carol) after a rewrite")
	// A revision without grants removes them.
	e.commit(e.write(app, "grants", "g2", "1-a", "2-b", `{}`))
	if d := e.get(app, "grants", "g2"); d.HasGrants {
		t.Fatal("a head without grants has HasGrants")
	}
	wantIDs(t, grants("bob"), []string{"user:bob:c9"}, "GrantsFor(bob) after a write without grants")
	// A tombstone drops them, even if the write carries some.
	w = e.write(app, "jobs", "g1", "2-b", "3-d", "")
	w.Grants = []store.Grant{g("user", "bob", "ghost")}
	e.commit(w)
	wantIDs(t, grants("bob"), nil, "GrantsFor(bob) after delete")
	// A refused commit leaves them alone.
	w = e.write(app, "jobs", "g3", "", "1-a", `{}`)
	w.Grants = []store.Grant{g("user", "bob", "c10")}
	e.commit(w)
	w = e.write(app, "jobs", "g3", "0-stale", "2-z", `{}`)
	w.Grants = []store.Grant{g("user", "bob", "stale")}
	if _, err := e.st.Commit(e.ctx, w); !errors.Is(err, store.ErrHeadMoved) {
		t.Fatalf("stale commit: %v", err)
	}
	wantIDs(t, grants("bob"), []string{"user:bob:c10"}, "GrantsFor(bob) after a refused commit")
	e.reopen()
	wantIDs(t, grants("bob"), []string{"user:bob:c10"}, "GrantsFor(bob) after reopen")
}

// testStoreGrantsChanged: Commit reports a write that made a grant
// appear or vanish, and not one that left the grants in force as they
// were; writes committed together report the change of their sum.
func testStoreGrantsChanged(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	bob, staff := g("user", "bob", "c"), g("role", "staff", "c")
	steps := []struct {
		what    string
		id      string
		base    string
		deleted bool
		grants  []store.Grant
		changed bool
	}{
		{"a document gives a grant", "g1", "", false, []store.Grant{bob}, true},
		{"it gives the same grant again", "g1", "1-a", false, []store.Grant{bob}, false},
		{"another document gives the same grant", "g2", "", false, []store.Grant{bob}, false},
		{"the first lets go of it, the second still gives it", "g1", "2-a", false, nil, false},
		{"a plain document", "p", "", false, nil, false},
		{"the second gives another grant as well", "g2", "1-a", false, []store.Grant{bob, staff}, true},
		{"the second is deleted", "g2", "2-a", true, nil, true},
	}
	revs := map[string]int{}
	for _, st := range steps {
		revs[st.id]++
		body := `{}`
		if st.deleted {
			body = ""
		}
		w := e.write(app, "d", st.id, st.base, fmt.Sprintf("%d-a", revs[st.id]), body)
		w.Grants = st.grants
		e.commit(w)
		if w.GrantsChanged != st.changed {
			t.Fatalf("%s: GrantsChanged = %v, want %v", st.what, w.GrantsChanged, st.changed)
		}
	}

	// Many new documents giving one grant, committed concurrently (some
	// together, as the store batches them): the grant counts every one
	// of them, and at least one write reports it.
	crew := g("role", "crew", "c")
	var ws []*store.Write
	for i := range 40 {
		w := e.write(app, "d", fmt.Sprintf("crew-%02d", i), "", "1-a", `{}`)
		w.Grants = []store.Grant{crew}
		ws = append(ws, w)
	}
	e.commitAll(ws)
	if !slices.ContainsFunc(ws, func(w *store.Write) bool { return w.GrantsChanged }) {
		t.Fatal("40 documents gave a new grant and no write reported GrantsChanged")
	}
	// They let go of it one by one, together: the grant stays in force
	// until the last, and goes with it.
	for i, w := range ws {
		w2 := e.write(app, "d", w.ID, "1-a", "2-a", `{}`)
		w2.Grants = nil
		if i < len(ws)-1 {
			ws[i] = w2
			continue
		}
		e.commitAll(ws[:i])
		gs, err := e.st.GrantsFor(e.ctx, app, "")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(grantSet(gs), "role:crew:c") {
			t.Fatalf("with one document still giving role:crew:c, the grants in force are %v", grantSet(gs))
		}
		e.commit(w2)
		if !w2.GrantsChanged {
			t.Fatal("the last document giving a grant let go of it: GrantsChanged is false")
		}
	}
	gs, err := e.st.GrantsFor(e.ctx, app, "")
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(grantSet(gs), "role:crew:c") {
		t.Fatalf("no document gives role:crew:c, yet the grants in force are %v", grantSet(gs))
	}
}

// WantRoles fails t unless the roles granted in app (grants of kind
// "role", whoever reads) are want, in any order. Store tests of batching
// use it after writes the suite cannot force into one transaction.
func WantRoles(t *testing.T, st store.Store, app int64, want ...string) {
	t.Helper()
	gs, err := st.GrantsFor(context.Background(), app, "")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, g := range gs {
		if g.Kind == "role" {
			got = append(got, g.Principal)
		}
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Fatalf("roles in force %v, want %v", got, want)
	}
}

// GrantRewrites is a scenario for store tests of batching: writes that
// take documents' grants through several changes within one
// transaction. first are to be committed one by one beforehand; then
// together, in one transaction, where the write at index refused has a
// stale base rev, and the writes at indexes appear make a role appear
// (E and H). Afterwards the roles in force are roles. In together,
// document x's grant moves and comes back, y is deleted and recreated,
// n is created, changed and deleted, and dup gives one grant twice.
func GrantRewrites(app int64, db string, at time.Time) (first, together []*store.Write, refused int, appear []int, roles []string) {
	role := func(p string) store.Grant { return store.Grant{Kind: "role", Principal: p, Channel: "c"} }
	w := func(id, base, rev string, deleted bool, gs ...store.Grant) *store.Write {
		wr := &store.Write{AppID: app, DB: db, ID: id, BaseRev: base, Rev: rev, Deleted: deleted,
			Path: "http", Time: at, Channels: []string{}, Grants: gs}
		if !deleted {
			wr.Body = []byte(`{}`)
		}
		return wr
	}
	first = []*store.Write{w("x", "", "1-a", false, role("A")), w("y", "", "1-a", false, role("C")), w("z", "", "1-a", false, role("D"))}
	together = []*store.Write{
		w("x", "1-a", "2-a", false, role("B")), w("x", "2-a", "3-a", false, role("A")),
		w("y", "1-a", "2-a", true), w("y", "2-a", "3-a", false, role("C")),
		w("z", "9-a", "2-a", false, role("E")), w("z", "1-a", "2-b", false, role("D"), role("E")),
		w("n", "", "1-a", false, role("F")), w("n", "1-a", "2-a", false, role("F"), role("G")), w("n", "2-a", "3-a", true),
		w("dup", "", "1-a", false, role("H"), role("H")),
	}
	return first, together, 4, []int{5, 9}, []string{"A", "C", "D", "E", "H"}
}
