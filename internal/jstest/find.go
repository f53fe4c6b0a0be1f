package jstest

import (
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appdir"
)

// TestSuffix marks a test file.
const TestSuffix = ".test.js"

// Find lists the test files of an app's folder, slash-separated and
// relative to it, sorted: under test/ or beside the code. node_modules/,
// public/ (the page's files, which may hold browser tests of their own)
// and hidden folders are not searched.
func Find(dir string) ([]string, error) {
	if _, err := appdir.Read(dir); err != nil {
		return nil, err
	}
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if p != dir && (strings.HasPrefix(d.Name(), ".") || rel == "node_modules" || rel == appdir.StaticDir || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), TestSuffix) && d.Type().IsRegular() {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		return nil, errs.New(errs.Invalid, "cannot read %s: %v", dir, err)
	}
	if len(out) == 0 {
		return nil, errs.New(errs.NotFound, "%s holds no test files; write one as test/NAME%s (`handoff init` writes a starter app with one)", dir, TestSuffix)
	}
	slices.Sort(out)
	return out, nil
}
