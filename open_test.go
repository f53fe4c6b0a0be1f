package handoff_test

import (
	"context"
	"testing"

	"github.com/handoff-run/handoff"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/enginehook"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store/sqlite"
)

// TestReopen: opening a folder again with the same apps adds no code
// version, and the tables decide at once; changing an app's handlers
// makes a new version live.
func TestReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	app := handoff.App{Name: "alice/work", Public: true, Tables: map[string]handoff.Table{"jobs": jobs}}
	versions := func(o handoff.Options) int {
		h, err := handoff.Open(ctx, dir, o)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if _, err := h.As("alice/work", "bob").Put(ctx, "jobs", "", job{Status: "done"}, handoff.PutOptions{}); !errs.Is(err, errs.Forbidden) {
			t.Fatalf("a write the table refuses: %v", err)
		}
		vs, err := enginehook.Engine(h).CodeVersions(ctx, engine.Actor{User: engine.AdminUser, Admin: true}, "alice/work")
		if err != nil {
			t.Fatal(err)
		}
		return len(vs)
	}
	o := handoff.Options{Apps: []handoff.App{app}}
	if n := versions(o); n != 1 {
		t.Fatalf("first open: %d versions", n)
	}
	if n := versions(o); n != 1 {
		t.Fatalf("the same app again: %d versions; want still 1", n)
	}
	app.OnChange.Handle = func(context.Context, handoff.Change, *handoff.Docs) error { return nil }
	if n := versions(handoff.Options{Apps: []handoff.App{app}}); n != 2 {
		t.Fatalf("with a handler added: %d versions; want 2", n)
	}
}

// TestServedWithoutGo: a server that runs JavaScript on the folder of a
// Go app, without the Go code, refuses the app's writes instead of
// letting them through unchecked.
func TestServedWithoutGo(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	h, err := handoff.Open(ctx, dir, handoff.Options{Apps: []handoff.App{{Name: "alice/work", Tables: map[string]handoff.Table{"jobs": jobs}}}})
	if err != nil {
		t.Fatal(err)
	}
	h.Close()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := engine.New(st, engine.Options{Code: jsapp.New(jsapp.Options{})})
	for _, db := range []string{"jobs", "other"} {
		_, err = e.Put(ctx, engine.Actor{User: "alice"}, "alice/work", db, "j", []byte(`{"status":"pending"}`), appcode.PutOptions{})
		if !errs.Is(err, errs.Forbidden) {
			t.Fatalf("a write to %s under JavaScript: %v; want forbidden", db, err)
		}
	}
}

// TestGrantsAndAccess: a table's grants decide who reads a document, and
// RequireAccess sees the channels its writer was granted.
func TestGrantsAndAccess(t *testing.T) {
	ctx := context.Background()
	rooms := func(w *handoff.Write) (handoff.Decision, error) {
		var d struct {
			Room   string   `json:"room"`
			People []string `json:"people"`
		}
		if err := w.Doc.Decode(&d); err != nil {
			return handoff.Decision{}, err
		}
		if d.People != nil { // the room itself, made by the owner
			if err := w.RequireOwner(); err != nil {
				return handoff.Decision{}, err
			}
			grant := map[string][]string{}
			for _, p := range d.People {
				grant[p] = []string{"room-" + d.Room}
			}
			return handoff.Decision{Channels: []string{"room-" + d.Room}, Grant: handoff.Grant{Users: grant}}, nil
		}
		// A message in a room, by someone who may read it.
		if err := w.RequireAccess("room-" + d.Room); err != nil {
			return handoff.Decision{}, err
		}
		return handoff.Decision{Channels: []string{"room-" + d.Room}}, nil
	}
	h := open(t, handoff.Options{Apps: []handoff.App{{Name: "alice/chat", Public: true, Tables: map[string]handoff.Table{"chat": rooms}}}})
	put := func(user, id, doc string) error {
		_, err := h.As("alice/chat", user).Put(ctx, "chat", id, []byte(doc), handoff.PutOptions{})
		return err
	}
	if err := put("bob", "r1", `{"room":"1","people":["bob"]}`); reason(err) != "only the app's owner may make this change" {
		t.Fatalf("bob makes a room: %v", err)
	}
	if err := put("alice", "r1", `{"room":"1","people":["bob"]}`); err != nil {
		t.Fatal(err)
	}
	if err := put("bob", "m1", `{"room":"1"}`); err != nil {
		t.Fatalf("bob writes in his room: %v", err)
	}
	if err := put("carol", "m2", `{"room":"1"}`); reason(err) != "this change needs access to channel room-1" {
		t.Fatalf("carol writes in bob's room: %v", err)
	}
	if _, err := h.As("alice/chat", "bob").Get(ctx, "chat", "m1"); err != nil {
		t.Fatalf("bob reads his message: %v", err)
	}
	if _, err := h.As("alice/chat", "carol").Get(ctx, "chat", "m1"); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("carol reads bob's message: %v; want forbidden", err)
	}
}
