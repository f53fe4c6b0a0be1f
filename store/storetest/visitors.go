package storetest

import (
	"bytes"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
)

var visitorTests = []test{
	{"StoreVisitorRow", testStoreVisitorRow},
	{"StoreRemoveToken", testStoreRemoveToken},
	{"StoreTickets", testStoreTickets},
	{"StorePasskeys", testStorePasskeys},
	{"StoreSignup", testStoreSignup},
	{"SignupPolicy", testVisitorSignupPolicy},
	{"SignIn", testVisitorSignIn},
	{"Scope", testVisitorScope},
	{"SignOut", testVisitorSignOut},
	{"PasskeyCeremonies", testVisitorPasskeyCeremonies},
	{"FeedsEndWithTheirReader", testFeedsEndWithTheirReader},
}

// cheapPasswords makes hashing fast: the suite checks what is stored,
// not argon2id's cost.
func cheapPasswords() { auth.SetPasswordCost(auth.PasswordParams{Memory: 64, Time: 1, Threads: 1}) }

func testStoreVisitorRow(t *testing.T, e *env) {
	e.app("alice", "jobs")
	u := store.User{Name: "sam@jobs--alice", App: "alice/jobs", PasswordHash: "$argon2id$x", Created: e.clk.Now()}
	if err := e.st.CreateUser(e.ctx, u); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	got, err := e.st.User(e.ctx, u.Name)
	if err != nil || got.App != u.App || got.PasswordHash != u.PasswordHash {
		t.Fatalf("User = %+v, %v; want app %s and the hash", got, err, u.App)
	}
	if err := e.st.AddToken(e.ctx, u.Name, hash("v1")); err != nil {
		t.Fatal(err)
	}
	if got, err := e.st.UserByToken(e.ctx, hash("v1")); err != nil || got.App != "alice/jobs" {
		t.Fatalf("UserByToken = %+v, %v; want the visitor's app", got, err)
	}
	if got, _ := e.st.User(e.ctx, "alice"); got.App != "" || got.PasswordHash != "" {
		t.Fatalf("a server user has app %q, hash %q", got.App, got.PasswordHash)
	}
}

func testStoreRemoveToken(t *testing.T, e *env) {
	e.user("alice", false)
	for _, tk := range []string{"a1", "a2"} {
		if err := e.st.AddToken(e.ctx, "alice", hash(tk)); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.st.RemoveToken(e.ctx, hash("a1")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.UserByToken(e.ctx, hash("a1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("removed token still valid: %v", err)
	}
	if u, err := e.st.UserByToken(e.ctx, hash("a2")); err != nil || u.Name != "alice" {
		t.Fatalf("the other token: %+v, %v", u, err)
	}
	if err := e.st.RemoveToken(e.ctx, hash("a1")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("RemoveToken twice: %v, want ErrNotFound", err)
	}
}

func testStoreTickets(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "blog")
	now := e.clk.Now()
	put := func(code string, tk store.Ticket) {
		t.Helper()
		tk.Hash, tk.AppID, tk.Created = hash(code), app, now
		if err := e.st.PutTicket(e.ctx, tk); err != nil {
			t.Fatal(err)
		}
	}
	put("inv", store.Ticket{Kind: "invite"})
	put("cer", store.Ticket{Kind: "ceremony", User: "sam@jobs--alice", Data: []byte(`{"c":1}`), Expires: now.Add(time.Minute)})
	put("old", store.Ticket{Kind: "ceremony", Expires: now.Add(time.Second)})

	take := func(appID int64, kind, code string, at time.Time) (*store.Ticket, error) {
		return e.st.TakeTicket(e.ctx, appID, kind, hash(code), at)
	}
	if _, err := take(other, "invite", "inv", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another app took the invite: %v", err)
	}
	if _, err := take(app, "ceremony", "inv", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an invite was taken as a ceremony: %v", err)
	}
	if tk, err := take(app, "invite", "inv", now); err != nil || !tk.Expires.IsZero() {
		t.Fatalf("take invite = %+v, %v", tk, err)
	}
	if _, err := take(app, "invite", "inv", now); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an invite was taken twice: %v", err)
	}
	tk, err := take(app, "ceremony", "cer", now.Add(30*time.Second))
	if err != nil || tk.User != "sam@jobs--alice" || !bytes.Equal(tk.Data, []byte(`{"c":1}`)) || !tk.Expires.Equal(now.Add(time.Minute)) {
		t.Fatalf("take ceremony = %+v, %v", tk, err)
	}
	if _, err := take(app, "ceremony", "old", now.Add(2*time.Second)); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("an expired ticket was taken: %v", err)
	}
}

