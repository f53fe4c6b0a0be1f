package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/engine"
)

// following is a live feed read on its own goroutine until it ends.
type following struct {
	changes chan engine.Entry
	ended   chan error
}

// jobsSeq is alice/jobs's latest seq.
func (e *env) jobsSeq() int64 {
	e.t.Helper()
	app, err := e.st.App(e.ctx, "alice", "jobs")
	if err != nil {
		e.t.Fatal(err)
	}
	seq, err := e.st.LastSeq(e.ctx, app.ID)
	if err != nil {
		e.t.Fatal(err)
	}
	return seq
}

// follow opens a feed of alice/jobs's changes from now on as a and reads
// it, each wait an hour long: a feed that ends did so because it was
// told, not at a heartbeat.
func (e *env) follow(a engine.Actor) *following {
	e.t.Helper()
	f, err := e.eng.Follow(e.ctx, a, "alice/jobs", "", e.jobsSeq())
	if err != nil {
		e.t.Fatalf("Follow as %s: %v", a.User, err)
	}
	fl := &following{changes: make(chan engine.Entry, 100), ended: make(chan error, 1)}
	ctx, cancel := context.WithCancel(e.ctx)
	e.t.Cleanup(func() { cancel(); <-fl.ended; f.Close() })
	go func() {
		for {
			c, err := f.Next(ctx, time.Hour)
			if err != nil {
				fl.ended <- err
				return
			}
			for _, en := range c.Changes {
				fl.changes <- en
			}
		}
	}()
	return fl
}

// wantEnded waits for the feed to end with code; no change may have
// reached it first.
func (fl *following) wantEnded(t *testing.T, code errs.Code, what string) {
	t.Helper()
	select {
	case err := <-fl.ended:
		fl.ended <- err // for the cleanup
		wantCode(t, err, code, what)
	case en := <-fl.changes:
		t.Fatalf("%s: the feed delivered %s instead of ending", what, en.ID)
	case <-time.After(30 * time.Second):
		t.Fatalf("%s: the feed is still open", what)
	}
}

