package storetest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

func testStoreCode(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	if c, err := e.st.ActiveCode(e.ctx, app); err != nil || c != nil {
		t.Fatalf("ActiveCode of a new app = %+v, %v; want nil", c, err)
	}
	if vs, err := e.st.CodeVersions(e.ctx, app); err != nil || len(vs) != 0 {
		t.Fatalf("CodeVersions of a new app = %+v, %v", vs, err)
	}
	save := func(app int64, access, backend string) int {
		t.Helper()
		v, err := e.st.SaveCode(e.ctx, app, store.CodeVersion{Access: access, Backend: backend, Author: "alice", Created: e.tick()})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	v1 := save(app, "export default () => {}", "")
	v2 := save(app, "", "export function onChange() {}")
	vo := save(other, "x", "y")
	if v1 != 1 || v2 != 2 || vo != 1 {
		t.Fatalf("versions %d, %d, other app %d; want 1, 2, 1", v1, v2, vo)
	}
	active := func(want int, access, backend string) {
		t.Helper()
		c, err := e.st.ActiveCode(e.ctx, app)
		if err != nil || c == nil || c.Version != want || !c.Active || c.Access != access || c.Backend != backend || c.Author != "alice" {
			t.Fatalf("ActiveCode = %+v, %v; want version %d", c, err, want)
		}
	}
	active(2, "", "export function onChange() {}")
	if err := e.st.ActivateCode(e.ctx, app, 1); err != nil {
		t.Fatal(err)
	}
	active(1, "export default () => {}", "")
	if err := e.st.ActivateCode(e.ctx, app, 3); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ActivateCode(missing version): %v, want ErrNotFound", err)
	}
	active(1, "export default () => {}", "")
	vs, err := e.st.CodeVersions(e.ctx, app)
	if err != nil || len(vs) != 2 || vs[0].Version != 1 || !vs[0].Active || vs[1].Version != 2 || vs[1].Active {
		t.Fatalf("CodeVersions = %+v, %v", vs, err)
	}
	if v := save(app, "v3", ""); v != 3 {
		t.Fatalf("version after a rollback = %d, want 3", v)
	}
	active(3, "v3", "")
	if err := e.st.SetAccessTimeout(e.ctx, app, 250*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if a, err := e.st.App(e.ctx, "alice", "jobs"); err != nil || a.AccessTimeout != 250*time.Millisecond {
		t.Fatalf("App after SetAccessTimeout = %+v, %v", a, err)
	}
	e.reopen()
	active(3, "v3", "")
	if a, _ := e.st.App(e.ctx, "alice", "jobs"); a.AccessTimeout != 250*time.Millisecond {
		t.Fatalf("AccessTimeout after reopen = %v", a.AccessTimeout)
	}

	if a, _ := e.st.App(e.ctx, "alice", "jobs"); a.JSMemory != 0 {
		t.Fatalf("a new app's JSMemory = %d, want 0 (the default)", a.JSMemory)
	}
	if err := e.st.SetJSMemory(e.ctx, app, 256); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	if a, _ := e.st.App(e.ctx, "alice", "jobs"); a.JSMemory != 256 {
		t.Fatalf("JSMemory after SetJSMemory and a reopen = %d, want 256", a.JSMemory)
	}

	if a, _ := e.st.App(e.ctx, "alice", "jobs"); len(a.Origins) != 0 {
		t.Fatalf("a new app's origins = %q, want none", a.Origins)
	}
	origins := []string{"http://localhost:5173", "https://jobs.example"}
	if err := e.st.SetOrigins(e.ctx, app, origins); err != nil {
		t.Fatal(err)
	}
	e.reopen()
	if a, _ := e.st.App(e.ctx, "alice", "jobs"); !slices.Equal(a.Origins, origins) {
		t.Fatalf("origins after reopen = %q, want %q", a.Origins, origins)
	}
	if err := e.st.SetOrigins(e.ctx, app, nil); err != nil {
		t.Fatal(err)
	}
	if a, _ := e.st.App(e.ctx, "alice", "jobs"); len(a.Origins) != 0 {
		t.Fatalf("origins after clearing = %q, want none", a.Origins)
	}
}
