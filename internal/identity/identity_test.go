package identity_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/identity"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/sqlite"
)

// TestUsersTokensAndDevices: the service alone, over a store and a clock,
// with hooks standing in for the apps: the admin bootstraps, adds a user
// whose token authenticates, a device scoped to an app the hook refuses
// is refused, and removing a user tells the hook of the apps it was a
// member of.
func TestUsersTokensAndDevices(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewVirtual(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	var changed []string
	id := identity.New(st, clk, identity.Hooks{
		MayRead: func(_ context.Context, _ identity.Actor, appRef string) error {
			if appRef == "bob/secret" {
				return errs.New(errs.Forbidden, "not yours")
			}
			return nil
		},
		MembershipChanged: func(appRef string) { changed = append(changed, appRef) },
	})

	tok, err := id.Bootstrap(ctx, "")
	if err != nil || tok == "" {
		t.Fatalf("Bootstrap = %q, %v", tok, err)
	}
	admin, err := id.Authenticate(ctx, tok)
	if err != nil || !admin.Admin || admin.User != identity.AdminUser {
		t.Fatalf("the admin's token authenticates as %+v, %v", admin, err)
	}
	aliceTok, err := id.AddUser(ctx, admin, "alice")
	if err != nil {
		t.Fatal(err)
	}
	alice, err := id.Authenticate(ctx, aliceTok)
	if err != nil || alice.User != "alice" || alice.Admin {
		t.Fatalf("alice's token authenticates as %+v, %v", alice, err)
	}
	if _, err := id.AddUser(ctx, alice, "mallory"); errs.CodeOf(err) != errs.Forbidden {
		t.Fatalf("a user adding users = %v, want forbidden", err)
	}
	if _, err := id.Authenticate(ctx, "hnd_wrong"); errs.CodeOf(err) != errs.Unauthorized {
		t.Fatalf("a wrong token = %v, want unauthorized", err)
	}

	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	if _, err := id.AddDevice(ctx, alice, "laptop", pub, "bob/secret"); errs.CodeOf(err) != errs.Forbidden {
		t.Fatalf("a device scoped to an app alice may not read = %v, want forbidden", err)
	}
	if _, err := id.AddDevice(ctx, alice, "laptop", pub, "alice/jobs"); err != nil {
		t.Fatal(err)
	}
	if ds, err := id.Devices(ctx, alice); err != nil || len(ds) != 1 || ds[0].App != "alice/jobs" {
		t.Fatalf("alice's devices: %+v, %v", ds, err)
	}

	if err := st.CreateUser(ctx, store.User{Name: "bob", Created: clk.Now()}); err != nil {
		t.Fatal(err)
	}
	app, err := st.CreateApp(ctx, store.App{Owner: "bob", Name: "crew", Created: clk.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddMember(ctx, app.ID, "alice", "crew"); err != nil {
		t.Fatal(err)
	}
	if err := id.RemoveUser(ctx, admin, "alice"); err != nil {
		t.Fatal(err)
	}
	if len(changed) != 1 || changed[0] != "bob/crew" {
		t.Fatalf("apps told of a membership change: %v, want [bob/crew]", changed)
	}
	if _, err := id.Authenticate(ctx, aliceTok); errs.CodeOf(err) != errs.Unauthorized {
		t.Fatalf("a removed user's token = %v, want unauthorized", err)
	}
}
