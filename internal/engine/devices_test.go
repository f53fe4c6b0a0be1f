package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/engine"
)

// addDevice makes a key for user's device name and registers it.
func (f *fixture) addDevice(user, name, app string) auth.DeviceKey {
	f.t.Helper()
	k, err := auth.NewDeviceKey(user, name)
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.e.AddDevice(f.ctx, f.actors[user], name, k.Public(), app); err != nil {
		f.t.Fatalf("AddDevice(%s, %s, %q): %v", user, name, app, err)
	}
	return k
}

// signedAs authenticates one request signed by k at the engine's time.
func (f *fixture) signedAs(k auth.DeviceKey, method, target, body string) (engine.Actor, error) {
	cred := strings.TrimPrefix(k.Sign(method, target, []byte(body), f.e.Clock().Now()), auth.SchemeDevice+" ")
	return f.e.AuthenticateDevice(f.ctx, cred, method, target, []byte(body))
}

func TestDeviceLifecycle(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e, ctx := f.e, f.ctx
	k := f.addDevice("carol", "ci", "")

	a, err := f.signedAs(k, "PUT", "/v1/apps/alice/jobs/dbs/jobs/docs/d1", `{"x":1}`)
	if err != nil {
		t.Fatal(err)
	}
	if a.User != "carol" || a.Device != "ci" || a.App != "" || a.Admin || a.Handler != "" {
		t.Fatalf("device actor = %+v", a)
	}
	// The device acts for carol (an editor) and the ledger names it.
	if _, err := e.Put(ctx, a, "alice/jobs", "jobs", "d1", []byte(`{"x":1}`), appcode.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	h, err := e.History(ctx, f.actors["alice"], "alice/jobs", "jobs", "d1")
	if err != nil || len(h) != 1 || h[0].Writer.User != "carol" || h[0].Writer.Device != "ci" {
		t.Fatalf("history = %+v, %v", h, err)
	}

	ds, err := e.Devices(ctx, f.actors["carol"])
	if err != nil || len(ds) != 1 || ds[0].Name != "ci" || ds[0].User != "carol" || ds[0].Revoked != nil {
		t.Fatalf("Devices = %+v, %v", ds, err)
	}
	if ds, _ := e.Devices(ctx, f.actors["bob"]); len(ds) != 0 {
		t.Fatalf("bob sees carol's devices: %+v", ds)
	}

	// Managing devices needs a person's token, not a device.
	wantCode(t, func() error { _, err := e.Devices(ctx, a); return err }(), errs.Forbidden, "a device lists devices")
	_, err = e.AddDevice(ctx, a, "other", k.Public(), "")
	wantCode(t, err, errs.Forbidden, "a device adds a device")
	wantCode(t, e.RevokeDevice(ctx, a, "ci"), errs.Forbidden, "a device revokes itself")
	_, err = e.AddDevice(ctx, f.actors["anonymous"], "x", k.Public(), "")
	wantCode(t, err, errs.Unauthorized, "anonymous adds a device")

	// Bad names, keys and duplicates.
	_, err = e.AddDevice(ctx, f.actors["carol"], "Bad Name", k.Public(), "")
	wantCode(t, err, errs.Invalid, "bad device name")
	_, err = e.AddDevice(ctx, f.actors["carol"], "short", k.Public()[:16], "")
	wantCode(t, err, errs.Invalid, "short key")
	_, err = e.AddDevice(ctx, f.actors["carol"], "ci", k.Public(), "")
	wantCode(t, err, errs.Exists, "duplicate device")
	// A device may be scoped only to an app its user can read.
	_, err = e.AddDevice(ctx, f.actors["dave"], "sneak", k.Public(), "alice/jobs")
	wantCode(t, err, errs.Forbidden, "dave scopes a device to alice/jobs")
	_, err = e.AddDevice(ctx, f.actors["carol"], "ghost", k.Public(), "alice/nope")
	wantCode(t, err, errs.NotFound, "device scoped to a missing app")

	// Another user's device of the same name is another credential.
	other := f.addDevice("bob", "ci", "")
	if a, err := f.signedAs(other, "GET", "/v1/whoami", ""); err != nil || a.User != "bob" {
		t.Fatalf("bob's ci = %+v, %v", a, err)
	}

	// Revoked: refused from the next request on, and listed as revoked.
	if err := e.RevokeDevice(ctx, f.actors["carol"], "ci"); err != nil {
		t.Fatal(err)
	}
	_, err = f.signedAs(k, "GET", "/v1/whoami", "")
	wantCode(t, err, errs.Unauthorized, "revoked device")
	if !strings.Contains(err.Error(), "revoked") {
		t.Errorf("the refusal does not say revoked: %v", err)
	}
	ds, _ = e.Devices(ctx, f.actors["carol"])
	if len(ds) != 1 || ds[0].Revoked == nil {
		t.Fatalf("after revoke: %+v", ds)
	}
	wantCode(t, e.RevokeDevice(ctx, f.actors["carol"], "ci"), errs.NotFound, "revoke twice")
	wantCode(t, e.RevokeDevice(ctx, f.actors["carol"], "nope"), errs.NotFound, "revoke unknown")
	// bob's device of the same name is untouched.
	if _, err := f.signedAs(other, "GET", "/v1/whoami", ""); err != nil {
		t.Fatalf("revoking carol's ci broke bob's: %v", err)
	}
}

func TestDeviceTokens(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	k := f.addDevice("carol", "ci", "")
	now := f.e.Clock().Now()
	verify := func(header, method, target, body string) error {
		_, err := f.e.AuthenticateDevice(f.ctx, strings.TrimPrefix(header, "Device "), method, target, []byte(body))
		return err
	}
	const target = "/v1/apps/alice/jobs/dbs/jobs/docs/d1?ifRev=1-a"
	h := k.Sign("PUT", target, []byte(`{"a":1}`), now)
	if err := verify(h, "PUT", target, `{"a":1}`); err != nil {
		t.Fatal(err)
	}
	wantCode(t, verify(h, "PUT", target, `{"a":1}`), errs.Unauthorized, "replayed token")

	for name, check := range map[string]func() error{
		"other path": func() error {
			return verify(k.Sign("PUT", target, []byte(`{"a":1}`), now), "PUT", "/v1/apps/alice/pub/dbs/jobs/docs/d1?ifRev=1-a", `{"a":1}`)
		},
		"other query": func() error {
			return verify(k.Sign("PUT", target, []byte(`{"a":1}`), now), "PUT", "/v1/apps/alice/jobs/dbs/jobs/docs/d1", `{"a":1}`)
		},
		"other body": func() error {
			return verify(k.Sign("PUT", target, []byte(`{"a":1}`), now), "PUT", target, `{"a":2}`)
		},
		"other method": func() error {
			return verify(k.Sign("PUT", target, []byte(`{"a":1}`), now), "DELETE", target, `{"a":1}`)
		},
		"expired": func() error {
			return verify(k.Sign("PUT", target, []byte(`{"a":1}`), now.Add(-2*time.Minute)), "PUT", target, `{"a":1}`)
		},
		"from the future": func() error {
			return verify(k.Sign("PUT", target, []byte(`{"a":1}`), now.Add(2*time.Minute)), "PUT", target, `{"a":1}`)
		},
		"unknown device": func() error {
			ghost, _ := auth.NewDeviceKey("carol", "ghost")
			return verify(ghost.Sign("GET", "/v1/whoami", nil, now), "GET", "/v1/whoami", "")
		},
		"another key under the same name": func() error {
			forged, _ := auth.NewDeviceKey("carol", "ci")
			return verify(forged.Sign("GET", "/v1/whoami", nil, now), "GET", "/v1/whoami", "")
		},
		"garbage": func() error { return verify("Device abc.def", "GET", "/v1/whoami", "") },
		"empty":   func() error { return verify("Device ", "GET", "/v1/whoami", "") },
	} {
		wantCode(t, check(), errs.Unauthorized, name)
	}

	// A token is good for its lifetime and no longer.
	clk := f.e.Clock().(*clock.Virtual)
	late := k.Sign("GET", "/v1/whoami", nil, clk.Now())
	clk.Advance(auth.TokenLifetime + time.Second)
	wantCode(t, verify(late, "GET", "/v1/whoami", ""), errs.Unauthorized, "token used after its lifetime")
}

func TestScopedDevice(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e, ctx := f.e, f.ctx
	k := f.addDevice("alice", "ci", "alice/jobs")
	a, err := f.signedAs(k, "GET", "/x", "")
	if err != nil || a.App != "alice/jobs" {
		t.Fatalf("scoped actor = %+v, %v", a, err)
	}
	if _, err := e.Put(ctx, a, "alice/jobs", "jobs", "s1", []byte(`{}`), appcode.PutOptions{}); err != nil {
		t.Fatalf("scoped device in its app: %v", err)
	}
	_, err = e.Put(ctx, a, "alice/pub", "jobs", "s1", []byte(`{}`), appcode.PutOptions{})
	wantCode(t, err, errs.Forbidden, "scoped device writes another app")
	_, err = e.Get(ctx, a, "alice/pub", "jobs", "j1")
	wantCode(t, err, errs.Forbidden, "scoped device reads another app (even a public one)")
	_, err = e.CreateApp(ctx, a, "alice/new", false)
	wantCode(t, err, errs.Forbidden, "scoped device creates an app")
	wantCode(t, e.SetSecret(ctx, a, "alice/pub", "K", []byte("v")), errs.Forbidden, "scoped device sets another app's secret")
	apps, err := e.Apps(ctx, a)
	if err != nil || len(apps) != 1 || apps[0].App != "alice/jobs" {
		t.Fatalf("scoped device lists %+v, %v", apps, err)
	}

	// An admin's scoped device is not an admin elsewhere.
	ak := f.addDevice("admin", "deploy", "alice/jobs")
	aa, err := f.signedAs(ak, "GET", "/x", "")
	if err != nil || !aa.Admin {
		t.Fatalf("admin device = %+v, %v", aa, err)
	}
	_, err = e.AddUser(ctx, aa, "mallory")
	wantCode(t, err, errs.Forbidden, "admin's scoped device adds a user")
	_, err = e.Put(ctx, aa, "alice/pub", "jobs", "x", []byte(`{}`), appcode.PutOptions{})
	wantCode(t, err, errs.Forbidden, "admin's scoped device writes another app")
}