// testFeedsEndWithTheirReader: an open feed ends, with the reason, when
// its reader's credential is revoked (a visitor signs out or is removed,
// a device is revoked, a token replaced) or its membership ends, and no
// change committed after that reaches it. Feeds of other readers go on.
func testFeedsEndWithTheirReader(t *testing.T, e *env) {
	alice := e.visitorApp(engine.SignupOpen)
	e.user("root", true)
	root := engine.Actor{User: "root", Admin: true}
	visitor := func(name string) engine.Actor {
		token, v := e.signUp("alice/jobs", name, "long enough", "")
		if err := e.eng.AddMember(e.ctx, alice, "alice/jobs", v.ID, "viewer"); err != nil {
			t.Fatal(err)
		}
		a, err := e.eng.Authenticate(e.ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	member := func(name string) (engine.Actor, string) {
		e.user(name, false)
		if err := e.eng.AddMember(e.ctx, alice, "alice/jobs", name, "viewer"); err != nil {
			t.Fatal(err)
		}
		token, err := e.eng.RotateToken(e.ctx, root, name)
		if err != nil {
			t.Fatal(err)
		}
		a, err := e.eng.Authenticate(e.ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		return a, token
	}
	put := func(id string) {
		t.Helper()
		if _, err := e.eng.Put(e.ctx, alice, "alice/jobs", "jobs", id, []byte(`{"status":"pending"}`), appcode.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	sam, kim, lee := visitor("sam"), visitor("kim"), visitor("lee")
	carol, _ := member("carol")
	dave, _ := member("dave")
	key, err := auth.NewDeviceKey("bob", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if err := e.eng.AddMember(e.ctx, alice, "alice/jobs", "bob", "viewer"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.AddDevice(e.ctx, engine.Actor{User: "bob"}, "laptop", key.Public(), ""); err != nil {
		t.Fatal(err)
	}
	cred := strings.TrimPrefix(key.Sign("GET", "/v1/apps/alice/jobs/feed", nil, e.clk.Now()), auth.SchemeDevice+" ")
	laptop, err := e.eng.AuthenticateDevice(e.ctx, cred, "GET", "/v1/apps/alice/jobs/feed", nil)
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		what   string
		reader engine.Actor
		code   errs.Code
		revoke func() error
	}{
		{"a visitor signs out", sam, errs.Unauthorized, func() error { return e.eng.SignOut(e.ctx, sam, "alice/jobs") }},
		{"a visitor is removed", kim, errs.Unauthorized, func() error { return e.eng.RemoveUser(e.ctx, root, kim.User) }},
		{"a device is revoked", laptop, errs.Unauthorized, func() error { return e.eng.RevokeDevice(e.ctx, engine.Actor{User: "bob"}, "laptop") }},
		{"a membership ends", carol, errs.Forbidden, func() error { return e.eng.RemoveMember(e.ctx, alice, "alice/jobs", "carol", "") }},
		{"a token is replaced", dave, errs.Unauthorized, func() error { _, err := e.eng.RotateToken(e.ctx, root, "dave"); return err }},
	}
	stay := e.follow(lee)
	for i, c := range cases {
		fl := e.follow(c.reader)
		put(fmt.Sprint("before-", i))
		select {
		case <-fl.changes:
		case err := <-fl.ended:
			t.Fatalf("%s: the feed ended before the revocation: %v", c.what, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: the feed saw no change", c.what)
		}
		if err := c.revoke(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		put(fmt.Sprint("after-", i))
		fl.wantEnded(t, c.code, c.what)
	}
	for i := range cases {
		for _, id := range []string{fmt.Sprint("before-", i), fmt.Sprint("after-", i)} {
			select {
			case en := <-stay.changes:
				if en.ID != id {
					t.Fatalf("the visitor still signed in saw %s, want %s", en.ID, id)
				}
			case err := <-stay.ended:
				t.Fatalf("the feed of a visitor still signed in ended: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatalf("the visitor still signed in did not see %s", id)
			}
		}
	}

	// A device revoked and added again under the same name is a new
	// device: the old key's feed ends.
	key2, err := auth.NewDeviceKey("bob", "phone")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.AddDevice(e.ctx, engine.Actor{User: "bob"}, "phone", key2.Public(), ""); err != nil {
		t.Fatal(err)
	}
	cred = strings.TrimPrefix(key2.Sign("GET", "/v1/apps/alice/jobs/feed", nil, e.clk.Now()), auth.SchemeDevice+" ")
	phone, err := e.eng.AuthenticateDevice(e.ctx, cred, "GET", "/v1/apps/alice/jobs/feed", nil)
	if err != nil {
		t.Fatal(err)
	}
	fl := e.follow(phone)
	if err := e.eng.RevokeDevice(e.ctx, engine.Actor{User: "bob"}, "phone"); err != nil {
		t.Fatal(err)
	}
	key3, _ := auth.NewDeviceKey("bob", "phone")
	if _, err := e.eng.AddDevice(e.ctx, engine.Actor{User: "bob"}, "phone", key3.Public(), ""); err != nil {
		t.Fatal(err)
	}
	put("after-readd")
	fl.wantEnded(t, errs.Unauthorized, "a device revoked and added again")

	// A credential that goes away without the engine being told (another
	// node's word lost on the way) ends the feed within a few heartbeats,
	// whether the feed is idle or busy.
	for _, busy := range []bool{false, true} {
		_, token := member(fmt.Sprint("idle-", busy))
		reader, err := e.eng.Authenticate(e.ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		f, err := e.eng.Follow(e.ctx, reader, "alice/jobs", "", e.jobsSeq())
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := e.st.RemoveToken(e.ctx, engine.HashToken(token)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
		defer cancel()
		for i := 0; ; i++ {
			if busy {
				put(fmt.Sprint("busy-", i))
			}
			c, err := f.Next(ctx, time.Millisecond)
			if err != nil {
				wantCode(t, err, errs.Unauthorized, fmt.Sprintf("a token removed behind the engine's back (busy %v)", busy))
				break
			}
			if !busy && len(c.Changes) > 0 {
				t.Fatalf("an idle feed whose token is gone read %d changes", len(c.Changes))
			}
		}
	}
}
