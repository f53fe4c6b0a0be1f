package main

// End-to-end tests of access.js through the CLI: deploy, versions,
// rollback, the access-function deadline, and the exit codes of refused
// writes, against a real `handoff serve` (built in TestMain).

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// codeDir writes access.js into a new directory and returns it.
func codeDir(t *testing.T, accessJS string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "access.js"), []byte(accessJS), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// refused wants exit 4, `error: CODE: ` and the reason at the end of the
// message.
func refused(t *testing.T, server, token, code, reason string, args ...string) {
	t.Helper()
	r := fails(t, server, token, 4, "error: "+code+": ", args...)
	if !strings.HasSuffix(strings.TrimSpace(r.stderr), reason) {
		t.Fatalf("handoff %q: stderr %q does not end with the reason %q", args, r.stderr, reason)
	}
}

type versionOut struct {
	Version int  `json:"version"`
	Active  bool `json:"active"`
}

func TestAccessDeployAndRefusals(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	srv := startServer(t, data, "HANDOFF_ADMIN_TOKEN="+adminToken)
	u := srv.url
	at := decode[map[string]string](t, must(t, u, adminToken, "user", "add", "alice").stdout)["token"]
	bt := decode[map[string]string](t, must(t, u, adminToken, "user", "add", "bob").stdout)["token"]
	must(t, u, at, "app", "create", "alice/jobs")
	const app = "alice/jobs"

	example, err := os.ReadFile("../../examples/jobs/access.js")
	if err != nil {
		t.Fatal(err)
	}
	out := decode[map[string]any](t, must(t, u, at, "deploy", "--app", app, codeDir(t, string(example))).stdout)
	if out["ok"] != true || out["version"] != float64(1) || out["app"] != app {
		t.Fatalf("deploy = %v", out)
	}

	put := func(body string) []string {
		return []string{"db", "put", "--app", app, "--db", "jobs", body}
	}
	job := `{"_id":"j1","kind":"job","status":"pending","attempts":0,"input":"a.txt"}`
	p := decode[putOut](t, must(t, u, bt, put(job)...).stdout)
	if !p.OK || p.ID != "j1" {
		t.Fatalf("queue a job = %+v", p)
	}
	claim := fmt.Sprintf(`{"_id":"j1","kind":"job","status":"running","attempts":1,"input":"a.txt","claimId":"c1","leaseUntil":%d}`,
		time.Now().Add(time.Hour).UnixMilli())
	const onlyOnChange = "only the backend's onChange handler may make this change"
	// A client claim is refused with the function's reason, exit code 4,
	// whatever it claims to be.
	refused(t, u, at, "forbidden", onlyOnChange, put(claim)...)
	refused(t, u, at, "forbidden", onlyOnChange, put(strings.Replace(claim, `"claimId"`, `"handler":"onChange","claimId"`, 1))...)
	fails(t, u, at, 1, "error: invalid: ", put(strings.Replace(claim, `"claimId"`, `"_handler":"onChange","claimId"`, 1))...)
	refused(t, u, "", "forbidden", "sign in to queue jobs", put(`{"kind":"job","status":"pending","attempts":0,"input":"x"}`)...)
	refused(t, u, bt, "forbidden", "only the owner deletes jobs", "db", "del", "--app", app, "--db", "jobs", "j1")

	// A syntax error: exit 1, file:line:col, and version 1 stays live.
	bad := codeDir(t, "export function jobs(doc) {\n  const ok = 1;\n  if (doc.v === ) {}\n}\n")
	fails(t, u, at, 1, "error: invalid: access.js:3:17: ", "deploy", "--app", app, bad)
	refused(t, u, at, "forbidden", onlyOnChange, put(claim)...)
	vs := decode[[]versionOut](t, must(t, u, at, "app", "versions", "--app", app).stdout)
	if len(vs) != 1 || vs[0].Version != 1 || !vs[0].Active {
		t.Fatalf("versions after a refused deploy = %+v", vs)
	}

	// Version 2 is live at once.
	v2 := codeDir(t, `export function jobs(doc) {
  if (doc.v !== 2) throw { forbidden: "version 2 wants v=2" };
  return { channels: ["jobs"] };
}
`)
	out = decode[map[string]any](t, must(t, u, at, "deploy", "--app", app, v2).stdout)
	if out["version"] != float64(2) {
		t.Fatalf("second deploy = %v", out)
	}
	refused(t, u, at, "forbidden", "version 2 wants v=2", put(`{"v":1}`)...)
	must(t, u, at, put(`{"v":2}`)...)
	vs = decode[[]versionOut](t, must(t, u, at, "app", "versions", "--app", app).stdout)
	if len(vs) != 2 || vs[0].Active || !vs[1].Active || vs[1].Version != 2 {
		t.Fatalf("versions = %+v", vs)
	}
	fails(t, u, bt, 4, "error: forbidden: ", "deploy", "--app", app, v2)

	// Rollback to 1: the transition table is back.
	out = decode[map[string]any](t, must(t, u, at, "app", "rollback", "--app", app, "1").stdout)
	if out["ok"] != true || out["version"] != float64(1) {
		t.Fatalf("rollback = %v", out)
	}
	refused(t, u, at, "forbidden", `documents in jobs need kind: "job"`, put(`{"v":2}`)...)
	refused(t, u, at, "forbidden", onlyOnChange, put(claim)...)
	vs = decode[[]versionOut](t, must(t, u, at, "app", "versions", "--app", app).stdout)
	if len(vs) != 2 || !vs[0].Active || vs[1].Active {
		t.Fatalf("versions after rollback = %+v", vs)
	}
	fails(t, u, at, 5, "error: not_found: ", "app", "rollback", "--app", app, "7")
	fails(t, u, at, 2, "error: usage: ", "app", "rollback", "--app", app, "one")

	// The deadline: a runaway is an access_error (exit 4) naming it.
	spin := codeDir(t, "export default function () { while (true) {} }\n")
	out = decode[map[string]any](t, must(t, u, at, "deploy", "--app", app, spin).stdout)
	if out["version"] != float64(3) {
		t.Fatalf("third deploy = %v", out)
	}
	r := fails(t, u, at, 4, "error: access_error: ", put(`{}`)...)
	if !strings.Contains(r.stderr, "ran past its 100ms deadline") || !strings.Contains(r.stderr, "--access-timeout") {
		t.Fatalf("runaway: %s", r.stderr)
	}
	set := decode[map[string]any](t, must(t, u, at, "app", "set", "--app", app, "--access-timeout", "250ms").stdout)
	if set["ok"] != true || set["accessTimeout"] != "250ms" {
		t.Fatalf("app set = %v", set)
	}
	start := time.Now()
	r = fails(t, u, at, 4, "error: access_error: ", put(`{}`)...)
	if !strings.Contains(r.stderr, "ran past its 250ms deadline") || time.Since(start) < 250*time.Millisecond {
		t.Fatalf("runaway with a 250ms deadline: %s", r.stderr)
	}
	fails(t, u, at, 1, "error: invalid: ", "app", "set", "--app", app, "--access-timeout", "2h")
	fails(t, u, bt, 4, "error: forbidden: ", "app", "set", "--app", app, "--access-timeout", "1s")

	// The live version and the deadline survive a restart.
	srv.stop(t)
	srv = startServer(t, data, "HANDOFF_ADMIN_TOKEN="+adminToken)
	u = srv.url
	r = fails(t, u, at, 4, "error: access_error: ", put(`{}`)...)
	if !strings.Contains(r.stderr, "ran past its 250ms deadline") {
		t.Fatalf("runaway after a restart: %s", r.stderr)
	}
	must(t, u, at, "app", "rollback", "--app", app, "1")
	refused(t, u, at, "forbidden", onlyOnChange, put(claim)...)
	srv.stop(t)
}

