// Package appdir reads an app's folder: access.js and backend.js, as
// `handoff deploy` uploads them and `handoff serve --app` mounts them.
package appdir

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/handoff-run/handoff/engine"
	"github.com/handoff-run/handoff/errs"
)

// Code file names inside an app's folder.
const (
	AccessFile  = engine.AccessFile
	BackendFile = engine.BackendFile
)

// Code is the sources found in a folder; a missing file is "".
type Code struct {
	Access  string
	Backend string
}

// Read reads the code in dir. A folder with neither file is an error: it
// is almost always the wrong folder.
func Read(dir string) (Code, error) {
	var c Code
	var err error
	if c.Access, err = readOptional(filepath.Join(dir, AccessFile)); err != nil {
		return Code{}, err
	}
	if c.Backend, err = readOptional(filepath.Join(dir, BackendFile)); err != nil {
		return Code{}, err
	}
	if c.Access == "" && c.Backend == "" {
		return Code{}, errs.New(errs.Invalid, "%s holds neither %s nor %s; point at the app's folder", dir, AccessFile, BackendFile)
	}
	return c, nil
}

func readOptional(path string) (string, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", errs.New(errs.Invalid, "cannot read %s: %v", path, err)
	}
	return string(b), nil
}

// Watch calls changed whenever a code file in dir is created, changed or
// removed, until ctx ends. It polls: one stat per file per interval works
// the same on every file system, editors' atomic renames included.
func Watch(ctx context.Context, dir string, interval time.Duration, changed func()) {
	last := stamp(dir)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if now := stamp(dir); now != last {
				last = now
				changed()
			}
		}
	}
}

type fileStamp struct {
	size int64
	mod  time.Time
}

func stamp(dir string) [2]fileStamp {
	var s [2]fileStamp
	for i, name := range []string{AccessFile, BackendFile} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err == nil {
			s[i] = fileStamp{fi.Size(), fi.ModTime()}
		}
	}
	return s
}
