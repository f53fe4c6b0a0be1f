package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store"
)

// TestAccessDecisionsNoStoreHolds: access.js naming a channel, a user or
// a role with NUL is the app's error (access_error), the same on both
// stores, not a storage failure on PostgreSQL.
func TestAccessDecisionsNoStoreHolds(t *testing.T) {
	t.Parallel()
	const accessJS = `const nul = String.fromCharCode(0);
export function jobs(doc) {
  if (doc.c) return { channels: [doc.c + nul] };
  if (doc.u) return { channels: ["a"], grant: { users: { [doc.u + nul]: ["a"] } } };
  if (doc.r) return { members: { [doc.r + nul]: ["alice"] } };
  return { channels: ["a"] };
}`
	bothStores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		e := engine.New(st, engine.Options{Code: jsapp.New(jsapp.Options{})})
		admin := engine.Actor{User: engine.AdminUser, Admin: true}
		if _, err := e.Bootstrap(ctx, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.CreateApp(ctx, admin, "admin/app", false); err != nil {
			t.Fatal(err)
		}
		if err := e.SetAccessTimeout(ctx, admin, "admin/app", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Deploy(ctx, admin, "admin/app", accessJS, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Put(ctx, admin, "admin/app", "jobs", "ok", []byte(`{}`), appcode.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{`{"c":"a"}`, `{"u":"alice"}`, `{"r":"editor"}`} {
			_, err := e.Put(ctx, admin, "admin/app", "jobs", "bad", []byte(body), appcode.PutOptions{})
			if !errs.Is(err, errs.AccessError) {
				t.Errorf("Put(%s) = %v; want access_error", body, err)
			}
		}
	})
}
