package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

// TestPermissions checks the default rules of an app without an access
// function: the owner, editors and the admin write; members read;
// anonymous callers read public apps only.
func TestPermissions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e, ctx := f.e, f.ctx
	write := func(who, app string) error {
		_, err := e.Put(ctx, f.actors[who], app, "jobs", "w-"+who, []byte(`{"by":"`+who+`"}`), appcode.PutOptions{})
		return err
	}
	update := func(who, app string) error {
		_, err := e.Put(ctx, f.actors[who], app, "jobs", "j1", []byte(`{"status":"taken"}`), appcode.PutOptions{})
		return err
	}
	del := func(who, app string) error {
		_, err := e.Delete(ctx, f.actors[who], app, "jobs", "j1", "")
		return err
	}
	reads := map[string]func(who, app string) error{
		"get": func(who, app string) error {
			_, err := e.Get(ctx, f.actors[who], app, "jobs", "j1")
			return err
		},
		"query": func(who, app string) error {
			_, err := e.Query(ctx, f.actors[who], app, "jobs", "status", json.RawMessage(`"pending"`), 0, "")
			return err
		},
		"scan": func(who, app string) error {
			_, err := e.Scan(ctx, f.actors[who], app, "jobs", 0, "")
			return err
		},
		"history": func(who, app string) error {
			_, err := e.History(ctx, f.actors[who], app, "jobs", "j1")
			return err
		},
		"changes": func(who, app string) error {
			_, err := e.Changes(ctx, f.actors[who], app, "", 0, 0)
			return err
		},
		"changes of a db": func(who, app string) error {
			_, err := e.Changes(ctx, f.actors[who], app, "jobs", 0, 0)
			return err
		},
		"databases": func(who, app string) error {
			_, err := e.Databases(ctx, f.actors[who], app)
			return err
		},
		"members": func(who, app string) error {
			_, err := e.Members(ctx, f.actors[who], app)
			return err
		},
	}

	// Refused writes first: they must change nothing.
	before := f.state()
	for _, c := range []struct {
		who, app string
		code     errs.Code
	}{
		{"anonymous", "alice/jobs", errs.Unauthorized},
		{"anonymous", "alice/pub", errs.Unauthorized},
		{"dave", "alice/jobs", errs.Forbidden},
		{"dave", "alice/pub", errs.Forbidden},
		{"bob", "alice/jobs", errs.Forbidden}, // a viewer
		{"bob", "alice/pub", errs.Forbidden},  // a viewer of another app
		{"carol", "alice/pub", errs.Forbidden},
	} {
		wantCode(t, write(c.who, c.app), c.code, c.who+" creates in "+c.app)
		wantCode(t, update(c.who, c.app), c.code, c.who+" updates in "+c.app)
		wantCode(t, del(c.who, c.app), c.code, c.who+" deletes in "+c.app)
	}
	for name, read := range reads {
		wantCode(t, read("anonymous", "alice/jobs"), errs.Unauthorized, "anonymous "+name+" of a private app")
		wantCode(t, read("dave", "alice/jobs"), errs.Forbidden, "non-member "+name)
	}
	if after := f.state(); after != before {
		t.Fatalf("refused writes changed the store:\nbefore %s\nafter  %s", before, after)
	}
	// A refusal does not tell a stranger whether a document exists.
	wantCode(t, reads["get"]("dave", "alice/jobs"), errs.Forbidden, "non-member get")
	_, err := e.Get(ctx, f.actors["dave"], "alice/jobs", "jobs", "missing")
	wantCode(t, err, errs.Forbidden, "non-member get of a missing doc")

	for name, read := range reads {
		for _, who := range []string{"alice", "bob", "carol", "admin"} {
			if err := read(who, "alice/jobs"); err != nil {
				t.Fatalf("%s %s of alice/jobs: %v", who, name, err)
			}
		}
		for _, who := range []string{"anonymous", "dave"} {
			if err := read(who, "alice/pub"); err != nil {
				t.Fatalf("%s %s of the public app: %v", who, name, err)
			}
		}
	}
	for _, who := range []string{"carol", "alice", "admin"} {
		if err := write(who, "alice/jobs"); err != nil {
			t.Fatalf("%s writes to alice/jobs: %v", who, err)
		}
		if err := update(who, "alice/jobs"); err != nil {
			t.Fatalf("%s updates alice/jobs: %v", who, err)
		}
	}
	if err := del("carol", "alice/jobs"); err != nil {
		t.Fatalf("an editor deletes: %v", err)
	}
	if err := write("admin", "alice/pub"); err != nil {
		t.Fatalf("admin writes to alice/pub: %v", err)
	}
	// The ledger names the writer the credential belongs to.
	h, err := e.History(ctx, f.actors["alice"], "alice/jobs", "jobs", "w-carol")
	if err != nil || len(h) != 1 || h[0].Writer.User != "carol" {
		t.Fatalf("History(w-carol) = %+v, %v", h, err)
	}
}

