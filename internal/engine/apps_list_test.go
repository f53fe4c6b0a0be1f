package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store/sqlite"
)

// countingCompiler counts the access.js files it compiles.
type countingCompiler struct {
	appcode.Compiler
	n *atomic.Int64
}

func (c countingCompiler) CompileAccess(filename, source string) (appcode.AccessFunc, error) {
	c.n.Add(1)
	return c.Compiler.CompileAccess(filename, source)
}

// TestListingAppsLoadsNoCode: a server's app list reads the apps and their
// members, never their code: with thousands of apps, listing them compiled
// every one.
func TestListingAppsLoadsNoCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var before, after atomic.Int64
	e := engine.New(st, engine.Options{Code: countingCompiler{jsapp.New(jsapp.Options{}), &before}})
	tok, err := e.Bootstrap(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	admin, err := e.Authenticate(ctx, tok)
	if err != nil {
		t.Fatal(err)
	}
	bobTok, err := e.AddUser(ctx, admin, "bob")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"admin/a", "admin/b", "admin/c"} {
		if _, err := e.CreateApp(ctx, admin, ref, false); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Deploy(ctx, admin, ref, "export default function () { return {} }", ""); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.AddMember(ctx, admin, "admin/b", "bob", engine.RoleEditor); err != nil {
		t.Fatal(err)
	}
	// A fresh engine over the same store has loaded nothing.
	fresh := engine.New(st, engine.Options{Code: countingCompiler{jsapp.New(jsapp.Options{}), &after}})
	apps, err := fresh.Apps(ctx, admin)
	if err != nil || len(apps) != 3 {
		t.Fatalf("Apps(admin) = %+v, %v", apps, err)
	}
	bob, err := fresh.Authenticate(ctx, bobTok)
	if err != nil {
		t.Fatal(err)
	}
	apps, err = fresh.Apps(ctx, bob)
	if err != nil || len(apps) != 1 || apps[0].App != "admin/b" || len(apps[0].Roles) != 1 || apps[0].Roles[0] != engine.RoleEditor {
		t.Fatalf("Apps(bob) = %+v, %v", apps, err)
	}
	if n := after.Load(); n != 0 {
		t.Fatalf("listing the apps compiled %d access.js files, want none", n)
	}
	if n := fresh.LoadedApps(); n != 0 {
		t.Fatalf("LoadedApps after a listing = %d, want 0", n)
	}
	if _, err := fresh.Get(ctx, admin, "admin/a", "docs", "x"); err == nil {
		t.Fatal("Get of a missing document found one")
	}
	if n := fresh.LoadedApps(); n != 1 {
		t.Fatalf("LoadedApps after a read of one app = %d, want 1", n)
	}
}
