package main

import (
	"strings"
	"testing"
)

// TestAppMoveCLI: `handoff app move` on a server over two databases, as
// the owner, as someone else, with a database that does not exist; and
// on a server with one store, where there is nowhere to move to.
func TestAppMoveCLI(t *testing.T) {
	t.Parallel() // its own server and databases
	const adminTok = "move-cli-admin-token-0123456789"
	srv := startServerArgs(t, t.TempDir(), []string{"--postgres", freshPostgres(t, 4), "--postgres", freshPostgres(t, 4)},
		"HANDOFF_ADMIN_TOKEN="+adminTok)
	alice := decode[map[string]string](t, must(t, srv.url, adminTok, "user", "add", "alice").stdout)["token"]
	bob := decode[map[string]string](t, must(t, srv.url, adminTok, "user", "add", "bob").stdout)["token"]
	must(t, srv.url, alice, "app", "create", "alice/one")
	must(t, srv.url, alice, "app", "create", "alice/two") // the second database: the first has one app
	must(t, srv.url, alice, "db", "put", "--app", "alice/two", "--db", "jobs", `{"_id":"j1","status":"pending"}`)

	fails(t, srv.url, alice, 2, "error: usage: ", "app", "move", "alice/two")
	fails(t, srv.url, bob, 4, "error: forbidden: ", "app", "move", "alice/two", "--to", "0")
	fails(t, srv.url, alice, 1, "error: invalid: there is no database 2", "app", "move", "alice/two", "--to", "2")
	out := decode[map[string]any](t, must(t, srv.url, alice, "app", "move", "alice/two", "--to", "0").stdout)
	if out["from"] != float64(1) || out["to"] != float64(0) {
		t.Fatalf("app move printed %v, want from 1 to 0", out)
	}
	got := must(t, srv.url, alice, "db", "get", "--app", "alice/two", "--db", "jobs", "j1").stdout
	if !strings.Contains(got, `"pending"`) {
		t.Fatalf("after the move the document reads %s", got)
	}
	must(t, srv.url, adminTok, "app", "move", "alice/two", "--to", "1") // the admin may too

	one := startServer(t, t.TempDir(), "HANDOFF_ADMIN_TOKEN="+adminTok)
	must(t, one.url, adminTok, "app", "create", "admin/solo")
	r := fails(t, one.url, adminTok, 1, "error: invalid: ", "app", "move", "admin/solo", "--to", "1")
	if !strings.Contains(r.stderr, "--postgres") {
		t.Fatalf("moving on a server with one store says %q; want it to say how to get several", r.stderr)
	}
}
