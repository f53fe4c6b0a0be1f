package storetest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/handoff-run/handoff/store"
)

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
func (e *env) addMembers(rs []role) {
	e.t.Helper()
	for _, m := range rs {
		if err := e.st.AddMember(e.ctx, m.app, m.user, m.role); err != nil {
			e.t.Fatalf("AddMember(%d, %s, %s): %v", m.app, m.user, m.role, err)
		}
	}
}
