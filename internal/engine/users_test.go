package engine_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/errs"
)

// TestRemoveUser: only the admin lists and removes users; a removed
// user's token, devices and roles stop working at once (the app's cached
// members included), the admin and owners of apps stay.
func TestRemoveUser(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e, ctx, admin := f.e, f.ctx, f.actors["admin"]
	k := f.addDevice("carol", "ci", "")

	if _, err := e.Users(ctx, f.actors["alice"]); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("Users as alice: %v, want forbidden", err)
	}
	if err := e.RemoveUser(ctx, f.actors["alice"], "bob"); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("RemoveUser as alice: %v, want forbidden", err)
	}
	if err := e.RemoveUser(ctx, f.actors["anonymous"], "bob"); !errs.Is(err, errs.Unauthorized) {
		t.Fatalf("RemoveUser anonymously: %v, want unauthorized", err)
	}
	us, err := e.Users(ctx, admin)
	if err != nil || len(us) != 5 || us[0].Name != "admin" || !us[0].Admin || us[1].Name != "alice" ||
		!slices.Equal(us[1].Apps, []string{"alice/jobs", "alice/pub"}) || us[2].Name != "bob" || len(us[2].Apps) != 0 {
		t.Fatalf("Users = %+v, %v", us, err)
	}

	if err := e.RemoveUser(ctx, admin, "admin"); !errs.Is(err, errs.Forbidden) || !strings.Contains(err.Error(), "handoff user token admin") {
		t.Fatalf("RemoveUser(admin): %v, want forbidden", err)
	}
	err = e.RemoveUser(ctx, admin, "alice")
	if !errs.Is(err, errs.Conflict) || !strings.Contains(err.Error(), "alice/jobs, alice/pub") || !strings.Contains(err.Error(), "handoff user token alice") {
		t.Fatalf("RemoveUser(alice, an owner): %v, want conflict naming her apps", err)
	}
	if err := e.RemoveUser(ctx, admin, "nobody"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("RemoveUser(nobody): %v, want not_found", err)
	}

	// Carol reads alice/jobs (so its members are cached), then goes.
	if _, err := e.Get(ctx, f.actors["carol"], "alice/jobs", "jobs", "j1"); err != nil {
		t.Fatal(err)
	}
	if err := e.RemoveUser(ctx, admin, "carol"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Authenticate(ctx, f.tokens["carol"]); !errs.Is(err, errs.Unauthorized) {
		t.Fatalf("carol's token after removal: %v, want unauthorized", err)
	}
	if _, err := f.signedAs(k, "GET", "/v1/whoami", ""); !errs.Is(err, errs.Unauthorized) {
		t.Fatalf("carol's device after removal: %v, want unauthorized", err)
	}
	// A new carol has none of the old one's roles.
	tok, err := e.AddUser(ctx, admin, "carol")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Get(ctx, f.auth(tok), "alice/jobs", "jobs", "j1"); !errs.Is(err, errs.Forbidden) && !errs.Is(err, errs.NotFound) {
		t.Fatalf("the new carol reads alice/jobs: %v", err)
	}
	if us, _ := e.Users(ctx, admin); len(us) != 5 {
		t.Fatalf("users after removing and re-adding carol: %+v", us)
	}
}
