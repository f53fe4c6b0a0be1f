package main

import (
	"crypto/rand"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/handoff-run/handoff/errs"
)

// serverKeySize is the length of the AES-256 key app secrets are sealed
// with.
const serverKeySize = 32

// loadServerKey reads <data>/server.key, making it (32 random bytes, mode
// 0600) on first start. Secrets in the database open only with this key:
// back it up apart from the database, and keep it when moving the data.
func loadServerKey(dir string, log *slog.Logger) ([]byte, error) {
	path := filepath.Join(dir, serverKeyFile)
	key, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		key = make([]byte, serverKeySize)
		if _, err := rand.Read(key); err != nil {
			return nil, errs.New(errs.Internal, "cannot make a server key: %v", err)
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			return loadServerKey(dir, log) // another server made it first
		}
		if err != nil {
			return nil, errs.New(errs.Internal, "cannot create the server key %s: %v", path, err)
		}
		_, werr := f.Write(key)
		if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
			os.Remove(path)
			return nil, errs.New(errs.Internal, "cannot write the server key %s: %v", path, err)
		}
		log.Info("created the server key that seals app secrets; back it up apart from the database", "path", path)
		return key, nil
	}
	if err != nil {
		return nil, errs.New(errs.Internal, "cannot read the server key %s: %v", path, err)
	}
	if len(key) != serverKeySize {
		return nil, errs.New(errs.Invalid, "the server key %s is %d bytes, not %d; restore it from a backup (without it the app secrets cannot be opened)", path, len(key), serverKeySize)
	}
	if fi, err := os.Stat(path); err == nil && fi.Mode().Perm()&0o077 != 0 {
		log.Warn("the server key is readable by other users; run chmod 600 on it", "path", path)
	}
	return key, nil
}
