// Package appdir reads an app's folder: access.js and backend.js, each
// bundled with the modules it imports (bundle.go), and the static files
// under public/, as `handoff deploy` uploads them and `handoff serve
// --app` mounts them.
package appdir

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

// Code file names inside an app's folder.
const (
	AccessFile  = appcode.AccessFile
	BackendFile = appcode.BackendFile
)

// StaticDir is the folder of static files inside an app's folder.
const StaticDir = appcode.StaticDir

// Code is the sources found in a folder; a missing file is "".
type Code struct {
	Access  string
	Backend string
	// Uses are the files Access and Backend were built from, relative
	// to the folder, slash-separated: what a watcher must look at.
	Uses []string
	// Files are the static files under public/, by slash-separated path
	// relative to it; nil without a public/ folder.
	Files map[string][]byte
}

// Read reads the code in dir. A folder with none of the files is an
// error: it is almost always the wrong folder.
func Read(dir string) (Code, error) {
	var c Code
	if st, err := os.Stat(dir); err != nil {
		return Code{}, errs.New(errs.Invalid, "%s does not exist or cannot be read (%v); point at the app's folder", dir, err)
	} else if !st.IsDir() {
		return Code{}, errs.New(errs.Invalid, "%s is a file, not a folder; point at the folder that holds %s and %s", dir, AccessFile, BackendFile)
	}
	var err error
	if c.Access, err = c.module(dir, AccessFile); err != nil {
		return Code{}, err
	}
	if c.Backend, err = c.module(dir, BackendFile); err != nil {
		return Code{}, err
	}
	if c.Files, err = ReadStatic(filepath.Join(dir, StaticDir)); err != nil {
		return Code{}, err
	}
	if c.Access == "" && c.Backend == "" && len(c.Files) == 0 {
		return Code{}, errs.New(errs.Invalid, "%s holds neither %s, %s nor a %s/ folder; point at the app's folder", dir, AccessFile, BackendFile, StaticDir)
	}
	return c, nil
}

// ReadStatic reads every regular file under dir (an app's public/), nil
// when dir does not exist. Names starting with "." are skipped (.git,
// .DS_Store), except .well-known. A symbolic link is refused rather than
// followed: it could reach files outside the app's folder. The limits of
// the engine apply here too, so an oversized folder fails before upload.
func ReadStatic(dir string) (map[string][]byte, error) {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.New(errs.Invalid, "cannot read %s: %v", dir, err)
	}
	if !fi.IsDir() {
		return nil, errs.New(errs.Invalid, "%s is not a folder; static files go in a folder named %s", dir, StaticDir)
	}
	files := map[string][]byte{}
	total := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return errs.New(errs.Invalid, "cannot read %s: %v", p, err)
		}
		if p == dir {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") && d.Name() != ".well-known" {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return errs.New(errs.Invalid, "cannot read %s: %v", p, err)
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			return errs.New(errs.Invalid, "%s is a symbolic link; copy the file into %s/ instead, since a link could reach outside the app's folder", p, StaticDir)
		case d.IsDir():
			return nil
		case !d.Type().IsRegular():
			return errs.New(errs.Invalid, "%s is not a regular file; %s/ may hold only files and folders", p, StaticDir)
		}
		if err := engine.ValidStaticPath(rel); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return errs.New(errs.Invalid, "cannot read %s: %v", p, err)
		}
		if info.Size() > engine.MaxStaticFileBytes {
			return errs.New(errs.TooLarge, "%s is %d bytes; the limit of one static file is %d", p, info.Size(), engine.MaxStaticFileBytes)
		}
		if len(files) == engine.MaxStaticFiles {
			return errs.New(errs.TooLarge, "%s holds more than %d files, the limit", dir, engine.MaxStaticFiles)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return errs.New(errs.Invalid, "cannot read %s: %v", p, err)
		}
		if total += len(b); total > engine.MaxStaticTotalBytes {
			return errs.New(errs.TooLarge, "%s holds more than %d bytes, the limit", dir, engine.MaxStaticTotalBytes)
		}
		files[rel] = b
		return nil
	})
	if err != nil {
		return nil, err
	}
	return files, nil
}

// module bundles the code file name, "" when dir has none.
func (c *Code) module(dir, name string) (string, error) {
	if _, err := os.Lstat(filepath.Join(dir, name)); errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	m, err := Bundle(dir, name)
	if err != nil {
		return "", err
	}
	c.Uses = append(c.Uses, m.Uses...)
	return m.Code, nil
}

// Watch calls changed whenever a file in dir that the app's code may use
// is created, changed or removed, until ctx ends. uses reports the files
// of the last build (Code.Uses); it is called on Watch's goroutine only,
// between calls of changed. Watch polls: one stat per file per interval
// works the same on every file system, editors' atomic renames included.
//
// since is a Stamp of dir taken before the caller last read it, so an
// edit made between that read and Watch's start is seen; "" starts from
// dir as it is when Watch starts.
func Watch(ctx context.Context, dir string, interval time.Duration, since string, uses func() []string, changed func()) {
	stamp := func() string { return stamp(dir, uses()) }
	last := since
	if last == "" {
		last = stamp()
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if now := stamp(); now != last {
				last = now
				changed()
			}
		}
	}
}

// Stamp sums up dir and the used files in it now, as Watch compares it.
func Stamp(dir string, uses []string) string { return stamp(dir, uses) }

// stamp sums up every file in dir outside node_modules/ and hidden ones (so a module
// created to satisfy a missing import counts too), the used files inside
// it, and the node_modules/ folder itself, which changes when a package
// is added or removed: a change to any of them changes the stamp. The
// rest of node_modules/ is left alone; it can hold thousands of files.
func stamp(dir string, uses []string) string {
	var b strings.Builder
	line := func(p string, fi fs.FileInfo) {
		fmt.Fprintf(&b, "%s %d %d %v\n", p, fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
	}
	modules := filepath.Join(dir, "node_modules")
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return nil
		case p != dir && strings.HasPrefix(d.Name(), "."):
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if fi, err := d.Info(); err == nil {
			line(p, fi)
		}
		if p == modules {
			return filepath.SkipDir
		}
		return nil
	})
	for _, u := range uses {
		if p := filepath.Join(dir, filepath.FromSlash(u)); strings.HasPrefix(p, modules+string(filepath.Separator)) {
			if fi, err := os.Stat(p); err == nil {
				line(p, fi)
			}
		}
	}
	return b.String()
}
