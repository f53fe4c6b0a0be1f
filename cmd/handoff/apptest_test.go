package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/client"
)

func TestInitWritesAnAppThatPassesItsOwnTests(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "myapp")
	out, errOut, code := runIn(t, nil, "", "init", dir)
	if code != 0 {
		t.Fatalf("init: exit %d: %s", code, errOut)
	}
	for _, f := range []string{"access.js", "backend.js", "test/requests.test.js", "public/index.html"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil || !strings.Contains(out, f) {
			t.Errorf("init did not write %s (%v): %s", f, err, out)
		}
	}
	out, errOut, code = runIn(t, nil, "", "test", dir)
	if code != 0 || !strings.Contains(out, "2 passed, 0 failed") {
		t.Fatalf("the starter's own tests: exit %d\n%s%s", code, out, errOut)
	}
	// A second init would overwrite the app: refused, naming the files.
	if _, errOut, code = runIn(t, nil, "", "init", dir); code != 1 || !strings.Contains(errOut, "already holds access.js, backend.js") {
		t.Errorf("init over an app: exit %d: %s", code, errOut)
	}
}

func TestTestCommand(t *testing.T) {
	t.Parallel()
	jobs := filepath.Join("..", "..", "examples", "jobs")
	out, errOut, code := runIn(t, nil, "", "test", jobs)
	if code != 0 || !strings.Contains(out, "5 passed, 0 failed") || !strings.Contains(out, "running  →  failed") {
		t.Fatalf("handoff test examples/jobs: exit %d\n%s%s", code, out, errOut)
	}

	out, _, code = runIn(t, nil, "", "test", jobs, "--run", "never finishes", "--json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var first, last map[string]any
	if code != 0 || len(lines) != 2 || json.Unmarshal([]byte(lines[0]), &first) != nil || json.Unmarshal([]byte(lines[1]), &last) != nil {
		t.Fatalf("--run --json: exit %d\n%s", code, out)
	}
	if first["type"] != "test" || first["ok"] != true || last["type"] != "summary" || last["passed"] != 1.0 {
		t.Errorf("--json lines: %v / %v", first, last)
	}

	dir := t.TempDir()
	if _, errOut, code := runIn(t, nil, "", "init", dir); code != 0 {
		t.Fatal(errOut)
	}
	broken := "test(\"fails\", async (t) => { t.expect(\"a\").toBe(\"b\") });\n"
	if err := os.WriteFile(filepath.Join(dir, "test", "broken.test.js"), []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	out, _, code = runIn(t, nil, "", "test", dir)
	if code != 1 || !strings.Contains(out, "FAIL  test/broken.test.js › fails") || !strings.Contains(out, "at test/broken.test.js:1:") || !strings.Contains(out, "2 passed, 1 failed") {
		t.Errorf("a failing test: exit %d\n%s", code, out)
	}

	for _, args := range [][]string{{"test", "a", "b"}, {"test", dir, "--run", "("}, {"test", dir, "--against", "nobody"}} {
		if _, errOut, code := runIn(t, nil, "", args...); code != 2 {
			t.Errorf("handoff %q: exit %d, want 2 (usage): %s", args, code, errOut)
		}
	}
	if _, errOut, code := runIn(t, nil, "", "test", t.TempDir()); code == 0 || !strings.Contains(errOut, "neither access.js") {
		t.Errorf("an empty folder: exit %d: %s", code, errOut)
	}
}

// --against lists what the app's history on a server did that no test
// committed: here the owner deleted an answered request, an edge the
// starter's tests never take.
func TestTestAgainstAServersHistory(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a server")
	}
	dir := t.TempDir()
	if _, errOut, code := runIn(t, nil, "", "init", dir); code != 0 {
		t.Fatal(errOut)
	}
	srv := startServer(t, t.TempDir(), "HANDOFF_ADMIN_TOKEN="+adminToken)
	ctx := context.Background()
	c := client.New(srv.url, adminToken)
	if _, err := c.CreateApp(ctx, "admin/asks", false); err != nil {
		t.Fatal(err)
	}
	must(t, srv.url, adminToken, "deploy", "--app", "admin/asks", dir)
	if _, err := c.Put(ctx, "admin/asks", "requests", "q1", json.RawMessage(`{"status":"requested","question":"why?"}`), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	// onChange answers at once, in real time on a real server.
	deadline := time.Now().Add(30 * time.Second)
	for {
		doc, err := c.Get(ctx, "admin/asks", "requests", "q1")
		if err == nil && strings.Contains(string(doc), `"answered"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the request was not answered: %s %v\n%s", doc, err, srv.log())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := c.Delete(ctx, "admin/asks", "requests", "q1", ""); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HANDOFF_SERVER": srv.url, "HANDOFF_TOKEN": adminToken}
	out, errOut, code := runIn(t, env, "", "test", dir, "--against", "admin/asks")
	words := strings.Join(strings.Fields(out), " ")
	if code != 0 || !strings.Contains(words, "transitions of \"status\" that admin/asks took and no test committed: requests answered → (deleted)") {
		t.Errorf("--against: exit %d\n%s%s", code, out, errOut)
	}
	if strings.Contains(words, "requests requested → answered\n") {
		t.Errorf("a tested edge is listed as untested:\n%s", out)
	}
}

// --watch runs the tests again when a file of the folder changes.
func TestTestWatchRerunsOnSave(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, errOut, code := runIn(t, nil, "", "init", dir); code != 0 {
		t.Fatal(errOut)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	runs := make(chan struct{}, 10)
	c := &cli{stdout: &strings.Builder{}, stderr: &strings.Builder{}}
	done := make(chan error, 1)
	go func() {
		done <- c.testWatch(ctx, dir, func(context.Context) (bool, error) {
			runs <- struct{}{}
			return true, nil
		})
	}()
	<-runs // the first run, at start
	// Saved twice a moment apart, as an editor does, so the watcher's
	// polling sees a change whichever instant it looks.
	test := filepath.Join(dir, "test", "requests.test.js")
	for i := 0; ; i++ {
		if err := os.WriteFile(test, []byte("// saved "+strings.Repeat("again ", i)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		select {
		case <-runs:
			cancel()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			return
		case <-time.After(time.Second):
			if i == 30 {
				t.Fatal("no second run within 30 saves")
			}
		}
	}
}
