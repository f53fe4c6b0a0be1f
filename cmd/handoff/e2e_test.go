package main

// End-to-end tests: the real binary, built once in TestMain, against a
// real `handoff serve` on a free port and a temporary data directory.
// They follow WALKTHROUGH.md.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/compilechild"
	"github.com/handoff-run/handoff/internal/pgtest/pgstore"
	"github.com/handoff-run/handoff/internal/testenv"
)

var binary string // the handoff binary under test

func TestMain(m *testing.M) {
	// A serve run in this process compiles deploys in a child: this binary.
	compilechild.Serve()
	var err error
	if binary, err = testenv.Binary(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(pgstore.Main(m))
}

// baseEnv is the test process's environment without any HANDOFF_ setting,
// so a developer's own variables cannot leak into the tests.
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HANDOFF_") {
			env = append(env, kv)
		}
	}
	return env
}

// serverProc is a running `handoff serve`.
type serverProc struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	logs bytes.Buffer
	done chan error
}

var listenRE = regexp.MustCompile(`msg="handoff listening" url=(http://\S+)`)

// startServer runs `handoff serve` on a free port and waits until it
// says where it listens.
func startServer(t *testing.T, dataDir string, env ...string) *serverProc {
	t.Helper()
	return startServerArgs(t, dataDir, nil, env...)
}

// startServerArgs is startServer with more serve flags.
func startServerArgs(t *testing.T, dataDir string, args []string, env ...string) *serverProc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--data", dataDir, "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(baseEnv(), env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &serverProc{cmd: cmd, done: make(chan error, 1)}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			s.logs.WriteString(line + "\n")
			s.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				found <- m[1]
			}
		}
		s.done <- cmd.Wait()
		close(found)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			t.Fatalf("handoff serve exited before listening:\n%s", s.log())
		}
		s.url = u
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("handoff serve did not start within 30s:\n%s", s.log())
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-s.done
		}
	})
	return s
}

func (s *serverProc) log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.logs.String()
}

// stop sends SIGTERM and wants a clean exit.
func (s *serverProc) stop(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-s.done:
		if err != nil {
			t.Fatalf("handoff serve exited with %v after SIGTERM:\n%s", err, s.log())
		}
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		t.Fatalf("handoff serve did not stop within 30s of SIGTERM:\n%s", s.log())
	}
	if !strings.Contains(s.log(), "msg=stopped") {
		t.Errorf("no graceful stop in the log:\n%s", s.log())
	}
}

// result of one CLI run.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
}

// handoff runs the CLI against server with token (may be "").
func handoff(t *testing.T, server, token, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(baseEnv(), "HANDOFF_SERVER="+server)
	if token != "" {
		cmd.Env = append(cmd.Env, "HANDOFF_TOKEN="+token)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running handoff %q: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

// must runs the CLI and wants exit 0.
func must(t *testing.T, server, token string, args ...string) result {
	t.Helper()
	r := handoff(t, server, token, "", args...)
	if r.code != 0 {
		t.Fatalf("handoff %q: %s", args, r)
	}
	return r
}

// fails runs the CLI and wants exit code and stderr starting with prefix.
func fails(t *testing.T, server, token string, code int, prefix string, args ...string) result {
	t.Helper()
	r := handoff(t, server, token, "", args...)
	if r.code != code || !strings.HasPrefix(r.stderr, prefix) {
		t.Fatalf("handoff %q: want exit %d and stderr %q...; got %s", args, code, prefix, r)
	}
	if r.stdout != "" {
		t.Errorf("handoff %q: a failure printed %q on stdout", args, r.stdout)
	}
	return r
}

func decode[T any](t *testing.T, s string) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("output is not the expected JSON: %v\n%s", err, s)
	}
	return v
}

type putOut struct {
	ID       string `json:"id"`
	Rev      string `json:"rev"`
	OK       bool   `json:"ok"`
	Existing bool   `json:"existing"`
}

