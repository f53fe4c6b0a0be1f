package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/engine"
)

// TestNodesFeedEndsWhenAnotherNodeRevokes: a feed open on node B ends
// with the reason when node A signs its visitor out, revokes its device
// or ends its membership, long before any heartbeat (its waits are an
// hour), and no change committed after the revocation reaches it.
func TestNodesFeedEndsWhenAnotherNodeRevokes(t *testing.T) {
	t.Parallel()
	a, b, _ := twoNodes(t, "alice", "bob", "carol")
	auth.SetPasswordCost(auth.PasswordParams{Memory: 64, Time: 1, Threads: 1})
	ctx := context.Background()
	alice, bob := engine.Actor{User: "alice"}, engine.Actor{User: "bob"}
	const app = "alice/app"
	if _, err := a.CreateApp(ctx, alice, app, false); err != nil {
		t.Fatal(err)
	}
	if err := a.SetSignup(ctx, alice, app, engine.SignupOpen); err != nil {
		t.Fatal(err)
	}
	token, v, err := a.SignUp(ctx, app, "sam", "long enough", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{v.ID, "bob", "carol"} {
		if err := a.AddMember(ctx, alice, app, u, engine.RoleEditor); err != nil {
			t.Fatal(err)
		}
	}
	sam, err := b.Authenticate(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	k, err := auth.NewDeviceKey("bob", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddDevice(ctx, bob, "laptop", k.Public(), ""); err != nil {
		t.Fatal(err)
	}
	cred := strings.TrimPrefix(k.Sign("GET", "/v1/apps", nil, time.Now()), auth.SchemeDevice+" ")
	laptop, err := b.AuthenticateDevice(ctx, cred, "GET", "/v1/apps", nil)
	if err != nil {
		t.Fatal(err)
	}

	n := 0
	for _, c := range []struct {
		what   string
		reader engine.Actor
		code   errs.Code
		revoke func() error
	}{
		{"A signs the visitor out", sam, errs.Unauthorized, func() error { return a.SignOut(ctx, sam, app) }},
		{"A revokes the device", laptop, errs.Unauthorized, func() error { return a.RevokeDevice(ctx, bob, "laptop") }},
		{"A ends the membership", engine.Actor{User: "carol"}, errs.Forbidden, func() error { return a.RemoveMember(ctx, alice, app, "carol", "") }},
	} {
		seq := int64(0)
		if st, err := b.Store().App(ctx, "alice", "app"); err == nil {
			seq, _ = b.Store().LastSeq(ctx, st.ID)
		}
		f, err := b.Follow(ctx, c.reader, app, "", seq)
		if err != nil {
			t.Fatalf("%s: Follow on B: %v", c.what, err)
		}
		ended := make(chan error, 1)
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		go func() {
			for {
				ch, err := f.Next(fctx, time.Hour)
				if err != nil {
					ended <- err
					return
				}
				if len(ch.Changes) > 0 {
					ended <- nil
					return
				}
			}
		}()
		if err := c.revoke(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		n++
		if _, err := a.Put(ctx, alice, app, "d", "after-"+string(rune('0'+n)), []byte(`{}`), appcode.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		err = <-ended
		cancel()
		f.Close()
		if err == nil {
			t.Fatalf("%s: B's feed delivered a change committed after the revocation", c.what)
		}
		if errs.CodeOf(err) != c.code {
			t.Fatalf("%s: B's feed ended with %v; want %s", c.what, err, c.code)
		}
	}
}