func testStorePasskeys(t *testing.T, e *env) {
	e.app("alice", "jobs")
	e.app("bob", "blog")
	for _, u := range []store.User{{Name: "sam@jobs--alice", App: "alice/jobs"}, {Name: "sam@blog--bob", App: "bob/blog"}} {
		u.Created = e.clk.Now()
		if err := e.st.CreateUser(e.ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	add := func(user, id string) error {
		return e.st.AddPasskey(e.ctx, store.Passkey{User: user, ID: []byte(id), Data: []byte("d-" + id), Created: e.tick()})
	}
	for _, id := range []string{"k1", "k2"} {
		if err := add("sam@jobs--alice", id); err != nil {
			t.Fatal(err)
		}
	}
	if err := add("sam@blog--bob", "k1"); !errors.Is(err, store.ErrExists) {
		t.Fatalf("a credential id was stored twice: %v", err)
	}
	ps, err := e.st.Passkeys(e.ctx, "sam@jobs--alice")
	if err != nil || len(ps) != 2 || string(ps[0].ID) != "k1" || string(ps[1].Data) != "d-k2" {
		t.Fatalf("Passkeys = %+v, %v", ps, err)
	}
	if p, err := e.st.PasskeyByID(e.ctx, "alice/jobs", []byte("k2")); err != nil || p.User != "sam@jobs--alice" {
		t.Fatalf("PasskeyByID = %+v, %v", p, err)
	}
	if _, err := e.st.PasskeyByID(e.ctx, "bob/blog", []byte("k2")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("another app's visitor's passkey was found: %v", err)
	}
	if err := e.st.UpdatePasskey(e.ctx, "sam@jobs--alice", []byte("k2"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	if err := e.st.UpdatePasskey(e.ctx, "sam@blog--bob", []byte("k2"), []byte("x")); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UpdatePasskey of another's passkey: %v", err)
	}
	e.reopen()
	if p, _ := e.st.PasskeyByID(e.ctx, "alice/jobs", []byte("k2")); p == nil || string(p.Data) != "new" {
		t.Fatalf("after update and reopen: %+v", p)
	}
	if _, err := e.st.RemoveUser(e.ctx, "sam@jobs--alice"); err != nil {
		t.Fatal(err)
	}
	if ps, _ := e.st.Passkeys(e.ctx, "sam@jobs--alice"); len(ps) != 0 {
		t.Fatalf("a removed visitor's passkeys stayed: %+v", ps)
	}
}

func testStoreSignup(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	if a, _ := e.st.App(e.ctx, "alice", "jobs"); a.Signup != "closed" {
		t.Fatalf("a new app's signup = %q, want closed", a.Signup)
	}
	if err := e.st.SetSignup(e.ctx, app, "open"); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	if as, _ := e.st.Apps(e.ctx); len(as) != 1 || as[0].Signup != "open" {
		t.Fatalf("Apps after SetSignup = %+v", as)
	}
}

// visitorApp makes alice/jobs and bob/blog with sign-up set to policy on
// alice/jobs, and returns alice's actor.
func (e *env) visitorApp(policy string) engine.Actor {
	e.t.Helper()
	cheapPasswords()
	alice := engine.Actor{User: "alice"}
	e.user("alice", false)
	e.user("bob", false)
	for _, ref := range []string{"alice/jobs", "bob/blog"} {
		owner, _, _ := strings.Cut(ref, "/")
		if _, err := e.eng.CreateApp(e.ctx, engine.Actor{User: owner}, ref, false); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := e.eng.SetSignup(e.ctx, alice, "alice/jobs", policy); err != nil {
		e.t.Fatal(err)
	}
	return alice
}

func (e *env) signUp(app, name, password, invite string) (string, engine.Visitor) {
	e.t.Helper()
	token, v, err := e.eng.SignUp(e.ctx, app, name, password, invite)
	if err != nil {
		e.t.Fatalf("SignUp(%s, %s): %v", app, name, err)
	}
	return token, v
}

func testVisitorSignupPolicy(t *testing.T, e *env) {
	alice := e.visitorApp(engine.SignupClosed)
	_, _, err := e.eng.SignUp(e.ctx, "alice/jobs", "sam", "long enough", "")
	wantCode(t, err, errs.Forbidden, "sign-up while closed")
	if !strings.Contains(err.Error(), "--signup open") {
		t.Fatalf("the refusal does not say how to open sign-up: %v", err)
	}
	wantCode(t, e.eng.SetSignup(e.ctx, engine.Actor{User: "bob"}, "alice/jobs", "open"), errs.Forbidden, "bob sets alice's policy")
	wantCode(t, e.eng.SetSignup(e.ctx, alice, "alice/jobs", "wide"), errs.Invalid, "unknown policy")

	if err := e.eng.SetSignup(e.ctx, alice, "alice/jobs", engine.SignupInvite); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.eng.SignUp(e.ctx, "alice/jobs", "sam", "long enough", "")
	wantCode(t, err, errs.Forbidden, "sign-up without an invite")
	_, _, err = e.eng.SignUp(e.ctx, "alice/jobs", "sam", "long enough", "hnd_made-up")
	wantCode(t, err, errs.Forbidden, "sign-up with a made-up invite")
	_, err = e.eng.Invite(e.ctx, engine.Actor{User: "bob"}, "alice/jobs")
	wantCode(t, err, errs.Forbidden, "bob invites to alice's app")
	code, err := e.eng.Invite(e.ctx, alice, "alice/jobs")
	if err != nil {
		t.Fatal(err)
	}
	// A sign-up that fails on its own merits leaves the invite unused.
	_, _, err = e.eng.SignUp(e.ctx, "alice/jobs", "sam", "short", code)
	wantCode(t, err, errs.Invalid, "short password")
	e.signUp("alice/jobs", "sam", "long enough", code)
	_, _, err = e.eng.SignUp(e.ctx, "alice/jobs", "kim", "long enough", code)
	wantCode(t, err, errs.Forbidden, "an invite used twice")
	if code, err = e.eng.Invite(e.ctx, alice, "alice/jobs"); err != nil {
		t.Fatal(err)
	}
	// Without a valid code a taken name is no different from a free one:
	// names cannot be probed without an invite.
	for _, c := range []string{"", "hnd_made-up"} {
		_, _, err = e.eng.SignUp(e.ctx, "alice/jobs", "sam", "long enough", c)
		wantCode(t, err, errs.Forbidden, "a taken name with the invite "+strconv.Quote(c))
	}
	_, _, err = e.eng.SignUp(e.ctx, "alice/jobs", "sam", "long enough", code)
	wantCode(t, err, errs.Exists, "a taken name")
	e.signUp("alice/jobs", "kim", "long enough", code) // the invite survived the refusal

	if err := e.eng.SetSignup(e.ctx, alice, "alice/jobs", engine.SignupOpen); err != nil {
		t.Fatal(err)
	}
	_, v := e.signUp("alice/jobs", "lee", "long enough", "")
	if v.ID != "lee@jobs--alice" || v.Name != "lee" || v.App != "alice/jobs" {
		t.Fatalf("visitor = %+v, want id lee@jobs--alice", v)
	}
	for _, c := range []struct{ name, pw string }{
		{"Lee", "long enough"}, {"a@b", "long enough"}, {"", "long enough"},
		{"max", "1234567"}, {"max", strings.Repeat("x", engine.MaxPasswordBytes+1)},
	} {
		_, _, err := e.eng.SignUp(e.ctx, "alice/jobs", c.name, c.pw, "")
		wantCode(t, err, errs.Invalid, "sign-up as "+c.name)
	}
	// Only an argon2id hash is stored, never the password.
	u, err := e.st.User(e.ctx, "lee@jobs--alice")
	if err != nil || u.App != "alice/jobs" || !strings.HasPrefix(u.PasswordHash, "$argon2id$v=19$") || strings.Contains(u.PasswordHash, "long enough") {
		t.Fatalf("stored visitor = %+v, %v; want an argon2id hash", u, err)
	}
	apps, err := e.eng.Apps(e.ctx, alice)
	if err != nil || len(apps) != 1 || apps[0].Signup != "open" {
		t.Fatalf("Apps = %+v, %v; want signup open", apps, err)
	}
	us, err := e.eng.Users(e.ctx, engine.Actor{User: "root", Admin: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range us {
		if strings.Contains(u.Name, "@") {
			t.Fatalf("the server's users list a visitor: %+v", us)
		}
	}
}

func testVisitorSignIn(t *testing.T, e *env) {
	e.visitorApp(engine.SignupOpen)
	e.signUp("alice/jobs", "sam", "long enough", "")
	token, v, err := e.eng.SignIn(e.ctx, "alice/jobs", "sam", "long enough")
	if err != nil || v.ID != "sam@jobs--alice" {
		t.Fatalf("SignIn = %+v, %v", v, err)
	}
	a, err := e.eng.Authenticate(e.ctx, token)
	if err != nil || a.User != "sam@jobs--alice" || a.App != "alice/jobs" || !a.Visitor() || a.Admin {
		t.Fatalf("Authenticate = %+v, %v; want the visitor scoped to alice/jobs", a, err)
	}
	var msgs []string
	for _, c := range []struct{ app, name, pw string }{
		{"alice/jobs", "sam", "long enougH"},
		{"alice/jobs", "nobody", "long enough"},
		{"alice/jobs", "Not A Name", "long enough"},
	} {
		_, _, err := e.eng.SignIn(e.ctx, c.app, c.name, c.pw)
		wantCode(t, err, errs.Unauthorized, "sign-in "+c.name+"/"+c.pw)
		msgs = append(msgs, err.Error())
	}
	if msgs[0] != msgs[1] || msgs[1] != msgs[2] {
		t.Fatalf("sign-in failures differ, telling which names exist: %q", msgs)
	}
	// The same name on another app is another visitor.
	_, _, err = e.eng.SignIn(e.ctx, "bob/blog", "sam", "long enough")
	wantCode(t, err, errs.Unauthorized, "sign-in on another app")
}

func testVisitorScope(t *testing.T, e *env) {
	alice := e.visitorApp(engine.SignupOpen)
	bob := engine.Actor{User: "bob"}
	if err := e.eng.SetSignup(e.ctx, bob, "bob/blog", engine.SignupOpen); err != nil {
		t.Fatal(err)
	}
	e.put(alice, "alice/jobs", "jobs", "j1", `{"n":1}`, appcode.PutOptions{})
	e.put(bob, "bob/blog", "posts", "p1", `{"n":1}`, appcode.PutOptions{})
	token, _ := e.signUp("alice/jobs", "sam", "long enough", "")
	sam, err := e.eng.Authenticate(e.ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	// Not a member by default: the app's own data is as closed to a new
	// visitor as to any user who is not a member.
	_, err = e.eng.Get(e.ctx, sam, "alice/jobs", "jobs", "j1")
	wantCode(t, err, errs.Forbidden, "a visitor who is no member reads")
	if err := e.eng.AddMember(e.ctx, alice, "alice/jobs", "sam@jobs--alice", "editor"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.Get(e.ctx, sam, "alice/jobs", "jobs", "j1"); err != nil {
		t.Fatalf("a visitor made editor reads: %v", err)
	}
	e.put(sam, "alice/jobs", "jobs", "j2", `{"by":"sam"}`, appcode.PutOptions{})
	wantCode(t, e.eng.AddMember(e.ctx, bob, "bob/blog", "sam@jobs--alice", "editor"), errs.Invalid, "another app's visitor as member")

	// Another app, even one that would let any user in, is refused.
	if err := e.eng.SetPublic(e.ctx, bob, "bob/blog", true); err != nil {
		t.Fatal(err)
	}
	_, err = e.eng.Get(e.ctx, sam, "bob/blog", "posts", "p1")
	wantCode(t, err, errs.Forbidden, "a visitor reads another app")
	_, err = e.eng.Put(e.ctx, sam, "bob/blog", "posts", "p2", []byte(`{}`), appcode.PutOptions{})
	wantCode(t, err, errs.Forbidden, "a visitor writes another app")
	_, err = e.eng.CreateApp(e.ctx, sam, "sam@jobs--alice/x", false)
	wantCode(t, err, errs.Invalid, "a visitor creates an app under its id")
	_, err = e.eng.CreateApp(e.ctx, sam, "alice/other", false)
	wantCode(t, err, errs.Forbidden, "a visitor creates an app")
	_, err = e.eng.AddUser(e.ctx, sam, "eve")
	wantCode(t, err, errs.Forbidden, "a visitor adds a user")
	_, err = e.eng.Users(e.ctx, sam)
	wantCode(t, err, errs.Forbidden, "a visitor lists users")
	_, err = e.eng.RotateToken(e.ctx, sam, "alice")
	wantCode(t, err, errs.Forbidden, "a visitor rotates a token")
	_, err = e.eng.AddDevice(e.ctx, sam, "laptop", make([]byte, 32), "")
	wantCode(t, err, errs.Forbidden, "a visitor adds a device")
	wantCode(t, e.eng.SetSignup(e.ctx, sam, "alice/jobs", "closed"), errs.Forbidden, "a visitor sets the policy")
	_, err = e.eng.Invite(e.ctx, sam, "bob/blog")
	wantCode(t, err, errs.Forbidden, "a visitor invites to another app")
	apps, err := e.eng.Apps(e.ctx, sam)
	if err != nil || len(apps) != 1 || apps[0].App != "alice/jobs" {
		t.Fatalf("a visitor's apps = %+v, %v; want alice/jobs only", apps, err)
	}
}

func testVisitorSignOut(t *testing.T, e *env) {
	e.visitorApp(engine.SignupOpen)
	t1, _ := e.signUp("alice/jobs", "sam", "long enough", "")
	t2, _, err := e.eng.SignIn(e.ctx, "alice/jobs", "sam", "long enough")
	if err != nil {
		t.Fatal(err)
	}
	sam, _ := e.eng.Authenticate(e.ctx, t1)
	wantCode(t, e.eng.SignOut(e.ctx, sam, "bob/blog"), errs.Forbidden, "sign-out at another app")
	wantCode(t, e.eng.SignOut(e.ctx, engine.Actor{User: "alice"}, "alice/jobs"), errs.Invalid, "a user signs out")
	wantCode(t, e.eng.SignOut(e.ctx, engine.Actor{User: sam.User, App: sam.App}, "alice/jobs"), errs.Invalid, "a sign-out without a token")
	if err := e.eng.SignOut(e.ctx, sam, "alice/jobs"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.eng.SignOut(e.ctx, sam, "alice/jobs"), errs.Unauthorized, "a second sign-out revokes nothing")
	_, err = e.eng.Authenticate(e.ctx, t1)
	wantCode(t, err, errs.Unauthorized, "the signed-out token")
	if a, err := e.eng.Authenticate(e.ctx, t2); err != nil || a.User != "sam@jobs--alice" {
		t.Fatalf("the visitor's other token: %+v, %v", a, err)
	}
}

// testVisitorPasskeyCeremonies: a ceremony's state is kept server-side,
// is used once, lasts CeremonyLifetime on the engine's clock, and is
// bound to the visitor who began it. (The browser side of a ceremony is
// in the server's Chromium test.)
func testVisitorPasskeyCeremonies(t *testing.T, e *env) {
	e.visitorApp(engine.SignupOpen)
	rp := engine.PasskeyRP{ID: "jobs--alice.localhost", Origin: "http://jobs--alice.localhost:8080"}
	actor := func(name string) engine.Actor {
		token, _ := e.signUp("alice/jobs", name, "long enough", "")
		a, err := e.eng.Authenticate(e.ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	sam, kim := actor("sam"), actor("kim")
	_, err := e.eng.BeginPasskeyAdd(e.ctx, engine.Actor{User: "alice"}, "alice/jobs", rp)
	wantCode(t, err, errs.Invalid, "a user adds a visitor passkey")
	_, err = e.eng.BeginPasskeyAdd(e.ctx, sam, "bob/blog", rp)
	wantCode(t, err, errs.Forbidden, "a passkey on another app")

	c, err := e.eng.BeginPasskeyAdd(e.ctx, sam, "alice/jobs", rp)
	if err != nil || c.ID == "" {
		t.Fatalf("BeginPasskeyAdd = %+v, %v", c, err)
	}
	// Bound to sam: kim cannot finish it, and trying uses it up.
	wantCode(t, e.eng.FinishPasskeyAdd(e.ctx, kim, "alice/jobs", rp, c.ID, []byte(`{}`)), errs.Invalid, "kim finishes sam's ceremony")
	wantCode(t, e.eng.FinishPasskeyAdd(e.ctx, sam, "alice/jobs", rp, c.ID, []byte(`{}`)), errs.Invalid, "a used ceremony")

	c, _ = e.eng.BeginPasskeyAdd(e.ctx, sam, "alice/jobs", rp)
	err = e.eng.FinishPasskeyAdd(e.ctx, sam, "alice/jobs", rp, c.ID, []byte(`{"id":"x"}`))
	wantCode(t, err, errs.Unauthorized, "a credential that does not verify")

	s, err := e.eng.BeginPasskeySignIn(e.ctx, "alice/jobs", rp)
	if err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(engine.CeremonyLifetime + time.Second)
	_, _, err = e.eng.FinishPasskeySignIn(e.ctx, "alice/jobs", rp, s.ID, []byte(`{"id":"x"}`))
	wantCode(t, err, errs.Invalid, "a ceremony past its lifetime")
	if !strings.Contains(err.Error(), "start again") {
		t.Fatalf("the expiry does not say what to do: %v", err)
	}
	s, _ = e.eng.BeginPasskeySignIn(e.ctx, "alice/jobs", rp)
	e.clk.Advance(engine.CeremonyLifetime - time.Second)
	_, _, err = e.eng.FinishPasskeySignIn(e.ctx, "alice/jobs", rp, s.ID, []byte(`{"id":"x"}`))
	wantCode(t, err, errs.Unauthorized, "a live ceremony with a bad credential")
	// A ceremony belongs to its app: another app's finish does not find
	// it, nor use it up.
	s, _ = e.eng.BeginPasskeySignIn(e.ctx, "alice/jobs", rp)
	_, _, err = e.eng.FinishPasskeySignIn(e.ctx, "bob/blog", rp, s.ID, []byte(`{"id":"x"}`))
	wantCode(t, err, errs.Invalid, "a ceremony finished on another app")
	_, _, err = e.eng.FinishPasskeySignIn(e.ctx, "alice/jobs", rp, s.ID, []byte(`{"id":"x"}`))
	wantCode(t, err, errs.Unauthorized, "the ceremony on its own app")
}
