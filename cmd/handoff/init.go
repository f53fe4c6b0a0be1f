package main

import (
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
)

// starter is the app `handoff init` writes: a transition table, a
// handler, a test that passes, and a page.
//
//go:embed starter
var starter embed.FS

func (c *cli) initCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "init [DIR]",
		Short: "Write a starter app into DIR (default .): access.js, backend.js, a test and a page",
		Long: `Write a starter app into DIR (default ., made if missing): access.js (the
transition table), backend.js (an onChange handler), test/requests.test.js
(run it with 'handoff test DIR') and public/index.html (the app's page).
Existing files are never overwritten: init refuses and names them.`,
		Args: optionalFolder,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			files, err := writeStarter(dir)
			if err != nil {
				return err
			}
			return c.printJSON(map[string]any{"ok": true, "dir": dir, "files": files,
				"next": "handoff test " + dir + "; then handoff deploy --app OWNER/NAME " + dir})
		}),
	}
}

// writeStarter copies the starter into dir and lists what it wrote. It
// checks every file first, so it writes all or nothing.
func writeStarter(dir string) ([]string, error) {
	var files []string
	err := fs.WalkDir(starter, "starter", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, strings.TrimPrefix(p, "starter/"))
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	var exist []string
	for _, f := range files {
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(f))); err == nil {
			exist = append(exist, f)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if len(exist) > 0 {
		return nil, fmt.Errorf("%s already holds %s; init writes only into a folder without them: pick a new folder, e.g. handoff init myapp", dir, strings.Join(exist, ", "))
	}
	for _, f := range files {
		b, err := starter.ReadFile("starter/" + f)
		if err != nil {
			return nil, err
		}
		p := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return nil, fmt.Errorf("cannot make %s: %w", filepath.Dir(p), err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, fmt.Errorf("cannot write %s: %w", p, err)
		}
	}
	return files, nil
}

// optionalFolder takes at most one argument, a folder.
func optionalFolder(cmd *cobra.Command, args []string) error {
	if len(args) > 1 {
		return usageError{fmt.Sprintf("%s takes at most one folder, got %d: %q", cmd.CommandPath(), len(args), args)}
	}
	return nil
}
