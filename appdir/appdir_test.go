package appdir

import (
	"context"
	"os"
	"path/filepath"
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
	go Watch(ctx, dir, time.Millisecond, func() { changed <- struct{}{} })
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
