package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/handoff-run/handoff/errs"
)

// lockFile in the data directory holds the PID of the process that has
// the directory. The lock itself is an advisory lock on the open file
// (datalock_unix.go), which the kernel drops when the process dies: a
// crashed server leaves the file behind but never a lock that blocks the
// next start.
const lockFile = "lock"

// dirInUse is the error of a second process on a locked data directory;
// next says what to do instead.
func dirInUse(dir, next string) error {
	path := filepath.Join(dir, lockFile)
	holder := "another process"
	if b, err := os.ReadFile(path); err == nil && strings.TrimSpace(string(b)) != "" {
		holder = "PID " + strings.TrimSpace(string(b))
	}
	return errs.New(errs.Unavailable, "the data directory %s is in use by %s (see %s): one data directory, one server; %s",
		dir, holder, path, next)
}
