package storetest

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

// storeTests check the store.Store contract without the engine.
var storeTests = []test{
	{"Users", testStoreUsers},
	{"Tokens", testStoreTokens},
	{"Apps", testStoreApps},
	{"Members", testStoreMembers},
	{"RemoveUser", testStoreRemoveUser},
	{"GetMissing", testStoreGetMissing},
	{"CommitAndGet", testStoreCommitAndGet},
	{"CommitHeadMovedWritesNothing", testStoreHeadMoved},
	{"Tombstones", testStoreTombstones},
	{"HistoryLedger", testStoreHistory},
	{"SequencePerApp", testStoreSequence},
	{"Changes", testStoreChanges},
	{"Databases", testStoreDatabases},
	{"Scan", testStoreScan},
	{"QueryValues", testStoreQueryValues},
	{"QueryScope", testStoreQueryScope},
	{"QueryPagination", testStoreQueryPagination},
	{"ConcurrentCommits", testStoreConcurrentCommits},
	{"ConcurrentCommitsOneHead", testStoreConcurrentOneHead},
	{"Channels", testStoreChannels},
	{"Grants", testStoreGrants},
	{"GrantsChanged", testStoreGrantsChanged},
	{"CodeVersions", testStoreCode},
	{"CodeFiles", testStoreCodeFiles},
	{"Reopen", testStoreReopen},
}

func hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func testStoreUsers(t *testing.T, e *env) {
	created := e.clk.Now()
	if err := e.st.CreateUser(e.ctx, store.User{Name: "alice", Created: created}); err != nil {
		t.Fatal(err)
	}
	if err := e.st.CreateUser(e.ctx, store.User{Name: "root", Admin: true, Created: created}); err != nil {
		t.Fatal(err)
	}
	u, err := e.st.User(e.ctx, "alice")
	if err != nil || u.Name != "alice" || u.Admin || !u.Created.Equal(created) {
		t.Fatalf("User(alice) = %+v, %v; want alice, not admin, created %v", u, err, created)
	}
	u, err = e.st.User(e.ctx, "root")
	if err != nil || u.Name != "root" || !u.Admin {
		t.Fatalf("User(root) = %+v, %v; want an admin", u, err)
	}
	if err := e.st.CreateUser(e.ctx, store.User{Name: "alice", Admin: true, Created: created}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("CreateUser(alice) again: %v, want ErrExists", err)
	}
	if u, _ := e.st.User(e.ctx, "alice"); u == nil || u.Admin {
		t.Fatalf("a refused CreateUser changed alice: %+v", u)
	}
	if _, err := e.st.User(e.ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("User(nobody): %v, want ErrNotFound", err)
	}
}

func testStoreTokens(t *testing.T, e *env) {
	e.user("alice", false)
	e.user("root", true)
	for _, tk := range []struct{ user, token string }{{"alice", "a1"}, {"alice", "a2"}, {"root", "r1"}} {
		if err := e.st.AddToken(e.ctx, tk.user, hash(tk.token)); err != nil {
			t.Fatalf("AddToken(%s): %v", tk.user, err)
		}
	}
	for token, want := range map[string]string{"a1": "alice", "a2": "alice", "r1": "root"} {
		u, err := e.st.UserByToken(e.ctx, hash(token))
		if err != nil || u.Name != want || u.Admin != (want == "root") {
			t.Fatalf("UserByToken(%s) = %+v, %v; want %s", token, u, err, want)
		}
	}
	if _, err := e.st.UserByToken(e.ctx, hash("nope")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UserByToken(unknown): %v, want ErrNotFound", err)
	}
	if _, err := e.st.UserByToken(e.ctx, []byte("a1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UserByToken(the clear token): %v, want ErrNotFound", err)
	}
	// ReplaceTokens leaves the user one token, and other users theirs.
	if err := e.st.ReplaceTokens(e.ctx, "alice", hash("a3")); err != nil {
		t.Fatalf("ReplaceTokens(alice): %v", err)
	}
	for token, want := range map[string]string{"a1": "", "a2": "", "a3": "alice", "r1": "root"} {
		u, err := e.st.UserByToken(e.ctx, hash(token))
		switch {
		case want == "" && !errors.Is(err, store.ErrNotFound):
			t.Fatalf("UserByToken(%s) after ReplaceTokens = %+v, %v; want ErrNotFound", token, u, err)
		case want != "" && (err != nil || u.Name != want):
			t.Fatalf("UserByToken(%s) after ReplaceTokens = %+v, %v; want %s", token, u, err, want)
		}
	}
	if err := e.st.ReplaceTokens(e.ctx, "nobody", hash("n1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ReplaceTokens(nobody): %v, want ErrNotFound", err)
	}
	if _, err := e.st.UserByToken(e.ctx, hash("n1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a refused ReplaceTokens stored its token: %v", err)
	}

	// Replacements at once (nodes starting with the same admin token, two
	// rotations racing) all succeed, and leave exactly one token.
	for round := range 3 {
		parallel(t, 8, 8, func(i int) error {
			return e.st.ReplaceTokens(e.ctx, "root", hash(fmt.Sprint("same", round)))
		})
		if u, err := e.st.UserByToken(e.ctx, hash(fmt.Sprint("same", round))); err != nil || u.Name != "root" {
			t.Fatalf("after racing replacements with one token: %+v, %v", u, err)
		}
		parallel(t, 8, 8, func(i int) error {
			return e.st.ReplaceTokens(e.ctx, "root", hash(fmt.Sprint("r", round, "-", i)))
		})
		valid := 0
		for i := range 8 {
			if _, err := e.st.UserByToken(e.ctx, hash(fmt.Sprint("r", round, "-", i))); err == nil {
				valid++
			}
		}
		if valid != 1 {
			t.Fatalf("after 8 racing replacements, %d tokens are valid, want 1", valid)
		}
	}
}

