//go:build unix && !solaris && !aix

package main

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/handoff-run/handoff/errs"
)

// lockDataDir takes dir for this process until release is called (or the
// process ends). When another process has it, the error names its PID and
// next says what to do instead.
func lockDataDir(dir, next string) (release func(), err error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, errs.New(errs.Internal, "cannot open the lock file %s: %v; check the data directory's owner and permissions", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, dirInUse(dir, next)
		}
		return nil, errs.New(errs.Internal, "cannot lock %s: %v; the data directory must be on a file system with file locks", path, err)
	}
	// The PID is only for the message of whoever comes second; a failure
	// to write it does not weaken the lock.
	if f.Truncate(0) == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { f.Close() }, nil
}
