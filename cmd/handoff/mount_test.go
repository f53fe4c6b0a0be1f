package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeMountsAndReloadsAppFolder: `serve --app owner/name=DIR` creates
// the owner and the app, deploys the folder, redeploys it on every edit,
// and keeps the live version when an edit does not compile.
func TestServeMountsAndReloadsAppFolder(t *testing.T) {
	t.Parallel()
	data, dir := t.TempDir(), t.TempDir()
	access := filepath.Join(dir, "access.js")
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(access, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`export default function (doc) { return { channels: ["all"] }; }`)
	srv := startServerArgs(t, data, []string{"--app", "mo/app=" + dir})
	tokenBytes, err := os.ReadFile(filepath.Join(data, "mo.token"))
	if err != nil {
		t.Fatalf("the owner's token file: %v\n%s", err, srv.log())
	}
	token := strings.TrimSpace(string(tokenBytes))

	must(t, srv.url, token, "db", "put", "--app", "mo/app", "--db", "d", `{"_id":"a"}`)
	versions := func() int {
		r := must(t, srv.url, token, "app", "versions", "--app", "mo/app")
		return strings.Count(r.stdout, `"version"`)
	}
	if n := versions(); n != 1 {
		t.Fatalf("after start: %d versions, want 1", n)
	}

	// The folder is polled: wait (in real time, bounded) for the redeploy.
	write(`export default function () { throw { forbidden: "closed for the night" }; }`)
	waitFor(t, 20*time.Second, func() bool { return versions() == 2 }, srv)
	fails(t, srv.url, token, 4, "error: forbidden: access.js refused the write: closed for the night",
		"db", "put", "--app", "mo/app", "--db", "d", `{"_id":"b"}`)

	write("export default function ( {")
	waitFor(t, 20*time.Second, func() bool { return strings.Contains(srv.log(), "app code not deployed") }, srv)
	if !strings.Contains(srv.log(), "access.js:1:") {
		t.Errorf("the refusal does not name the file, line and column:\n%s", srv.log())
	}
	if n := versions(); n != 2 {
		t.Fatalf("a version that does not compile was deployed: %d versions", n)
	}
	fails(t, srv.url, token, 4, "error: forbidden: access.js refused the write: closed for the night",
		"db", "put", "--app", "mo/app", "--db", "d", `{"_id":"c"}`)

	// Restarting on the same data and folder deploys nothing new (the
	// folder still holds the broken edit, so the live version stays).
	srv.stop(t)
	srv = startServerArgs(t, data, []string{"--app", "mo/app=" + dir})
	if n := versions(); n != 2 {
		t.Fatalf("after a restart: %d versions, want 2", n)
	}
	write(`export default function () { return {}; }`)
	waitFor(t, 20*time.Second, func() bool { return versions() == 3 }, srv)
	must(t, srv.url, token, "db", "put", "--app", "mo/app", "--db", "d", `{"_id":"d"}`)
}

func waitFor(t *testing.T, limit time.Duration, cond func() bool, srv *serverProc) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v:\n%s", limit, srv.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
