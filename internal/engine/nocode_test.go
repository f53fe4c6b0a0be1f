package engine_test

import (
	"context"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store/sqlite"
)

// TestEngineWithoutCode: an engine given no compiler refuses deploys of
// code with unavailable, and an app whose live version has access.js,
// deployed by a server that runs code, stays closed to writes there
// rather than open.
func TestEngineWithoutCode(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	withJS := engine.New(st, engine.Options{Code: jsapp.New(jsapp.Options{})})
	tok, _ := withJS.Bootstrap(ctx, "")
	admin, _ := withJS.Authenticate(ctx, tok)
	withJS.AddUser(ctx, admin, "alice")
	if _, err := withJS.CreateApp(ctx, admin, "alice/app", false); err != nil {
		t.Fatal(err)
	}
	if _, err := withJS.Deploy(ctx, admin, "alice/app", `export default function () { return {} }`, ""); err != nil {
		t.Fatal(err)
	}
	withJS.Close()

	bare := engine.New(st, engine.Options{})
	t.Cleanup(bare.Close)
	if _, err := bare.Deploy(ctx, admin, "alice/app", "", `export async function onChange() {}`); errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("deploy on an engine without code = %v, want unavailable", err)
	}
	_, err = bare.Put(ctx, engine.Actor{User: "alice"}, "alice/app", "d", "x", []byte(`{}`), appcode.PutOptions{})
	if errs.CodeOf(err) != errs.Unavailable {
		t.Fatalf("write to a gated database on an engine without code = %v, want unavailable", err)
	}
}
