package appdir

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
)

func TestRead(t *testing.T) {
	dir := t.TempDir()
	if _, err := Read(dir); !errs.Is(err, errs.Invalid) {
		t.Fatalf("empty folder: got %v, want invalid", err)
	}
	os.WriteFile(filepath.Join(dir, AccessFile), []byte("export default () => {}"), 0o644)
	c, err := Read(dir)
	if err != nil || c.Access == "" || c.Backend != "" {
		t.Fatalf("got %+v, %v", c, err)
	}
}

func TestWatchSeesChanges(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, AccessFile)
	os.WriteFile(path, []byte("a"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := make(chan struct{}, 10)
	go Watch(ctx, dir, time.Millisecond, "", func() []string { return nil }, func() { changed <- struct{}{} })
	// The watcher's first stamp may be taken after this write; write until
	// it reports, with a new size each time so the stamp must differ.
	for i := 2; ; i++ {
		os.WriteFile(path, make([]byte, i), 0o644)
		select {
		case <-changed:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestWatchSinceAStamp: an edit made after the caller's stamp and before
// the watcher starts is seen, though the watcher's own first look would
// find nothing new.
func TestWatchSinceAStamp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, AccessFile)
	os.WriteFile(path, []byte("a"), 0o644)
	since := Stamp(dir, nil)
	os.WriteFile(path, []byte("bb"), 0o644)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	changed := make(chan struct{}, 10)
	go Watch(ctx, dir, time.Millisecond, since, func() []string { return nil }, func() { changed <- struct{}{} })
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("the edit made before the watcher started was not seen")
	}
}

func TestReadStatic(t *testing.T) {
	dir := t.TempDir()
	write := func(p, s string) {
		t.Helper()
		path := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("public/index.html", "hi")
	write("public/a/b/c.txt", "c")
	write("public/.git/HEAD", "skipped")
	write("public/.well-known/security.txt", "kept")
	c, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Files) != 3 || string(c.Files["index.html"]) != "hi" || string(c.Files["a/b/c.txt"]) != "c" ||
		string(c.Files[".well-known/security.txt"]) != "kept" {
		t.Fatalf("files: %v", c.Files)
	}
	// A folder with only public/ is an app folder.
	if c.Access != "" || c.Backend != "" {
		t.Fatalf("code: %+v", c)
	}
	if err := os.Symlink(filepath.Join(dir, "public", "index.html"), filepath.Join(dir, "public", "link.html")); err == nil {
		if _, err := Read(dir); !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("symlink: %v", err)
		}
	}
}
