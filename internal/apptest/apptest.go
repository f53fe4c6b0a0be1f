// Package apptest writes app folders for tests: access.js, backend.js and
// the modules they import, as a user lays them out.
package apptest

import (
	"os"
	"path/filepath"
	"testing"
)

// Folder writes files (slash-separated path → contents) into a new
// temporary folder and returns it.
func Folder(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	Write(t, dir, files)
	return dir
}

// Write writes files into dir, making folders as needed.
func Write(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, src := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
