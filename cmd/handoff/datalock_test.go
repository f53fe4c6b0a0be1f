//go:build unix && !solaris && !aix

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
)

// TestDataDirLock: a second taker is refused with the holder's PID until
// the first releases; a lock file left by a dead process does not block.
func TestDataDirLock(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// What a crashed server leaves: the file with its PID, no lock.
	if err := os.WriteFile(filepath.Join(dir, lockFile), []byte("999999999\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	release, err := lockDataDir(dir, "do something else")
	if err != nil {
		t.Fatalf("a stale lock file blocked the start: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, lockFile)); string(b) != strconv.Itoa(os.Getpid())+"\n" {
		t.Errorf("the lock file holds %q, want this PID %d", b, os.Getpid())
	}
	// flock locks belong to the open file, so a second open in this same
	// process is refused as another process would be.
	_, err = lockDataDir(dir, "do something else")
	if !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), "PID "+strconv.Itoa(os.Getpid())) ||
		!strings.Contains(err.Error(), "do something else") || !strings.Contains(err.Error(), dir) {
		t.Fatalf("second lock: %v; want unavailable naming PID %d, the directory and what to do", err, os.Getpid())
	}
	release()
	release, err = lockDataDir(dir, "do something else")
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	release()
}

// TestServeRefusesALockedDataDir: two real servers on one data
// directory; the second exits 1 naming the first's PID. After the first
// is killed (its lock file left behind), a new server starts on it, and
// migrate refuses the directory while that one runs.
func TestServeRefusesALockedDataDir(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	first := startServer(t, data, "HANDOFF_ADMIN_TOKEN="+adminToken)
	pid := strconv.Itoa(first.cmd.Process.Pid)
	r := handoff(t, "", "", "", "serve", "--data", data, "--addr", "127.0.0.1:0")
	if r.code != 1 || !strings.HasPrefix(r.stderr, "error: unavailable: the data directory "+data+" is in use by PID "+pid) ||
		!strings.Contains(r.stderr, "--data") {
		t.Fatalf("second server on %s: want exit 1 naming PID %s; got %s", data, pid, r)
	}
	if err := first.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-first.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the first server did not die")
	}
	if _, err := os.Stat(filepath.Join(data, lockFile)); err != nil {
		t.Fatalf("the killed server's lock file: %v", err)
	}
	second := startServer(t, data, "HANDOFF_ADMIN_TOKEN="+adminToken)
	must(t, second.url, adminToken, "whoami")
	r = handoff(t, "", "", "", "migrate", "--from", data, "--to", "postgres://nobody@127.0.0.1:1/none")
	if r.code != 1 || !strings.Contains(r.stderr, "in use by PID "+strconv.Itoa(second.cmd.Process.Pid)) {
		t.Fatalf("migrate from a running server's directory: %s", r)
	}
	second.stop(t)
}