type entryOut struct {
	Seq     int64          `json:"seq"`
	ID      string         `json:"id"`
	Rev     string         `json:"rev"`
	Deleted bool           `json:"deleted"`
	Doc     map[string]any `json:"doc"`
	Writer  struct {
		User string `json:"user"`
	} `json:"writer"`
	Path string `json:"path"`
}

const adminToken = "hnd_e2e-admin-token"

// TestWalkthrough is WALKTHROUGH.md, step by step, including a restart.
func TestWalkthrough(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	srv := startServer(t, data, "HANDOFF_ADMIN_TOKEN="+adminToken)
	u := srv.url
	if _, err := os.Stat(filepath.Join(data, "admin.token")); !os.IsNotExist(err) {
		t.Errorf("with HANDOFF_ADMIN_TOKEN set, admin.token must not be written (stat: %v)", err)
	}

	who := decode[map[string]any](t, must(t, u, adminToken, "whoami").stdout)
	if who["user"] != "admin" || who["admin"] != true {
		t.Fatalf("whoami = %v", who)
	}
	alice := decode[map[string]string](t, must(t, u, adminToken, "user", "add", "alice").stdout)
	if alice["name"] != "alice" || !strings.HasPrefix(alice["token"], "hnd_") {
		t.Fatalf("user add = %v", alice)
	}
	bob := decode[map[string]string](t, must(t, u, adminToken, "user", "add", "bob").stdout)
	at, bt := alice["token"], bob["token"]

	app := decode[map[string]any](t, must(t, u, at, "app", "create", "alice/jobs").stdout)
	if app["app"] != "alice/jobs" || app["owner"] != "alice" {
		t.Fatalf("app create = %v", app)
	}

	// Write, update with the right rev, fail with a stale one.
	p1 := decode[putOut](t, must(t, u, at, "db", "put", "--app", "alice/jobs", "--db", "jobs",
		`{"_id":"job-1","status":"pending","input":"a.txt"}`).stdout)
	if !p1.OK || p1.ID != "job-1" || !strings.HasPrefix(p1.Rev, "1-") {
		t.Fatalf("put = %+v", p1)
	}
	p2 := decode[putOut](t, must(t, u, at, "db", "put", "--app", "alice/jobs", "--db", "jobs",
		"--id", "job-1", "--if-rev", p1.Rev, `{"status":"running","input":"a.txt"}`).stdout)
	if !strings.HasPrefix(p2.Rev, "2-") {
		t.Fatalf("update = %+v", p2)
	}
	r := fails(t, u, at, 3, "error: conflict: ", "db", "put", "--app", "alice/jobs", "--db", "jobs",
		"--id", "job-1", "--if-rev", p1.Rev, `{"status":"done"}`)
	if !strings.Contains(r.stderr, p2.Rev) {
		t.Errorf("the conflict does not name the current rev: %s", r.stderr)
	}
	// The same update from stdin, with --vibe for --app, also conflicts.
	r = handoff(t, u, at, `{"status":"done"}`, "db", "put", "--vibe", "alice/jobs", "--db", "jobs",
		"--id", "job-1", "--if-rev", p1.Rev, "-")
	if r.code != 3 {
		t.Fatalf("stale put from stdin: %s", r)
	}
	// --if-absent reports the existing document and changes nothing.
	ex := decode[putOut](t, must(t, u, at, "db", "put", "--app", "alice/jobs", "--db", "jobs", "--if-absent",
		`{"_id":"job-1","status":"pending"}`).stdout)
	if !ex.Existing || ex.Rev != p2.Rev {
		t.Fatalf("put --if-absent on an existing doc = %+v", ex)
	}

	// Query finds it by status; a bare word is a JSON string.
	docs := decode[[]map[string]any](t, must(t, u, at, "db", "query", "--app", "alice/jobs", "--db", "jobs",
		"--field", "status", "--key", "running").stdout)
	if len(docs) != 1 || docs[0]["_id"] != "job-1" || docs[0]["_rev"] != p2.Rev {
		t.Fatalf("query = %v", docs)
	}
	none := decode[[]map[string]any](t, must(t, u, at, "db", "query", "--app", "alice/jobs", "--db", "jobs",
		"--field", "status", "--key", "pending").stdout)
	if len(none) != 0 {
		t.Fatalf("query for pending = %v", none)
	}

	// --vibe is --app.
	got := decode[map[string]any](t, must(t, u, at, "db", "get", "--vibe", "alice/jobs", "--db", "jobs", "job-1").stdout)
	if got["status"] != "running" || got["_rev"] != p2.Rev {
		t.Fatalf("get = %v", got)
	}

	// A second document, deleted.
	p3 := decode[putOut](t, must(t, u, at, "db", "put", "--app", "alice/jobs", "--db", "jobs",
		`{"_id":"job-2","status":"pending"}`).stdout)
	fails(t, u, at, 3, "error: conflict: ", "db", "del", "--app", "alice/jobs", "--db", "jobs", "job-2", "--if-rev", p1.Rev)
	// An empty --if-rev (a script's rev variable came back empty) and an
	// --if-absent with no id are refused before anything is sent.
	fails(t, u, at, 2, "error: usage: --if-rev is empty", "db", "del", "--app", "alice/jobs", "--db", "jobs", "job-2", "--if-rev", "")
	fails(t, u, at, 2, "error: usage: --if-rev is empty", "db", "put", "--app", "alice/jobs", "--db", "jobs", "--id", "job-2", "--if-rev", "", `{"status":"x"}`)
	fails(t, u, at, 2, "error: usage: --if-absent needs an id", "db", "put", "--app", "alice/jobs", "--db", "jobs", "--if-absent", `{"status":"x"}`)
	del := decode[putOut](t, must(t, u, at, "db", "del", "--app", "alice/jobs", "--db", "jobs", "job-2", "--if-rev", p3.Rev).stdout)
	if !del.OK || del.ID != "job-2" || !strings.HasPrefix(del.Rev, "2-") {
		t.Fatalf("del = %+v", del)
	}
	fails(t, u, at, 5, "error: not_found: ", "db", "get", "--app", "alice/jobs", "--db", "jobs", "job-2")

	checkHistory := func() {
		t.Helper()
		h := decode[[]entryOut](t, must(t, u, at, "db", "get", "--app", "alice/jobs", "--db", "jobs", "job-1", "--history").stdout)
		if len(h) != 2 || h[0].Rev != p1.Rev || h[1].Rev != p2.Rev ||
			h[0].Doc["status"] != "pending" || h[1].Doc["status"] != "running" ||
			h[0].Writer.User != "alice" || h[0].Path != "cli" {
			t.Fatalf("history of job-1 = %+v", h)
		}
		h = decode[[]entryOut](t, must(t, u, at, "db", "get", "--app", "alice/jobs", "--db", "jobs", "job-2", "--history").stdout)
		if len(h) != 2 || h[0].Rev != p3.Rev || !h[1].Deleted || h[1].Rev != del.Rev {
			t.Fatalf("history of job-2 = %+v", h)
		}
	}
	checkHistory()

	// Errors and their exit codes.
	fails(t, u, "", 4, "error: unauthorized: ", "db", "put", "--app", "alice/jobs", "--db", "jobs", `{"status":"x"}`)
	fails(t, u, "hnd_not-a-token", 4, "error: unauthorized: ", "app", "list")
	fails(t, u, bt, 4, "error: forbidden: ", "db", "put", "--app", "alice/jobs", "--db", "jobs", `{"status":"x"}`)
	fails(t, u, bt, 4, "error: forbidden: ", "app", "create", "alice/other")
	fails(t, u, at, 5, "error: not_found: ", "db", "put", "--app", "alice/nope", "--db", "jobs", `{"status":"x"}`)
	fails(t, u, at, 5, "error: not_found: ", "db", "get", "--app", "alice/jobs", "--db", "jobs", "no-such-doc")
	fails(t, u, at, 1, "error: invalid: ", "db", "put", "--app", "alice/jobs", "--db", "jobs", `{"status":`)
	fails(t, u, at, 1, "error: invalid: ", "db", "put", "--app", "alice/jobs", "--db", "jobs", `{"_secret":1}`)
	fails(t, u, at, 2, "error: usage: ", "db", "put", "--app", "alice/jobs", "--db", "jobs", "--frob", `{}`)

	// Members: bob becomes an editor and may write.
	must(t, u, at, "app", "member", "add", "--app", "alice/jobs", "bob", "--role", "editor")
	ms := decode[[]map[string]any](t, must(t, u, at, "app", "member", "list", "--vibe", "alice/jobs").stdout)
	if len(ms) != 1 || ms[0]["user"] != "bob" {
		t.Fatalf("member list = %v", ms)
	}
	pb := decode[putOut](t, must(t, u, bt, "db", "put", "--app", "alice/jobs", "--db", "jobs", `{"status":"pending"}`).stdout)
	if pb.ID == "" {
		t.Fatalf("bob's put minted no id: %+v", pb)
	}
	apps := decode[[]map[string]any](t, must(t, u, bt, "app", "list").stdout)
	if len(apps) != 1 || apps[0]["app"] != "alice/jobs" {
		t.Fatalf("bob's app list = %v", apps)
	}
	dbs := decode[[]string](t, must(t, u, at, "db", "list", "--app", "alice/jobs").stdout)
	if len(dbs) != 1 || dbs[0] != "jobs" {
		t.Fatalf("db list = %v", dbs)
	}

	// The changes feed: one NDJSON line per revision, in commit order.
	lines := strings.Split(strings.TrimSpace(must(t, u, at, "db", "changes", "--app", "alice/jobs", "--db", "jobs").stdout), "\n")
	if len(lines) != 5 {
		t.Fatalf("changes = %d lines, want 5:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	var seqs []int64
	for _, l := range lines {
		seqs = append(seqs, decode[entryOut](t, l).Seq)
	}
	for i := 1; i < len(seqs); i++ {
		if seqs[i] <= seqs[i-1] {
			t.Fatalf("changes out of order: %v", seqs)
		}
	}
	since := must(t, u, at, "db", "changes", "--app", "alice/jobs", "--db", "jobs", "--since", fmt.Sprint(seqs[2])).stdout
	if n := strings.Count(since, "\n"); n != 2 {
		t.Fatalf("changes --since %d = %d lines, want 2", seqs[2], n)
	}

	// Restart on the same data directory: everything is still there.
	srv.stop(t)
	srv = startServer(t, data, "HANDOFF_ADMIN_TOKEN="+adminToken)
	u = srv.url
	got = decode[map[string]any](t, must(t, u, at, "db", "get", "--app", "alice/jobs", "--db", "jobs", "job-1").stdout)
	if got["status"] != "running" || got["_rev"] != p2.Rev {
		t.Fatalf("after restart, get = %v", got)
	}
	checkHistory()
	fails(t, u, at, 5, "error: not_found: ", "db", "get", "--app", "alice/jobs", "--db", "jobs", "job-2")
	docs = decode[[]map[string]any](t, must(t, u, at, "db", "query", "--app", "alice/jobs", "--db", "jobs",
		"--field", "status", "--key", "running").stdout)
	if len(docs) != 1 || docs[0]["_id"] != "job-1" {
		t.Fatalf("after restart, query = %v", docs)
	}
	must(t, u, bt, "db", "put", "--app", "alice/jobs", "--db", "jobs", `{"status":"pending"}`) // bob is still an editor
	srv.stop(t)
}

// TestAdminTokenFile: without HANDOFF_ADMIN_TOKEN the first start mints a
// token into DATA/admin.token (0600), prints the path, never the token.
func TestAdminTokenFile(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	srv := startServer(t, data)
	path := filepath.Join(data, "admin.token")
	st, err := os.Stat(path)
	if err != nil {
		t.Fatalf("admin.token: %v\n%s", err, srv.log())
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("admin.token has mode %v, want 0600", st.Mode().Perm())
	}
	raw, _ := os.ReadFile(path)
	token := strings.TrimSpace(string(raw))
	if !strings.HasPrefix(token, "hnd_") {
		t.Fatalf("admin.token holds %q", token)
	}
	if !strings.Contains(srv.log(), path) {
		t.Errorf("the log does not print the token's path:\n%s", srv.log())
	}
	if strings.Contains(srv.log(), token) {
		t.Errorf("the log shows the token itself:\n%s", srv.log())
	}
	who := decode[map[string]any](t, must(t, srv.url, token, "whoami").stdout)
	if who["admin"] != true {
		t.Fatalf("whoami with the minted token = %v", who)
	}
	// A restart keeps the token valid and mints no other.
	srv.stop(t)
	srv = startServer(t, data)
	if raw2, _ := os.ReadFile(path); string(raw2) != string(raw) {
		t.Errorf("a restart rewrote admin.token")
	}
	must(t, srv.url, token, "whoami")
	srv.stop(t)
}

// TestImportExport round-trips 2,500 documents through NDJSON, with one
// bad line that is reported with its number.
func TestImportExport(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), "HANDOFF_ADMIN_TOKEN="+adminToken)
	u := srv.url
	alice := decode[map[string]string](t, must(t, u, adminToken, "user", "add", "alice").stdout)["token"]
	must(t, u, alice, "app", "create", "alice/jobs")
	// Before any document, there is no such database yet: reads say so.
	for _, args := range [][]string{
		{"db", "export", "--app", "alice/jobs", "--db", "jobs"},
		{"db", "query", "--app", "alice/jobs", "--db", "jobs", "--field", "status", "--key", "pending"},
		{"db", "changes", "--app", "alice/jobs", "--db", "jobs"},
	} {
		if r := fails(t, u, alice, 5, "error: not_found: alice/jobs has no databases yet", args...); r.stdout != "" {
			t.Fatalf("%q on a database that does not exist: %s", args, r)
		}
	}

	const n, badLine = 2500, 1234
	var in strings.Builder
	for i := 1; i <= n+1; i++ {
		if i == badLine {
			in.WriteString("{\"_id\": \"broken\", \"status\": \n") // not JSON
			continue
		}
		if i == 10 {
			in.WriteString("\n") // blank lines are skipped, but counted as lines
		}
		fmt.Fprintf(&in, `{"_id":"doc-%05d","status":"pending","n":%d,"tags":["a","b"],"nested":{"x":%d}}`+"\n", i, i, i*2)
	}
	dir := t.TempDir()
	inFile := filepath.Join(dir, "in.ndjson")
	if err := os.WriteFile(inFile, []byte(in.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	r := handoff(t, u, alice, "", "db", "import", "--app", "alice/jobs", "--db", "jobs", inFile)
	if r.code != 1 {
		t.Fatalf("import with a bad line: %s", r)
	}
	sum := decode[map[string]any](t, r.stdout)
	if sum["written"] != float64(n) || sum["failed"] != float64(1) || sum["ok"] != false {
		t.Fatalf("import summary = %v", sum)
	}
	// Line 10 is blank, so the bad document is on line badLine+1.
	if want := fmt.Sprintf("error: invalid: line %d: not valid JSON", badLine+1); !strings.Contains(r.stderr, want) {
		t.Fatalf("stderr does not report %q:\n%s", want, r.stderr)
	}
	if strings.Count(r.stderr, "error: ") != 1 {
		t.Errorf("more than one error reported:\n%s", r.stderr)
	}

	// A typo in the database reads like a missing document: say so.
	if r := fails(t, u, alice, 5, "error: not_found: ", "db", "get", "--app", "alice/jobs", "--db", "jbos", "doc-00001"); !strings.Contains(r.stderr, `hint: alice/jobs has no database "jbos"; did you mean --db jobs? its databases are jobs`) {
		t.Fatalf("get from a database that does not exist: %s", r)
	}
	// An empty answer from it too, not [] or nothing with exit 0.
	for _, args := range [][]string{
		{"db", "query", "--app", "alice/jobs", "--db", "jbos", "--field", "status", "--key", "pending"},
		{"db", "query", "--app", "alice/jobs", "--db", "jbos", "--field", "status", "--key", "pending", "--all", "--ndjson"},
		{"db", "changes", "--app", "alice/jobs", "--db", "jbos"},
		{"db", "changes", "--app", "alice/jobs", "--db", "jbos", "--since", "5"},
		{"db", "export", "--app", "alice/jobs", "--db", "jbos"},
	} {
		fails(t, u, alice, 5, `error: not_found: alice/jobs has no database "jbos"; did you mean --db jobs? its databases are jobs`, args...)
	}
	// A database that exists answers empty results as before.
	if r := must(t, u, alice, "db", "query", "--app", "alice/jobs", "--db", "jobs", "--field", "status", "--key", "nosuch"); r.stdout != "[]\n" {
		t.Fatalf("an empty query of a database that exists: %s", r)
	}
	if r := must(t, u, alice, "db", "changes", "--app", "alice/jobs", "--db", "jobs", "--since", "1000000"); r.stdout != "" {
		t.Fatalf("no changes after the last: %s", r)
	}
	if r := fails(t, u, alice, 5, "error: not_found: ", "db", "get", "--app", "alice/jobs", "--db", "jobs", "nope"); strings.Contains(r.stderr, "hint:") {
		t.Fatalf("a missing document in a database that exists got a hint: %s", r)
	}

	// Imported writes carry the import path in the ledger.
	h := decode[[]entryOut](t, must(t, u, alice, "db", "get", "--app", "alice/jobs", "--db", "jobs", "doc-00001", "--history").stdout)
	if len(h) != 1 || h[0].Path != "import" {
		t.Fatalf("history of an imported doc = %+v", h)
	}

	// Export to a file, then to stdout: the same n documents, in id order.
	outFile := filepath.Join(dir, "out.ndjson")
	es := decode[map[string]any](t, must(t, u, alice, "db", "export", "--app", "alice/jobs", "--db", "jobs", outFile).stdout)
	if es["docs"] != float64(n) {
		t.Fatalf("export summary = %v", es)
	}
	exported, err := os.ReadFile(outFile)
	if err != nil {
		t.Fatal(err)
	}
	if toStdout := must(t, u, alice, "db", "export", "--app", "alice/jobs", "--db", "jobs").stdout; toStdout != string(exported) {
		t.Errorf("export to stdout differs from export to a file")
	}
	lines := strings.Split(strings.TrimSuffix(string(exported), "\n"), "\n")
	if len(lines) != n {
		t.Fatalf("export has %d lines, want %d", len(lines), n)
	}
	seen := 0
	for i := 1; i <= n+1; i++ {
		if i == badLine {
			continue
		}
		d := decode[map[string]any](t, lines[seen])
		if d["_id"] != fmt.Sprintf("doc-%05d", i) || d["n"] != float64(i) || d["_rev"] == nil ||
			d["nested"].(map[string]any)["x"] != float64(i*2) {
			t.Fatalf("export line %d = %v", seen+1, d)
		}
		seen++
	}

	// The export imports into another database as it is (its _rev is
	// ignored), and exports back identical: same ids, bodies and revs.
	r = handoff(t, u, alice, "", "db", "import", "--app", "alice/jobs", "--db", "copy", outFile)
	if r.code != 0 || decode[map[string]any](t, r.stdout)["written"] != float64(n) {
		t.Fatalf("re-import: %s", r)
	}
	if again := must(t, u, alice, "db", "export", "--app", "alice/jobs", "--db", "copy").stdout; again != string(exported) {
		t.Errorf("the round trip changed the documents")
	}

	// --if-absent makes a re-run a no-op; from stdin too.
	r = handoff(t, u, alice, string(exported), "db", "import", "--app", "alice/jobs", "--db", "copy", "--if-absent", "-")
	sum = decode[map[string]any](t, r.stdout)
	if r.code != 0 || sum["existing"] != float64(n) || sum["written"] != float64(0) {
		t.Fatalf("import --if-absent: %s", r)
	}
	if c := must(t, u, alice, "db", "changes", "--app", "alice/jobs", "--db", "copy").stdout; strings.Count(c, "\n") != n {
		t.Errorf("import --if-absent wrote revisions: %d changes", strings.Count(c, "\n"))
	}

	// Query pages: --limit leaves a cursor on stderr, --all reads them all.
	r = must(t, u, alice, "db", "query", "--app", "alice/jobs", "--db", "copy", "--field", "status", "--key", "pending", "--limit", "1000")
	page1 := decode[[]map[string]any](t, r.stdout)
	m := regexp.MustCompile(`(?m)^next: (\S+)$`).FindStringSubmatch(r.stderr)
	if len(page1) != 1000 || m == nil {
		t.Fatalf("query --limit 1000: %d docs, stderr %q", len(page1), r.stderr)
	}
	page2 := decode[[]map[string]any](t, must(t, u, alice, "db", "query", "--app", "alice/jobs", "--db", "copy",
		"--field", "status", "--key", "pending", "--limit", "1000", "--after", m[1]).stdout)
	if len(page2) != 1000 || page2[0]["_id"] == page1[999]["_id"] {
		t.Fatalf("second page: %d docs", len(page2))
	}
	r = must(t, u, alice, "db", "query", "--app", "alice/jobs", "--db", "copy", "--field", "status", "--key", "pending",
		"--all", "--ndjson", "--limit", "700")
	if got := strings.Count(r.stdout, "\n"); got != n || strings.Contains(r.stderr, "next:") {
		t.Fatalf("query --all --ndjson: %d lines, stderr %q", got, r.stderr)
	}

	// A user who may not write: every line fails alike, exit 4.
	bob := decode[map[string]string](t, must(t, u, adminToken, "user", "add", "bob").stdout)["token"]
	r = handoff(t, u, bob, "", "db", "import", "--app", "alice/jobs", "--db", "jobs", outFile)
	if r.code != 4 || !strings.Contains(r.stderr, "error: forbidden: line 1 ") {
		t.Fatalf("import by a non-member: exit %d, stderr %.300s", r.code, r.stderr)
	}
	if c := strings.Count(r.stderr, "error: "); c > maxLineErrors {
		t.Errorf("%d errors printed, want at most %d", c, maxLineErrors)
	}
	// An unknown app stops the import at once.
	fails(t, u, alice, 5, "error: not_found: ", "db", "import", "--app", "alice/nope", "--db", "jobs", outFile)
	fails(t, u, alice, 5, "error: not_found: ", "db", "import", "--app", "alice/jobs", "--db", "jobs", filepath.Join(dir, "missing.ndjson"))
	srv.stop(t)
}

// TestChangesFollow: --follow prints changes as they are committed and
// ends cleanly on SIGINT.
func TestChangesFollow(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), "HANDOFF_ADMIN_TOKEN="+adminToken)
	u := srv.url
	must(t, u, adminToken, "app", "create", "admin/feed")
	must(t, u, adminToken, "db", "put", "--app", "admin/feed", "--db", "d", `{"_id":"first"}`)

	cmd := exec.Command(binary, "db", "changes", "--app", "admin/feed", "--db", "d", "--follow", "--interval", "20ms")
	cmd.Env = append(baseEnv(), "HANDOFF_SERVER="+u, "HANDOFF_TOKEN="+adminToken)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() entryOut {
		t.Helper()
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("changes --follow ended early: %s", errb.String())
			}
			return decode[entryOut](t, l)
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			t.Fatal("no change printed within 30s")
		}
		return entryOut{}
	}
	if e := next(); e.ID != "first" {
		t.Fatalf("first change = %+v", e)
	}
	must(t, u, adminToken, "db", "put", "--app", "admin/feed", "--db", "d", `{"_id":"second"}`)
	if e := next(); e.ID != "second" {
		t.Fatalf("followed change = %+v", e)
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	for range lines {
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("changes --follow after SIGINT: %v, stderr %s", err, errb.String())
	}
	srv.stop(t)
}