func testStoreApps(t *testing.T, e *env) {
	e.user("alice", false)
	e.user("bob", false)
	created := e.clk.Now()
	mk := func(owner, name string, public bool) *store.App {
		t.Helper()
		a, err := e.st.CreateApp(e.ctx, store.App{Owner: owner, Name: name, Public: public, Created: created})
		if err != nil {
			t.Fatalf("CreateApp(%s/%s): %v", owner, name, err)
		}
		if a.ID == 0 || a.Owner != owner || a.Name != name || a.Public != public {
			t.Fatalf("CreateApp(%s/%s) = %+v", owner, name, a)
		}
		return a
	}
	a1 := mk("alice", "jobs", false)
	a2 := mk("alice", "other", true)
	a3 := mk("bob", "jobs", false) // the same name under another owner
	if a1.ID == a2.ID || a1.ID == a3.ID || a2.ID == a3.ID {
		t.Fatalf("app ids are not distinct: %d %d %d", a1.ID, a2.ID, a3.ID)
	}
	if _, err := e.st.CreateApp(e.ctx, store.App{Owner: "alice", Name: "jobs", Public: true, Created: created}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("CreateApp(alice/jobs) again: %v, want ErrExists", err)
	}
	for _, want := range []*store.App{a1, a2, a3} {
		got, err := e.st.App(e.ctx, want.Owner, want.Name)
		if err != nil || got.ID != want.ID || got.Public != want.Public || !got.Created.Equal(created) {
			t.Fatalf("App(%s/%s) = %+v, %v; want %+v", want.Owner, want.Name, got, err, want)
		}
	}
	for _, ref := range [][2]string{{"alice", "nope"}, {"carol", "jobs"}} {
		if _, err := e.st.App(e.ctx, ref[0], ref[1]); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("App(%s/%s): %v, want ErrNotFound", ref[0], ref[1], err)
		}
	}
	apps, err := e.st.Apps(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, a := range apps {
		got[a.Owner+"/"+a.Name] = a.ID
	}
	want := map[string]int64{"alice/jobs": a1.ID, "alice/other": a2.ID, "bob/jobs": a3.ID}
	if fmt.Sprint(got) != fmt.Sprint(want) || len(apps) != 3 {
		t.Fatalf("Apps = %v, want %v", got, want)
	}
	if e.lastSeq(a1.ID) != 0 {
		t.Fatalf("a new app's LastSeq is %d, want 0", e.lastSeq(a1.ID))
	}
}

// role is a user's role in an app, for addMembers.
type role struct {
	app        int64
	user, role string
}

func (e *env) addMembers(rs []role) {
	e.t.Helper()
	for _, m := range rs {
		if err := e.st.AddMember(e.ctx, m.app, m.user, m.role); err != nil {
			e.t.Fatalf("AddMember(%d, %s, %s): %v", m.app, m.user, m.role, err)
		}
	}
}

