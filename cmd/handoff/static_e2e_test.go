package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/testenv"
)

// get fetches a URL of the server and returns status and body.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	res, err := testenv.SiteClient().Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestDeployUploadsStaticFiles: `handoff deploy` sends DIR/public/ with
// the code, and the files are served at /apps/OWNER/NAME/.
func TestDeployUploadsStaticFiles(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), "HANDOFF_ADMIN_TOKEN="+adminToken)
	alice := decode[map[string]string](t, must(t, srv.url, adminToken, "user", "add", "alice").stdout)["token"]
	must(t, srv.url, alice, "app", "create", "alice/site")

	dir := t.TempDir()
	for p, s := range map[string]string{
		"access.js":              `export default function () { return {}; }`,
		"public/index.html":      "<h1>hello</h1>",
		"public/css/site.css":    "h1 { color: red }",
		"public/.git/config":     "not uploaded",
		"public/.well-known/x":   "uploaded",
		"public/notes/.DS_Store": "not uploaded",
	} {
		path := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out := decode[map[string]any](t, must(t, srv.url, alice, "deploy", "--app", "alice/site", dir).stdout)
	if out["version"] != 1.0 || out["files"] != 3.0 {
		t.Fatalf("deploy printed %v", out)
	}
	for path, want := range map[string]string{
		"/apps/alice/site/":              "<h1>hello</h1>",
		"/apps/alice/site/css/site.css":  "h1 { color: red }",
		"/apps/alice/site/.well-known/x": "uploaded",
	} {
		if st, body := get(t, srv.url+path); st != 200 || body != want {
			t.Errorf("GET %s: %d %q", path, st, body)
		}
	}
	if st, _ := get(t, srv.url+"/apps/alice/site/.git/config"); st != 404 {
		t.Errorf("a dot folder was uploaded: %d", st)
	}

	// A symbolic link could reach outside the folder: refused, nothing sent.
	if err := os.Symlink("/etc/hostname", filepath.Join(dir, "public", "leak")); err != nil {
		t.Skip("no symlinks here:", err)
	}
	r := fails(t, srv.url, alice, 1, "error: invalid:", "deploy", "--app", "alice/site", dir)
	if !strings.Contains(r.stderr, "symbolic link") {
		t.Fatalf("symlink refusal: %s", r)
	}
}

// TestServeMountsStaticFiles: a mounted folder's public/ is deployed and
// redeployed on edits like its code.
func TestServeMountsStaticFiles(t *testing.T) {
	t.Parallel()
	data, dir := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "public"), 0o755); err != nil {
		t.Fatal(err)
	}
	page := filepath.Join(dir, "public", "index.html")
	if err := os.WriteFile(page, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := startServerArgs(t, data, []string{"--app", "mo/site=" + dir})
	if st, body := get(t, srv.url+"/apps/mo/site/"); st != 200 || body != "one" {
		t.Fatalf("mounted page: %d %q\n%s", st, body, srv.log())
	}
	if err := os.WriteFile(page, []byte("two, longer"), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, func() bool { _, body := get(t, srv.url+"/apps/mo/site/"); return body == "two, longer" }, srv)
}
