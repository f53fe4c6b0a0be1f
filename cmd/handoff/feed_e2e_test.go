package main

import (
	"bufio"
	"bytes"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// followProc is a running `handoff db changes --follow`.
type followProc struct {
	t     *testing.T
	cmd   *exec.Cmd
	lines chan string
	errb  *bytes.Buffer
}

func startFollow(t *testing.T, server, token string, args ...string) *followProc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"db", "changes", "--follow"}, args...)...)
	cmd.Env = append(baseEnv(), "HANDOFF_SERVER="+server, "HANDOFF_TOKEN="+token)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &followProc{t: t, cmd: cmd, lines: make(chan string, 100), errb: &bytes.Buffer{}}
	cmd.Stderr = p.errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
	}()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return p
}

// next returns the next printed change, and how long it took to come.
func (p *followProc) next() (entryOut, time.Duration) {
	p.t.Helper()
	t0 := time.Now()
	select {
	case l, ok := <-p.lines:
		if !ok {
			p.t.Fatalf("changes --follow ended early: %s", p.errb.String())
		}
		return decode[entryOut](p.t, l), time.Since(t0)
	case <-time.After(30 * time.Second):
		p.t.Fatalf("no change printed within 30s; stderr: %s", p.errb.String())
	}
	return entryOut{}, 0
}

// wait waits for the process to exit and returns its exit code.
func (p *followProc) wait() int {
	p.t.Helper()
	done := make(chan error, 1)
	go func() {
		for range p.lines {
			p.t.Error("a change printed after the end")
		}
		done <- p.cmd.Wait()
	}()
	select {
	case err := <-done:
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			p.t.Fatal(err)
		}
		return 0
	case <-time.After(30 * time.Second):
		p.cmd.Process.Kill()
		p.t.Fatal("changes --follow did not exit within 30s")
	}
	return -1
}

// TestChangesFollowStreams: `db changes --follow` prints the backlog and
// then each change as it is committed (from the live feed, no polling),
// survives a server restart without missing or repeating a change, and
// exits 0 on SIGINT.
func TestChangesFollowStreams(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	// A fixed port, so the restarted server is found at the same address.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	srv := startServerArgs(t, data, []string{"--addr", addr}, "HANDOFF_ADMIN_TOKEN="+adminToken)
	u := srv.url
	const app = "admin/live"
	must(t, u, adminToken, "app", "create", app)
	must(t, u, adminToken, "db", "put", "--app", app, "--db", "jobs", `{"_id":"j1","status":"pending"}`)
	must(t, u, adminToken, "db", "put", "--app", app, "--db", "other", `{"_id":"o1"}`)

	all := startFollow(t, u, adminToken, "--app", app)
	jobs := startFollow(t, u, adminToken, "--app", app, "--db", "jobs", "--since", "0")
	for _, p := range []*followProc{all, jobs} {
		if e, _ := p.next(); e.Seq != 1 || e.ID != "j1" || e.Doc["status"] != "pending" {
			t.Fatalf("first change: %+v", e)
		}
	}
	if e, _ := all.next(); e.Seq != 2 || e.ID != "o1" {
		t.Fatalf("second change: %+v", e)
	}

	// Live changes come as they are committed, through every write path
	// of the CLI: put, delete, import.
	p := decode[putOut](t, must(t, u, adminToken, "db", "put", "--app", app, "--db", "jobs", "--id", "j1", `{"status":"running"}`).stdout)
	for _, f := range []*followProc{all, jobs} {
		e, took := f.next()
		if e.Seq != 3 || e.Rev != p.Rev || e.Doc["status"] != "running" || e.Path != "cli" {
			t.Fatalf("followed put: %+v", e)
		}
		if took > 5*time.Second {
			t.Errorf("a change took %v to be printed", took)
		}
	}
	must(t, u, adminToken, "db", "del", "--app", app, "--db", "other", "o1")
	if e, _ := all.next(); e.Seq != 4 || e.ID != "o1" || !e.Deleted {
		t.Fatalf("followed delete: %+v", e)
	}
	imp := handoff(t, u, adminToken, `{"_id":"j2","status":"pending"}`+"\n", "db", "import", "--app", app, "--db", "jobs", "-")
	if imp.code != 0 {
		t.Fatalf("import: %s", imp)
	}
	for _, f := range []*followProc{all, jobs} {
		if e, _ := f.next(); e.Seq != 5 || e.ID != "j2" {
			t.Fatalf("followed import: %+v", e)
		}
	}

	// The server restarts: the followers reconnect by themselves and go
	// on from where they were.
	srv.stop(t)
	srv = startServerArgs(t, data, []string{"--addr", addr}, "HANDOFF_ADMIN_TOKEN="+adminToken)
	must(t, u, adminToken, "db", "put", "--app", app, "--db", "jobs", `{"_id":"j3"}`)
	for _, f := range []*followProc{all, jobs} {
		if e, _ := f.next(); e.Seq != 6 || e.ID != "j3" {
			t.Fatalf("the change after a restart: %+v", e)
		}
	}

	// --limit ends --follow after that many changes, waiting for them.
	lim := startFollow(t, u, adminToken, "--app", app, "--since", "5", "--limit", "2")
	if e, _ := lim.next(); e.Seq != 6 {
		t.Fatalf("--limit: %+v", e)
	}
	must(t, u, adminToken, "db", "put", "--app", app, "--db", "jobs", `{"_id":"j4"}`)
	if e, _ := lim.next(); e.Seq != 7 {
		t.Fatalf("--limit: %+v", e)
	}
	if code := lim.wait(); code != 0 {
		t.Fatalf("--follow --limit 2 exited %d: %s", code, lim.errb.String())
	}
	for _, f := range []*followProc{all, jobs} {
		if e, _ := f.next(); e.Seq != 7 {
			t.Fatalf("followers after the limited one: %+v", e)
		}
	}

	// SIGINT: a clean exit, nothing on stderr.
	for _, f := range []*followProc{all, jobs} {
		if err := f.cmd.Process.Signal(os.Interrupt); err != nil {
			t.Fatal(err)
		}
		if code := f.wait(); code != 0 || f.errb.Len() != 0 {
			t.Fatalf("changes --follow after SIGINT: exit %d, stderr %q", code, f.errb.String())
		}
	}

	// Refusals end it at once, with the usual exit codes.
	bad := startFollow(t, u, adminToken, "--app", "admin/nope")
	if code := bad.wait(); code == 0 || !strings.HasPrefix(bad.errb.String(), "error: not_found: ") {
		t.Fatalf("--follow of a missing app: exit %d, stderr %q", code, bad.errb.String())
	}
	srv.stop(t)
}