// TestAppJSMemory: a server admin can give one app's calls more memory,
// up to the server's cap; the app's owner cannot, and the limit survives
// a restart.
func TestAppJSMemory(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	srv := startServer(t, data, "HANDOFF_ADMIN_TOKEN="+adminToken)
	u := srv.url
	at := decode[map[string]string](t, must(t, u, adminToken, "user", "add", "alice").stdout)["token"]
	const app = "alice/big"
	must(t, u, at, "app", "create", app)
	// 100 MiB held at once: past the default 64 MiB a call may use.
	hold := codeDir(t, `export default function () {
  const a = []
  for (let i = 0; i < 25; i++) a.push("x".repeat(4 << 20) + i)
  return { channels: ["c" + a.length] }
}
`)
	must(t, u, at, "deploy", "--app", app, hold)
	must(t, u, at, "app", "set", "--app", app, "--access-timeout", "20s") // memory, not time, is under test
	put := []string{"db", "put", "--app", app, "--db", "docs", `{"_id":"d1"}`}
	r := fails(t, u, at, 4, "error: access_error: ", put...)
	if !strings.Contains(r.stderr, "more than 64 MiB") {
		t.Fatalf("100 MiB under the default limit: %s", r.stderr)
	}
	fails(t, u, at, 4, "error: forbidden: ", "app", "set", "--app", app, "--js-memory", "256")
	fails(t, u, adminToken, 1, "error: invalid: ", "app", "set", "--app", app, "--js-memory", "100000")
	set := decode[map[string]any](t, must(t, u, adminToken, "app", "set", "--app", app, "--js-memory", "256").stdout)
	if set["jsMemory"] != float64(256) {
		t.Fatalf("app set = %v", set)
	}
	must(t, u, at, put...)

	srv.stop(t)
	srv = startServer(t, data, "HANDOFF_ADMIN_TOKEN="+adminToken)
	u = srv.url
	must(t, u, at, "db", "put", "--app", app, "--db", "docs", `{"_id":"d2"}`)
	must(t, u, adminToken, "app", "set", "--app", app, "--js-memory", "0")
	fails(t, u, at, 4, "error: access_error: ", "db", "put", "--app", app, "--db", "docs", `{"_id":"d3"}`)

	// The runtimes' series are on /metrics.
	res, err := http.Get(u + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, name := range []string{"handoff_apps_loaded ", "handoff_js_runtimes ", "handoff_js_cold_starts_total ", "handoff_js_runtimes_retired_idle_total "} {
		if !strings.Contains(string(body), "\n"+name) {
			t.Errorf("/metrics has no %s", name)
		}
	}
	srv.stop(t)
}
