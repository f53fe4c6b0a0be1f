package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/client"
	"github.com/handoff-run/handoff/examples"
)

// migrateBackendJS fails every run, so that the store holds dead and
// waiting events to migrate.
const migrateBackendJS = `
export const config = { onChange: { concurrency: 4, timeout: "5s", maxAttempts: 2 } };
export async function onChange(event, ctx) {
  throw new Error("failing on purpose: " + event.docId);
}
`

// migrateSnapshot is everything the test reads through the API, before
// and after the migration.
type migrateSnapshot struct {
	Apps    []client.App
	Changes map[string][]client.Entry // app db -> the whole feed
	Docs    map[string][]json.RawMessage
	History map[string][]client.Entry
	Members map[string][]client.Member
	Dead    map[string][]int64 // app -> seqs of dead events
}

func readSnapshot(t *testing.T, admin, owner *client.Client) migrateSnapshot {
	t.Helper()
	ctx := context.Background()
	s := migrateSnapshot{Changes: map[string][]client.Entry{}, Docs: map[string][]json.RawMessage{},
		History: map[string][]client.Entry{}, Members: map[string][]client.Member{}, Dead: map[string][]int64{}}
	var err error
	if s.Apps, err = admin.Apps(ctx); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"load/jobs", "load/notes"} {
		if s.Members[a], err = owner.Members(ctx, a); err != nil {
			t.Fatal(err)
		}
		dead, err := owner.Events(ctx, a, true, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range dead {
			s.Dead[a] = append(s.Dead[a], e.Seq)
		}
		for _, db := range []string{"jobs", "notes"} {
			key := a + " " + db
			for since := int64(0); ; {
				page, err := owner.Changes(ctx, a, db, since, 7)
				if err != nil {
					t.Fatal(err)
				}
				if len(page.Changes) == 0 {
					break
				}
				s.Changes[key] = append(s.Changes[key], page.Changes...)
				since = page.Last
			}
			for after := ""; ; {
				page, err := owner.Scan(ctx, a, db, 5, after)
				if err != nil {
					t.Fatal(err)
				}
				s.Docs[key] = append(s.Docs[key], page.Docs...)
				if after = page.Next; after == "" {
					break
				}
			}
		}
	}
	if s.History["note-3"], err = owner.History(ctx, "load/notes", "notes", "note-3"); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMigrate moves a data directory with two apps, documents, deletes,
// code and dead events to an empty PostgreSQL database, then reads the
// same things through a server on PostgreSQL.
func TestMigrate(t *testing.T) {
	t.Parallel() // its own servers, data and database; it mostly waits on them
	pg := freshPostgres(t, 4)
	data, code := t.TempDir(), t.TempDir()
	accessJS, err := examples.Jobs.ReadFile("jobs/access.js")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(code, "access.js"), accessJS, 0o644)
	os.WriteFile(filepath.Join(code, "backend.js"), []byte(migrateBackendJS), 0o644)
	const adminToken = "migrate-test-admin-token-0123456789"
	env := "HANDOFF_ADMIN_TOKEN=" + adminToken
	srv := startServerArgs(t, data, []string{"--app", "load/jobs=" + code}, env)
	tok, err := os.ReadFile(filepath.Join(data, "load.token"))
	if err != nil {
		t.Fatalf("the owner's token: %v\n%s", err, srv.log())
	}
	ctx := context.Background()
	admin, owner := client.New(srv.url, adminToken), client.New(srv.url, strings.TrimSpace(string(tok)))
	waitUntil(t, 30e9, "the code is live", func() bool { return strings.Contains(srv.log(), "deployed the app's code") })
	if _, err := admin.CreateApp(ctx, "load/notes", false); err != nil {
		t.Fatal(err)
	}
	for i := range 12 {
		body := fmt.Appendf(nil, `{"kind":"job","status":"pending","attempts":0,"input":"job %d"}`, i)
		if _, err := owner.Put(ctx, "load/jobs", "jobs", fmt.Sprintf("job-%02d", i), body, client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 30 {
		body := fmt.Appendf(nil, `{"n":%d,"text":"note \u00e9 %d","tags":["a","b"]}`, i, i)
		res, err := owner.Put(ctx, "load/notes", "notes", fmt.Sprintf("note-%d", i), body, client.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case i%10 == 3:
			if _, err := owner.Delete(ctx, "load/notes", "notes", res.ID, res.Rev); err != nil {
				t.Fatal(err)
			}
		case i%7 == 0:
			if _, err := owner.Put(ctx, "load/notes", "notes", res.ID, []byte(`{"n":-1}`), client.PutOptions{IfRev: res.Rev}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitUntil(t, 60e9, "dead events", func() bool {
		dead, err := owner.Events(ctx, "load/jobs", true, 0, 1)
		return err == nil && len(dead) > 0
	})
	// A visitor, with the app's sign-up policy and extra origins.
	signup, origins := "open", []string{"http://localhost:5173"}
	if err := owner.SetSettings(ctx, "load/notes", client.Settings{Signup: &signup, Origins: &origins}); err != nil {
		t.Fatal(err)
	}
	visitor := func(route string) int {
		t.Helper()
		res, err := http.Post(srv.url+"/v1/apps/load/notes/visitors/"+route, "application/json",
			strings.NewReader(`{"name":"sam","password":"long enough"}`))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := visitor("signup"); code != http.StatusCreated {
		t.Fatalf("visitor sign-up: %d", code)
	}
	before := readSnapshot(t, admin, owner)
	srv.stop(t)

	r := must(t, "", "", "migrate", "--from", data, "--to", pg)
	var counts map[string]migrateCounts
	if err := json.Unmarshal([]byte(r.stdout), &counts); err != nil {
		t.Fatalf("migrate printed %q: %v", r.stdout, err)
	}
	from := counts["from"]
	if !reflect.DeepEqual(from, counts["to"]) || from.Apps != 2 || from.Revisions["load/notes"] != 38 ||
		from.LiveDocs["load/notes"] != 27 || from.DeadEvents == 0 || from.CodeVersions != 1 {
		t.Errorf("counts: %s", r.stdout)
	}
	t.Logf("migrate: %s", strings.TrimSpace(r.stdout))
	if r := handoff(t, "", "", "", "migrate", "--from", data, "--to", pg); r.code == 0 || !strings.Contains(r.stderr, "empty") {
		t.Errorf("a second migrate into the same database: %s", r)
	}

	srv = startServerArgs(t, data, []string{"--postgres", pg}, env)
	admin, owner = client.New(srv.url, adminToken), client.New(srv.url, strings.TrimSpace(string(tok)))
	after := readSnapshot(t, admin, owner)
	for _, a := range []string{"load/jobs", "load/notes"} {
		// Waiting events may have run and died since; the dead stay dead.
		for _, seq := range before.Dead[a] {
			if !contains(after.Dead[a], seq) {
				t.Errorf("%s: dead event %d is gone after the migration (%v)", a, seq, after.Dead[a])
			}
		}
	}
	before.Dead, after.Dead = nil, nil
	if !reflect.DeepEqual(before, after) {
		b, _ := json.MarshalIndent(before, "", " ")
		a, _ := json.MarshalIndent(after, "", " ")
		t.Errorf("reads differ after the migration:\nbefore %s\nafter %s", b, a)
	}
	if code := visitor("signin"); code != http.StatusOK {
		t.Errorf("the visitor's sign-in after the migration: %d", code)
	}
	// Writes carry on from the migrated sequence.
	res, err := owner.Put(ctx, "load/notes", "notes", "note-new", []byte(`{"n":100}`), client.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if last := before.Changes["load/notes notes"]; res.Seq <= last[len(last)-1].Seq {
		t.Errorf("a write after the migration got seq %d, not after %d", res.Seq, last[len(last)-1].Seq)
	}
	if _, err := admin.CreateApp(ctx, "load/third", false); err != nil {
		t.Errorf("creating an app after the migration: %v", err)
	}
	srv.stop(t)
}

func contains(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