func TestRolesAreGranted(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e, ctx := f.e, f.ctx
	dave := f.actors["dave"]
	put := func() error {
		_, err := e.Put(ctx, dave, "alice/jobs", "jobs", "d", []byte(`{}`), appcode.PutOptions{})
		return err
	}
	wantCode(t, put(), errs.Forbidden, "dave before a role")
	// Only the owner or the admin grants roles.
	wantCode(t, e.AddMember(ctx, f.actors["carol"], "alice/jobs", "dave", engine.RoleEditor), errs.Forbidden, "an editor grants a role")
	wantCode(t, e.AddMember(ctx, f.actors["anonymous"], "alice/jobs", "dave", engine.RoleEditor), errs.Unauthorized, "anonymous grants a role")
	wantCode(t, put(), errs.Forbidden, "dave after refused grants")
	if err := e.AddMember(ctx, f.actors["alice"], "alice/jobs", "dave", "viewer"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Get(ctx, dave, "alice/jobs", "jobs", "j1"); err != nil {
		t.Fatalf("a new viewer reads: %v", err)
	}
	wantCode(t, put(), errs.Forbidden, "a new viewer writes")
	if err := e.AddMember(ctx, f.actors["admin"], "alice/jobs", "dave", engine.RoleEditor); err != nil {
		t.Fatal(err)
	}
	if err := put(); err != nil {
		t.Fatalf("a new editor writes: %v", err)
	}
}

func TestCreateAppPermissions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	e, ctx := f.e, f.ctx
	for _, c := range []struct {
		who, ref string
		code     errs.Code
	}{
		{"bob", "alice/mine", errs.Forbidden},
		{"carol", "alice/mine", errs.Forbidden}, // even an editor of alice's apps
		{"anonymous", "bob/x", errs.Unauthorized},
		{"admin", "ghost/x", errs.NotFound}, // the owner must exist
		{"bob", "bob", errs.Invalid},
		{"bob", "bob/Bad", errs.Invalid},
		{"alice", "alice/jobs", errs.Exists},
	} {
		_, err := e.CreateApp(ctx, f.actors[c.who], c.ref, false)
		wantCode(t, err, c.code, c.who+" creates "+c.ref)
	}
	if _, err := e.Get(ctx, f.actors["admin"], "alice/mine", "jobs", "x"); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("a refused CreateApp created the app: %v", err)
	}
	if info, err := e.CreateApp(ctx, f.actors["bob"], "bob/x", false); err != nil || info.Owner != "bob" {
		t.Fatalf("bob creates bob/x: %+v, %v", info, err)
	}
	if info, err := e.CreateApp(ctx, f.actors["admin"], "dave/x", false); err != nil || info.Owner != "dave" {
		t.Fatalf("admin creates dave/x: %+v, %v", info, err)
	}
	// The owner of an app made by the admin writes to it; the admin's
	// app list has every app.
	if _, err := e.Put(ctx, f.actors["dave"], "dave/x", "jobs", "d", []byte(`{}`), appcode.PutOptions{}); err != nil {
		t.Fatalf("dave writes to dave/x: %v", err)
	}
	apps, err := e.Apps(ctx, f.actors["admin"])
	if err != nil || len(apps) != 4 {
		t.Fatalf("Apps(admin) = %+v, %v", apps, err)
	}
	_, err = e.Apps(ctx, f.actors["anonymous"])
	wantCode(t, err, errs.Unauthorized, "anonymous lists apps")
}