func testStoreMembers(t *testing.T, e *env) {
	a1 := e.app("alice", "jobs")
	a2 := e.app("alice", "other")
	e.user("bob", false)
	e.user("carol", false)
	e.addMembers([]role{{a1, "bob", "viewer"}, {a1, "bob", "viewer"}, {a1, "bob", "editor"}, {a1, "carol", "editor"}, {a2, "carol", "viewer"}})
	members := func(app int64) []string {
		ms, err := e.st.Members(e.ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range ms {
			out = append(out, m.User+":"+m.Role)
		}
		slices.Sort(out)
		return out
	}
	wantIDs(t, members(a1), []string{"bob:editor", "bob:viewer", "carol:editor"}, "Members(alice/jobs)")
	wantIDs(t, members(a2), []string{"carol:viewer"}, "Members(alice/other)")
	wantIDs(t, members(e.app("bob", "empty")), nil, "Members(bob/empty)")
}

// testStoreRemoveUser: Users lists everyone; RemoveUser takes a user
// with their tokens, devices and memberships, refuses an owner of apps,
// and leaves a new user of the same name nothing of the old one.
func testStoreRemoveUser(t *testing.T, e *env) {
	a1 := e.app("alice", "jobs")
	a2 := e.app("alice", "other")
	e.user("bob", false)
	e.user("carol", false)
	e.addMembers([]role{{a1, "bob", "viewer"}, {a1, "bob", "editor"}, {a2, "bob", "viewer"}, {a1, "carol", "viewer"}})
	for _, u := range []string{"bob", "carol"} {
		if err := e.st.AddToken(e.ctx, u, hash(u+"-token")); err != nil {
			t.Fatal(err)
		}
		if err := e.st.AddDevice(e.ctx, store.Device{User: u, Name: "ci", PublicKey: hash(u), Created: e.clk.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.RevokeDevice(e.ctx, "bob", "ci", e.clk.Now()); err != nil {
		t.Fatal(err)
	}
	if err := e.st.AddDevice(e.ctx, store.Device{User: "bob", Name: "ci", PublicKey: hash("bob2"), Created: e.clk.Now()}); err != nil {
		t.Fatal(err)
	}
	names := func() []string {
		us, err := e.st.Users(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range us {
			out = append(out, u.Name)
		}
		return out
	}
	if got := names(); !slices.Equal(got, []string{"alice", "bob", "carol"}) {
		t.Fatalf("Users = %q, want alice, bob, carol by name", got)
	}

	if _, err := e.st.RemoveUser(e.ctx, "alice"); !errors.Is(err, store.ErrOwnsApps) {
		t.Fatalf("RemoveUser(alice, who owns apps): %v, want ErrOwnsApps", err)
	}
	if _, err := e.st.User(e.ctx, "alice"); err != nil {
		t.Fatalf("a refused RemoveUser took alice: %v", err)
	}
	if _, err := e.st.RemoveUser(e.ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RemoveUser(nobody): %v, want ErrNotFound", err)
	}
	apps, err := e.st.RemoveUser(e.ctx, "bob")
	if err != nil || !slices.Equal(apps, []int64{min(a1, a2), max(a1, a2)}) {
		t.Fatalf("RemoveUser(bob) = %v, %v; want the apps %d and %d", apps, err, a1, a2)
	}
	if got := names(); !slices.Equal(got, []string{"alice", "carol"}) {
		t.Fatalf("Users after removing bob = %q", got)
	}
	if _, err := e.st.User(e.ctx, "bob"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("User(bob) after RemoveUser: %v, want ErrNotFound", err)
	}
	if _, err := e.st.UserByToken(e.ctx, hash("bob-token")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("bob's token after RemoveUser: %v, want ErrNotFound", err)
	}
	if _, err := e.st.RemoveUser(e.ctx, "bob"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RemoveUser(bob) twice: %v, want ErrNotFound", err)
	}
	// A new bob starts with nothing of the old one.
	e.user("bob", false)
	if _, err := e.st.Device(e.ctx, "bob", "ci"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the new bob has the old one's device: %v", err)
	}
	for _, app := range []int64{a1, a2} {
		ms, err := e.st.Members(e.ctx, app)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.User == "bob" {
				t.Fatalf("the new bob has the old one's role %s in app %d", m.Role, app)
			}
		}
	}
	// Carol keeps everything.
	if u, err := e.st.UserByToken(e.ctx, hash("carol-token")); err != nil || u.Name != "carol" {
		t.Fatalf("carol's token after bob's removal: %+v, %v", u, err)
	}
	if d, err := e.st.Device(e.ctx, "carol", "ci"); err != nil || !d.Revoked.IsZero() {
		t.Fatalf("carol's device after bob's removal: %+v, %v", d, err)
	}
	if ms, err := e.st.Members(e.ctx, a1); err != nil || len(ms) != 1 || ms[0] != (store.Member{User: "carol", Role: "viewer"}) {
		t.Fatalf("members of alice/jobs after bob's removal: %+v, %v; want carol:viewer", ms, err)
	}
}

func testStoreGetMissing(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	if d := e.get(app, "jobs", "nope"); d != nil {
		t.Fatalf("Get(missing) = %+v, want nil", d)
	}
	if h := e.history(app, "jobs", "nope"); len(h) != 0 {
		t.Fatalf("History(missing) = %+v, want none", h)
	}
	if c := e.changes(app, "", 0, 10); len(c) != 0 {
		t.Fatalf("Changes of a new app = %+v, want none", c)
	}
}

func testStoreCommitAndGet(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t1 := e.tick()
	w := e.write(app, "jobs", "j1", "", "1-a", `{"status":"pending","n":1,"tags":["x","y"],"o":{"k":null}}`)
	w.Writer = store.Writer{User: "alice", Device: "laptop"}
	w.Path = "cli"
	if seq := e.commit(w); seq != 1 {
		t.Fatalf("first commit got seq %d, want 1", seq)
	}
	d := e.get(app, "jobs", "j1")
	if d == nil || d.ID != "j1" || d.DB != "jobs" || d.Rev != "1-a" || d.Deleted || d.Seq != 1 || !d.Time.Equal(t1) {
		t.Fatalf("Get = %+v; want j1 at 1-a, seq 1, time %v", d, t1)
	}
	wantJSON(t, d.Body, `{"status":"pending","n":1,"tags":["x","y"],"o":{"k":null}}`, "body")

	t2 := e.tick()
	if seq := e.commit(e.write(app, "jobs", "j1", "1-a", "2-b", `{"status":"running"}`)); seq != 2 {
		t.Fatalf("second commit got seq %d, want 2", seq)
	}
	d = e.get(app, "jobs", "j1")
	if d.Rev != "2-b" || d.Seq != 2 || !d.Time.Equal(t2) {
		t.Fatalf("Get after update = %+v; want 2-b, seq 2, time %v", d, t2)
	}
	wantJSON(t, d.Body, `{"status":"running"}`, "body after update")
	if s := e.lastSeq(app); s != 2 {
		t.Fatalf("LastSeq = %d, want 2", s)
	}
	// The same id in another database is another document.
	if d := e.get(app, "other", "j1"); d != nil {
		t.Fatalf("Get(other/j1) = %+v, want nil", d)
	}
}

// snapshot is everything a refused commit must leave alone.
type snapshot struct {
	seq     int64
	heads   map[string]string
	history map[string]int
	changes int
	dbs     []string
}

func (e *env) snapshot(app int64, ids ...string) snapshot {
	e.t.Helper()
	s := snapshot{seq: e.lastSeq(app), heads: map[string]string{}, history: map[string]int{}}
	for _, id := range ids {
		if d := e.get(app, "jobs", id); d != nil {
			s.heads[id] = fmt.Sprintf("%s deleted=%v seq=%d body=%s", d.Rev, d.Deleted, d.Seq, d.Body)
		}
		s.history[id] = len(e.history(app, "jobs", id))
	}
	s.changes = len(e.changes(app, "", 0, 1000))
	dbs, err := e.st.Databases(e.ctx, app)
	if err != nil {
		e.t.Fatal(err)
	}
	s.dbs = dbs
	return s
}

func testStoreHeadMoved(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	e.commit(e.write(app, "jobs", "x", "", "1-a", `{"v":1}`))
	e.commit(e.write(app, "jobs", "x", "1-a", "2-b", `{"v":2}`))
	e.commit(e.write(app, "jobs", "gone", "", "1-g", `{"v":1}`))
	e.commit(e.write(app, "jobs", "gone", "1-g", "2-g", ""))
	before := e.snapshot(app, "x", "y", "gone")

	refused := []struct {
		name string
		w    *store.Write
	}{
		{"stale base", e.write(app, "jobs", "x", "1-a", "2-z", `{"v":"stale"}`)},
		{"unknown base", e.write(app, "jobs", "x", "7-q", "8-z", `{"v":"unknown"}`)},
		{"no base on an existing doc", e.write(app, "jobs", "x", "", "1-z", `{"v":"blind"}`)},
		{"a base on a missing doc", e.write(app, "jobs", "y", "1-a", "2-z", `{"v":"ghost"}`)},
		{"a base on a missing doc in a new database", e.write(app, "newdb", "y", "1-a", "2-z", `{"v":"ghost"}`)},
		{"a tombstone over a stale base", e.write(app, "jobs", "x", "1-a", "2-d", "")},
		{"no base on a tombstone", e.write(app, "jobs", "gone", "", "1-z", `{"v":"blind"}`)},
		{"the tombstone's previous rev", e.write(app, "jobs", "gone", "1-g", "2-z", `{"v":"old"}`)},
	}
	for _, r := range refused {
		seq, err := e.st.Commit(e.ctx, r.w)
		if !errors.Is(err, store.ErrHeadMoved) {
			t.Fatalf("Commit with %s: seq %d, err %v; want ErrHeadMoved", r.name, seq, err)
		}
	}
	after := e.snapshot(app, "x", "y", "gone")
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("refused commits changed the store:\nbefore %+v\nafter  %+v", before, after)
	}
	// The sequence has no gap: the next good commit takes the next number.
	if seq := e.commit(e.write(app, "jobs", "x", "2-b", "3-c", `{"v":3}`)); seq != before.seq+1 {
		t.Fatalf("commit after refusals got seq %d, want %d", seq, before.seq+1)
	}
	// A tombstone is a head: the write that resurrects it names its rev.
	if seq := e.commit(e.write(app, "jobs", "gone", "2-g", "3-g", `{"v":"back"}`)); seq != before.seq+2 {
		t.Fatalf("resurrecting commit got seq %d, want %d", seq, before.seq+2)
	}
}

func testStoreTombstones(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	e.commit(e.write(app, "jobs", "x", "", "1-a", `{"status":"pending"}`))
	e.commit(e.write(app, "jobs", "keep", "", "1-k", `{"status":"pending"}`))
	t2 := e.tick()
	seq := e.commit(e.write(app, "jobs", "x", "1-a", "2-d", ""))
	d := e.get(app, "jobs", "x")
	if d == nil || !d.Deleted || d.Rev != "2-d" || d.Seq != seq || !d.Time.Equal(t2) || len(d.Body) != 0 {
		t.Fatalf("Get(tombstone) = %+v; want deleted at 2-d, seq %d, no body", d, seq)
	}
	q := store.Query{AppID: app, DB: "jobs", Field: "status", Key: []byte(`"pending"`), Limit: 100}
	wantIDs(t, docIDs(e.query(q)), []string{"keep"}, "Query excludes the tombstone")
	scan, err := e.st.Scan(e.ctx, app, "jobs", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, docIDs(scan), []string{"keep"}, "Scan excludes the tombstone")
	h := e.history(app, "jobs", "x")
	if len(h) != 2 || h[0].Rev != "1-a" || h[0].Deleted || h[1].Rev != "2-d" || !h[1].Deleted || len(h[1].Body) != 0 {
		t.Fatalf("History keeps the tombstone: %+v", h)
	}
	wantJSON(t, h[0].Body, `{"status":"pending"}`, "history keeps the deleted body")
	c := e.changes(app, "jobs", seq-1, 10)
	if len(c) != 1 || c[0].ID != "x" || !c[0].Deleted || c[0].Seq != seq {
		t.Fatalf("Changes show the deletion: %+v", c)
	}

	// Resurrection: a new revision over the tombstone.
	seq = e.commit(e.write(app, "jobs", "x", "2-d", "3-r", `{"status":"pending","again":true}`))
	d = e.get(app, "jobs", "x")
	if d.Deleted || d.Rev != "3-r" || d.Seq != seq {
		t.Fatalf("Get(resurrected) = %+v", d)
	}
	wantIDs(t, docIDs(e.query(q)), []string{"keep", "x"}, "Query finds the resurrected doc")
	if h := e.history(app, "jobs", "x"); len(h) != 3 || h[2].Rev != "3-r" {
		t.Fatalf("History after resurrection: %+v", h)
	}
}

func testStoreHistory(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	type rev struct {
		w    *store.Write
		seq  int64
		time time.Time
	}
	var revs []rev
	add := func(w *store.Write, writer store.Writer, path string) {
		w.Time = e.tick()
		w.Writer, w.Path = writer, path
		revs = append(revs, rev{w: w, seq: e.commit(w), time: w.Time})
	}
	add(e.write(app, "jobs", "x", "", "1-a", `{"status":"pending"}`), store.Writer{User: "alice", Device: "laptop"}, "cli")
	e.commit(e.write(app, "jobs", "noise", "", "1-n", `{}`))
	e.commit(e.write(app, "logs", "x", "", "1-l", `{}`))
	e.commit(e.write(other, "jobs", "x", "", "1-o", `{}`))
	add(e.write(app, "jobs", "x", "1-a", "2-b", `{"status":"running","lease":{"until":30}}`), store.Writer{Handler: "onChange"}, "onChange")
	add(e.write(app, "jobs", "x", "2-b", "3-c", ""), store.Writer{User: "bob"}, "http")
	add(e.write(app, "jobs", "x", "3-c", "4-d", `{"status":"pending"}`), store.Writer{User: "carol", Device: "ci", Handler: "fetch"}, "fetch")

	h := e.history(app, "jobs", "x")
	if len(h) != len(revs) {
		t.Fatalf("History has %d entries, want %d: %+v", len(h), len(revs), h)
	}
	for i, r := range revs {
		got := h[i]
		if got.ID != "x" || got.DB != "jobs" || got.Rev != r.w.Rev || got.Deleted != r.w.Deleted || got.Seq != r.seq ||
			!got.Time.Equal(r.time) || got.Writer != r.w.Writer || got.Path != r.w.Path {
			t.Fatalf("History[%d] = %+v\nwant rev %s deleted %v seq %d time %v writer %+v path %s",
				i, got, r.w.Rev, r.w.Deleted, r.seq, r.time, r.w.Writer, r.w.Path)
		}
		if r.w.Deleted {
			if len(got.Body) != 0 {
				t.Fatalf("History[%d] is a tombstone with a body %s", i, got.Body)
			}
		} else {
			wantJSON(t, got.Body, string(r.w.Body), fmt.Sprintf("History[%d] body", i))
		}
	}
}

func testStoreSequence(t *testing.T, e *env) {
	a := e.app("alice", "a")
	b := e.app("alice", "b")
	steps := []struct {
		app  int64
		db   string
		want int64
	}{{a, "jobs", 1}, {a, "logs", 2}, {b, "jobs", 1}, {a, "jobs", 3}, {b, "x", 2}, {b, "jobs", 3}, {a, "jobs", 4}}
	for i, s := range steps {
		id := fmt.Sprintf("d%d", i)
		seq := e.commit(e.write(s.app, s.db, id, "", "1-a", `{}`))
		if seq != s.want {
			t.Fatalf("commit %d to app %d got seq %d, want %d", i, s.app, seq, s.want)
		}
		if d := e.get(s.app, s.db, id); d.Seq != seq {
			t.Fatalf("head of %s has seq %d, want %d", id, d.Seq, seq)
		}
	}
	if e.lastSeq(a) != 4 || e.lastSeq(b) != 3 {
		t.Fatalf("LastSeq = %d, %d; want 4, 3", e.lastSeq(a), e.lastSeq(b))
	}
}

func testStoreChanges(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	type rec struct {
		db, id, rev string
		deleted     bool
	}
	var all []rec
	heads := map[string]string{}
	for i := range 12 {
		db := []string{"jobs", "logs", "jobs"}[i%3]
		id := fmt.Sprintf("d%d", i%4)
		key := db + "/" + id
		rev := fmt.Sprintf("%d-r%d", i+1, i)
		body := fmt.Sprintf(`{"i":%d}`, i)
		if i == 9 {
			body = "" // a deletion is a change too
		}
		w := e.write(app, db, id, heads[key], rev, body)
		w.Writer = store.Writer{User: "alice", Device: fmt.Sprint("dev", i)}
		e.commit(w)
		heads[key] = rev
		all = append(all, rec{db, id, rev, body == ""})
		e.commit(e.write(other, db, id, heads["other"+key], rev, `{}`))
		heads["other"+key] = rev
	}
	check := func(got []store.Revision, want []rec, wantSeqs []int64, what string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d changes, want %d: %+v", what, len(got), len(want), got)
		}
		for i := range want {
			g := got[i]
			if g.DB != want[i].db || g.ID != want[i].id || g.Rev != want[i].rev || g.Deleted != want[i].deleted || g.Seq != wantSeqs[i] {
				t.Fatalf("%s: change %d = %+v, want %+v at seq %d", what, i, g, want[i], wantSeqs[i])
			}
		}
	}
	seqs := func(from, n int) []int64 {
		var s []int64
		for i := range n {
			s = append(s, int64(from+i))
		}
		return s
	}
	full := e.changes(app, "", 0, 100)
	check(full, all, seqs(1, 12), "Changes(all)")
	for i, c := range full {
		if c.Writer.Device != fmt.Sprint("dev", i) || c.Path != "http" {
			t.Fatalf("change %d lost its writer or path: %+v", i, c)
		}
		if !c.Deleted {
			wantJSON(t, c.Body, fmt.Sprintf(`{"i":%d}`, i), "change body")
		}
	}
	var jobs []rec
	var jobSeqs []int64
	for i, r := range all {
		if r.db == "jobs" {
			jobs = append(jobs, r)
			jobSeqs = append(jobSeqs, int64(i+1))
		}
	}
	check(e.changes(app, "jobs", 0, 100), jobs, jobSeqs, "Changes(jobs)")
	check(e.changes(app, "", 0, 5), all[:5], seqs(1, 5), "Changes(limit 5)")
	check(e.changes(app, "", 5, 100), all[5:], seqs(6, 7), "Changes(since 5)")
	check(e.changes(app, "", 12, 100), nil, nil, "Changes(since last)")
	check(e.changes(app, "nodb", 0, 100), nil, nil, "Changes(unknown db)")

	// Resuming from the last seq of each page gives every change once.
	for _, db := range []string{"", "jobs"} {
		var got []store.Revision
		since := int64(0)
		for page := 0; ; page++ {
			c := e.changes(app, db, since, 3)
			if len(c) > 3 {
				t.Fatalf("Changes(limit 3) returned %d", len(c))
			}
			if len(c) == 0 {
				break
			}
			got = append(got, c...)
			since = c[len(c)-1].Seq
			if page > 20 {
				t.Fatal("Changes paging does not end")
			}
		}
		if db == "" {
			check(got, all, seqs(1, 12), "Changes paged by 3")
		} else {
			check(got, jobs, jobSeqs, "Changes(jobs) paged by 3")
		}
	}
}

func testStoreDatabases(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	if dbs, err := e.st.Databases(e.ctx, app); err != nil || len(dbs) != 0 {
		t.Fatalf("Databases of a new app = %q, %v", dbs, err)
	}
	for i, db := range []string{"zeta", "alpha", "alpha", "mid-1", "m_2"} {
		e.commit(e.write(app, db, fmt.Sprint("d", i), "", "1-a", `{}`))
	}
	e.commit(e.write(other, "bobs", "d", "", "1-a", `{}`))
	dbs, err := e.st.Databases(e.ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, dbs, []string{"alpha", "m_2", "mid-1", "zeta"}, "Databases")
}

func testStoreScan(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	var ws []*store.Write
	var want []string
	for i := range 20 {
		id := fmt.Sprintf("d%02d", i)
		ws = append(ws, e.write(app, "jobs", id, "", "1-a", fmt.Sprintf(`{"i":%d}`, i)))
		if i != 5 {
			want = append(want, id)
		}
	}
	ws = append(ws, e.write(app, "other", "d00x", "", "1-a", `{}`))
	e.commitAll(ws)
	e.commit(e.write(app, "jobs", "d05", "1-a", "2-d", ""))
	scan := func(after string, limit int) []store.Doc {
		t.Helper()
		docs, err := e.st.Scan(e.ctx, app, "jobs", after, limit)
		if err != nil {
			t.Fatal(err)
		}
		return docs
	}
	all := scan("", 100)
	wantIDs(t, docIDs(all), want, "Scan")
	for _, d := range all {
		if d.Rev != "1-a" || d.DB != "jobs" || d.Deleted {
			t.Fatalf("Scan doc %+v", d)
		}
	}
	wantJSON(t, all[3].Body, `{"i":3}`, "Scan body")
	wantIDs(t, docIDs(scan("d10", 3)), []string{"d11", "d12", "d13"}, "Scan after d10 limit 3")
	wantIDs(t, docIDs(scan("d04", 2)), []string{"d06", "d07"}, "Scan over a tombstone")
	wantIDs(t, docIDs(scan("d19", 10)), nil, "Scan after the last")
	wantIDs(t, docIDs(scan("d1", 2)), []string{"d10", "d11"}, "Scan after a prefix")
}

// queryCorpus is a database of values that look alike but are not equal.
var queryCorpus = map[string]string{
	"s1":   `{"status":"pending"}`,
	"s2":   `{"status":"running"}`,
	"s3":   `{"status":"pending","v":1}`,
	"s4":   `{"status":"Pending"}`,
	"s5":   `{"status":"pending "}`,
	"n1":   `{"v":1}`,
	"n2":   `{"v":1.0}`,
	"n3":   `{"v":2}`,
	"n4":   `{"v":-3.5}`,
	"n5":   `{"v":1e3}`,
	"t1":   `{"v":true}`,
	"f1":   `{"v":false}`,
	"z1":   `{"v":0}`,
	"q1":   `{"v":"1"}`,
	"q2":   `{"v":"true"}`,
	"q3":   `{"v":"0"}`,
	"q4":   `{"v":""}`,
	"nl":   `{"v":null}`,
	"ms":   `{"w":1}`,
	"ob":   `{"v":{"x":1}}`,
	"ar":   `{"v":[1]}`,
	"u1":   `{"v":"it's \"quoted\" – ü \\ done"}`,
	"ne1":  `{"a":{"b":{"c":"deep"}},"v":"x"}`,
	"ne2":  `{"a":{"b":"x"}}`,
	"ne3":  `{"a":{"b":1}}`,
	"ne4":  `{"a":"x"}`,
	"dot":  `{"a.b":"x"}`,
	"dash": `{"my-field":"x","my_field":"y"}`,
}

var queryCases = []struct {
	field, key string
	want       []string
}{
	{"status", `"pending"`, []string{"s1", "s3"}},
	{"status", `"running"`, []string{"s2"}},
	{"status", `"nothing"`, nil},
	{"v", `1`, []string{"n1", "n2", "s3"}},
	{"v", `1.0`, []string{"n1", "n2", "s3"}},
	{"v", `2`, []string{"n3"}},
	{"v", `-3.5`, []string{"n4"}},
	{"v", `1000`, []string{"n5"}},
	{"v", `true`, []string{"t1"}},
	{"v", `false`, []string{"f1"}},
	{"v", `0`, []string{"z1"}},
	{"v", `"1"`, []string{"q1"}},
	{"v", `"true"`, []string{"q2"}},
	{"v", `"0"`, []string{"q3"}},
	{"v", `""`, []string{"q4"}},
	{"v", `null`, []string{"nl"}},
	{"v", `"x"`, []string{"ne1"}},
	{"v", `"it's \"quoted\" – ü \\ done"`, []string{"u1"}},
	{"a.b", `"x"`, []string{"ne2"}},
	{"a.b", `1`, []string{"ne3"}},
	{"a.b.c", `"deep"`, []string{"ne1"}},
	{"a", `"x"`, []string{"ne4"}},
	{"my-field", `"x"`, []string{"dash"}},
	{"my_field", `"y"`, []string{"dash"}},
	{"missing", `1`, nil},
}

func testStoreQueryValues(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	var ws []*store.Write
	for _, id := range sortedKeys(queryCorpus) {
		ws = append(ws, e.write(app, "jobs", id, "", "1-a", queryCorpus[id]))
	}
	e.commitAll(ws)
	for _, c := range queryCases {
		got := e.query(store.Query{AppID: app, DB: "jobs", Field: c.field, Key: []byte(c.key), Limit: 100})
		wantIDs(t, docIDs(got), c.want, fmt.Sprintf("Query(%s = %s)", c.field, c.key))
		for _, d := range got {
			if d.DB != "jobs" || d.Rev != "1-a" || d.Deleted || d.Seq == 0 {
				t.Fatalf("Query(%s = %s) returned %+v", c.field, c.key, d)
			}
			wantJSON(t, d.Body, queryCorpus[d.ID], "Query body")
		}
	}
}

func testStoreQueryScope(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	e.commitAll([]*store.Write{
		e.write(app, "jobs", "a1", "", "1-a", `{"status":"pending"}`),
		e.write(app, "jobs", "a2", "", "1-a", `{"status":"pending"}`),
		e.write(app, "jobs", "a3", "", "1-a", `{"status":"pending"}`),
		e.write(app, "other", "o1", "", "1-a", `{"status":"pending"}`),
		e.write(other, "jobs", "b1", "", "1-a", `{"status":"pending"}`),
	})
	e.commit(e.write(app, "jobs", "a2", "1-a", "2-d", ""))
	e.commit(e.write(app, "jobs", "a3", "1-a", "2-b", `{"status":"running"}`))
	q := func(db, key string) []string {
		return docIDs(e.query(store.Query{AppID: app, DB: db, Field: "status", Key: []byte(key), Limit: 100}))
	}
	wantIDs(t, q("jobs", `"pending"`), []string{"a1"}, "Query(pending) without deleted, updated, other db and other app")
	wantIDs(t, q("jobs", `"running"`), []string{"a3"}, "Query(running) sees the new head")
	wantIDs(t, q("other", `"pending"`), []string{"o1"}, "Query(other db)")
	wantIDs(t, q("nodb", `"pending"`), nil, "Query(unknown db)")
	e.commit(e.write(app, "jobs", "a2", "2-d", "3-r", `{"status":"pending"}`))
	wantIDs(t, q("jobs", `"pending"`), []string{"a1", "a2"}, "Query after resurrection")
}

func testStoreQueryPagination(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	var ws []*store.Write
	var want []string
	for i := range 300 {
		id := fmt.Sprintf("doc%04d", (i*7919)%300) // written out of id order
		status := "pending"
		if i%6 == 0 {
			status = "done"
		} else {
			want = append(want, id)
		}
		ws = append(ws, e.write(app, "jobs", id, "", "1-a", fmt.Sprintf(`{"status":%q}`, status)))
	}
	slices.Sort(want)
	e.commitAll(ws)
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		docs := e.query(store.Query{AppID: app, DB: "jobs", Field: "status", Key: []byte(`"pending"`), After: after, Limit: 7})
		if len(docs) > 7 {
			t.Fatalf("page of %d docs with limit 7", len(docs))
		}
		got = append(got, docIDs(docs)...)
		if len(docs) < 7 {
			break
		}
		after = docs[len(docs)-1].ID
		if pages > 100 {
			t.Fatal("pagination does not end")
		}
	}
	if len(want) != 250 {
		t.Fatalf("test corpus has %d matching docs, want 250", len(want))
	}
	wantIDs(t, got, want, "paged Query")
}

// testStoreConcurrentCommits commits 64 documents at once: every commit
// succeeds and the sequence numbers are exactly 1..64.
func testStoreConcurrentCommits(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	const n = 64
	seqs := make([]int64, n)
	parallel(t, n, n, func(i int) error {
		s, err := e.st.Commit(e.ctx, e.write(app, "jobs", fmt.Sprintf("d%02d", i), "", "1-a", fmt.Sprintf(`{"i":%d}`, i)))
		seqs[i] = s
		return err
	})
	sorted := slices.Sorted(slices.Values(seqs))
	for i, s := range sorted {
		if s != int64(i+1) {
			t.Fatalf("sequences of 64 concurrent commits are %v, want 1..64", sorted)
		}
	}
	if e.lastSeq(app) != n {
		t.Fatalf("LastSeq = %d, want %d", e.lastSeq(app), n)
	}
	c := e.changes(app, "", 0, 1000)
	if len(c) != n {
		t.Fatalf("Changes has %d entries, want %d", len(c), n)
	}
	for i, r := range c {
		id := fmt.Sprintf("d%02d", slices.Index(seqs, r.Seq))
		if r.Seq != int64(i+1) || r.ID != id {
			t.Fatalf("change %d = seq %d id %s, want seq %d id %s", i, r.Seq, r.ID, i+1, id)
		}
	}
}

// testStoreConcurrentOneHead commits 32 writes on the same base at once,
// several rounds: exactly one wins each round, the others get
// ErrHeadMoved, and nothing of the losers is written.
func testStoreConcurrentOneHead(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	const n, rounds = 32, 4
	base := ""
	var winners []string
	for round := range rounds {
		results := make([]error, n)
		start := make(chan struct{})
		done := make(chan struct{})
		for i := range n {
			go func() {
				defer func() { done <- struct{}{} }()
				<-start
				_, results[i] = e.st.Commit(e.ctx, e.write(app, "jobs", "hot", base,
					fmt.Sprintf("%d-w%d", round+1, i), fmt.Sprintf(`{"round":%d,"writer":%d}`, round, i)))
			}()
		}
		close(start)
		for range n {
			<-done
		}
		win := -1
		for i, err := range results {
			switch {
			case err == nil && win >= 0:
				t.Fatalf("round %d: writers %d and %d both committed on base %q", round, win, i, base)
			case err == nil:
				win = i
			case !errors.Is(err, store.ErrHeadMoved):
				t.Fatalf("round %d: writer %d: %v, want ErrHeadMoved", round, i, err)
			}
		}
		if win < 0 {
			t.Fatalf("round %d: no writer committed", round)
		}
		base = fmt.Sprintf("%d-w%d", round+1, win)
		winners = append(winners, base)
	}
	var got []string
	for _, r := range e.history(app, "jobs", "hot") {
		got = append(got, r.Rev)
	}
	wantIDs(t, got, winners, "History of the contended doc")
	if e.lastSeq(app) != rounds {
		t.Fatalf("LastSeq = %d, want %d (one per winner)", e.lastSeq(app), rounds)
	}
}

func testStoreReopen(t *testing.T, e *env) {
	created := e.clk.Now()
	if err := e.st.CreateUser(e.ctx, store.User{Name: "root", Admin: true, Created: created}); err != nil {
		t.Fatal(err)
	}
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	if err := e.st.AddToken(e.ctx, "alice", hash("tok")); err != nil {
		t.Fatal(err)
	}
	if err := e.st.AddMember(e.ctx, app, "bob", "editor"); err != nil {
		t.Fatal(err)
	}
	e.commit(e.write(app, "jobs", "x", "", "1-a", `{"status":"pending","n":1}`))
	e.commit(e.write(app, "jobs", "x", "1-a", "2-b", `{"status":"running","n":2}`))
	e.commit(e.write(app, "jobs", "y", "", "1-a", `{"status":"pending"}`))
	e.commit(e.write(app, "jobs", "z", "", "1-a", `{"status":"pending"}`))
	e.commit(e.write(app, "jobs", "z", "1-a", "2-d", ""))
	e.commit(e.write(app, "logs", "l", "", "1-a", `{"status":"pending"}`))
	e.commit(e.write(other, "jobs", "x", "", "1-a", `{"status":"pending"}`))
	q := store.Query{AppID: app, DB: "jobs", Field: "status", Key: []byte(`"pending"`), Limit: 100}
	wantIDs(t, docIDs(e.query(q)), []string{"y"}, "Query before reopen")
	before := fmt.Sprintf("%+v|%+v|%+v|%+v", e.get(app, "jobs", "x"), e.history(app, "jobs", "x"), e.changes(app, "", 0, 100), e.get(app, "jobs", "z"))
	seq := e.lastSeq(app)

	e.reopen()

	after := fmt.Sprintf("%+v|%+v|%+v|%+v", e.get(app, "jobs", "x"), e.history(app, "jobs", "x"), e.changes(app, "", 0, 100), e.get(app, "jobs", "z"))
	if before != after {
		t.Fatalf("documents changed across a reopen:\nbefore %s\nafter  %s", before, after)
	}
	if s := e.lastSeq(app); s != seq {
		t.Fatalf("LastSeq after reopen = %d, want %d", s, seq)
	}
	if u, err := e.st.User(e.ctx, "root"); err != nil || !u.Admin || !u.Created.Equal(created) {
		t.Fatalf("User(root) after reopen = %+v, %v", u, err)
	}
	if u, err := e.st.UserByToken(e.ctx, hash("tok")); err != nil || u.Name != "alice" {
		t.Fatalf("UserByToken after reopen = %+v, %v", u, err)
	}
	if a, err := e.st.App(e.ctx, "alice", "jobs"); err != nil || a.ID != app {
		t.Fatalf("App after reopen = %+v, %v", a, err)
	}
	if _, err := e.st.CreateApp(e.ctx, store.App{Owner: "alice", Name: "jobs", Created: created}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("CreateApp(alice/jobs) after reopen: %v, want ErrExists", err)
	}
	if ms, err := e.st.Members(e.ctx, app); err != nil || len(ms) != 1 || ms[0] != (store.Member{User: "bob", Role: "editor"}) {
		t.Fatalf("Members after reopen = %+v, %v", ms, err)
	}
	if dbs, err := e.st.Databases(e.ctx, app); err != nil || !slices.Equal(dbs, []string{"jobs", "logs"}) {
		t.Fatalf("Databases after reopen = %q, %v", dbs, err)
	}
	wantIDs(t, docIDs(e.query(q)), []string{"y"}, "Query after reopen")

	// Writes go on where they stopped: the head check, the sequence and
	// the query index all continue.
	if _, err := e.st.Commit(e.ctx, e.write(app, "jobs", "x", "1-a", "2-z", `{}`)); !errors.Is(err, store.ErrHeadMoved) {
		t.Fatalf("stale commit after reopen: %v, want ErrHeadMoved", err)
	}
	if s := e.commit(e.write(app, "jobs", "x", "2-b", "3-c", `{"status":"pending"}`)); s != seq+1 {
		t.Fatalf("first commit after reopen got seq %d, want %d", s, seq+1)
	}
	if s := e.commit(e.write(other, "jobs", "x", "1-a", "2-b", `{}`)); s != 2 {
		t.Fatalf("first commit of the other app after reopen got seq %d, want 2", s)
	}
	wantIDs(t, docIDs(e.query(q)), []string{"x", "y"}, "Query after reopen and a write")
}

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

func testStoreCode(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	if c, err := e.st.ActiveCode(e.ctx, app); err != nil || c != nil {
		t.Fatalf("ActiveCode of a new app = %+v, %v; want nil", c, err)
	}
	if vs, err := e.st.CodeVersions(e.ctx, app); err != nil || len(vs) != 0 {
		t.Fatalf("CodeVersions of a new app = %+v, %v", vs, err)
	}
	save := func(app int64, access, backend string) int {
		t.Helper()
		v, err := e.st.SaveCode(e.ctx, app, store.CodeVersion{Access: access, Backend: backend, Author: "alice", Created: e.tick()})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v1 := save(app, "export default () => {}", "")
	v2 := save(app, "", "export function onChange() {}")
	vo := save(other, "x", "y")
	if v1 != 1 || v2 != 2 || vo != 1 {
		t.Fatalf("versions %d, %d, other app %d; want 1, 2, 1", v1, v2, vo)
	}
	active := func(want int, access, backend string) {
		t.Helper()
		c, err := e.st.ActiveCode(e.ctx, app)
		if err != nil || c == nil || c.Version != want || !c.Active || c.Access != access || c.Backend != backend || c.Author != "alice" {
			t.Fatalf("ActiveCode = %+v, %v; want version %d", c, err, want)
		}
	}
	active(2, "", "export function onChange() {}")
	if err := e.st.ActivateCode(e.ctx, app, 1); err != nil {
		t.Fatal(err)
	}
	active(1, "export default () => {}", "")
	if err := e.st.ActivateCode(e.ctx, app, 3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ActivateCode(missing version): %v, want ErrNotFound", err)
	}
	active(1, "export default () => {}", "")
	vs, err := e.st.CodeVersions(e.ctx, app)
	if err != nil || len(vs) != 2 || vs[0].Version != 1 || !vs[0].Active || vs[1].Version != 2 || vs[1].Active {
		t.Fatalf("CodeVersions = %+v, %v", vs, err)
	}
	if v := save(app, "v3", ""); v != 3 {
		t.Fatalf("version after a rollback = %d, want 3", v)
	}
	active(3, "v3", "")
	if err := e.st.SetAccessTimeout(e.ctx, app, 250*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if a, err := e.st.App(e.ctx, "alice", "jobs"); err != nil || a.AccessTimeout != 250*time.Millisecond {
		t.Fatalf("App after SetAccessTimeout = %+v, %v", a, err)
	}
	e.reopen()
	active(3, "v3", "")
	if a, _ := e.st.App(e.ctx, "alice", "jobs"); a.AccessTimeout != 250*time.Millisecond {
		t.Fatalf("AccessTimeout after reopen = %v", a.AccessTimeout)
	}

	if a, _ := e.st.App(e.ctx, "alice", "jobs"); len(a.Origins) != 0 {
		t.Fatalf("a new app's origins = %q, want none", a.Origins)
	}
	origins := []string{"http://localhost:5173", "https://jobs.example"}
	if err := e.st.SetOrigins(e.ctx, app, origins); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	if a, _ := e.st.App(e.ctx, "alice", "jobs"); !slices.Equal(a.Origins, origins) {
		t.Fatalf("origins after reopen = %q, want %q", a.Origins, origins)
	}
	if err := e.st.SetOrigins(e.ctx, app, nil); err != nil {
		t.Fatal(err)
	}
	if a, _ := e.st.App(e.ctx, "alice", "jobs"); len(a.Origins) != 0 {
		t.Fatalf("origins after clearing = %q, want none", a.Origins)
	}
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
