package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appdir"
	"github.com/handoff-run/handoff/internal/engine"
)

// mountPoll is how often a mounted folder is checked for edits.
const mountPoll = 300 * time.Millisecond

// mount is one `--app owner/name=DIR`: a folder served for development.
type mount struct {
	app, dir string
}

func parseMount(s string) (mount, error) {
	app, dir, ok := strings.Cut(s, "=")
	if !ok || dir == "" {
		return mount{}, usageError{fmt.Sprintf("--app %q must be owner/name=DIR, e.g. --app demo/jobs=examples/jobs", s)}
	}
	if err := checkAppRef(app); err != nil {
		return mount{}, err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return mount{}, usageError{fmt.Sprintf("--app %s: %s is not a folder", app, dir)}
	}
	return mount{app: app, dir: dir}, nil
}

// start makes sure the owner and the app exist, deploys the folder's code
// if it differs from the live version, then redeploys on every edit until
// ctx ends. A version that does not build or compile is logged, to the
// terminal and to the app's own log, and the live one stays, as with
// `handoff deploy`; the next good version logs that it recovered.
func (m mount) start(ctx context.Context, e *engine.Engine, dataDir string, log *slog.Logger) error {
	admin := engine.Actor{User: engine.AdminUser, Admin: true, Path: "cli"}
	owner, _, _ := strings.Cut(m.app, "/")
	token, err := e.AddUser(ctx, admin, owner)
	switch {
	case err == nil:
		path, werr := writeTokenFile(dataDir, owner+".token", token)
		if werr != nil {
			return werr
		}
		log.Info("created the app's owner; its token is in the file", "user", owner, "path", path)
	case !errs.Is(err, errs.Exists):
		return err
	}
	if _, err := e.CreateApp(ctx, admin, m.app, false); err != nil && !errs.Is(err, errs.Exists) {
		return err
	}
	w := &mountWatch{m: m, e: e, admin: admin, log: log}
	// Stamped before the first deploy reads the folder: an edit made
	// while it deploys, before the watcher starts, is not missed. (The
	// stamp has no used files yet, so a build with some syncs once more,
	// finding nothing to deploy.)
	since := appdir.Stamp(m.dir, nil)
	w.sync(ctx)
	go appdir.Watch(ctx, m.dir, mountPoll, since, func() []string { return w.uses }, func() { w.sync(ctx) })
	return nil
}

// mountWatch is the state of one mounted folder between edits. Only the
// watching goroutine touches it, after start's first sync.
type mountWatch struct {
	m     mount
	e     *engine.Engine
	admin engine.Actor
	log   *slog.Logger
	uses  []string // the files of the last build, for the watcher
	// failed is the error of the last deploy that failed, "" once one
	// succeeds: the same error twice is logged once.
	failed string
}

// sync deploys the folder and reports how that went.
func (w *mountWatch) sync(ctx context.Context) {
	m := w.m
	v, deployed, err := w.deploy(ctx)
	switch {
	case err != nil:
		w.log.Error("app code not deployed; the live version stays", "app", m.app, "dir", m.dir, "err", err)
		if msg := err.Error(); msg != w.failed {
			w.failed = msg
			w.appLog(ctx, "error", "the code in "+m.dir+" was not deployed, so the live version stays: "+msg)
		}
		return
	case deployed:
		w.log.Info("deployed the app's code", "app", m.app, "dir", m.dir, "version", v)
	}
	if w.failed != "" {
		w.failed = ""
		w.log.Info("the app's code deploys again", "app", m.app, "dir", m.dir, "version", v)
		w.appLog(ctx, "info", fmt.Sprintf("recovered: the code in %s deploys again; version %d is live", m.dir, v))
	}
}

func (w *mountWatch) appLog(ctx context.Context, level, msg string) {
	if err := w.e.LogDeploy(ctx, w.admin, w.m.app, level, msg, "dir", w.m.dir); err != nil {
		w.log.Error("cannot write the app's log", "app", w.m.app, "err", err)
	}
}

// deploy deploys the folder's code unless it is already live, and
// returns the live version.
func (w *mountWatch) deploy(ctx context.Context) (version int, deployed bool, err error) {
	code, err := appdir.Read(w.m.dir)
	if err != nil {
		return 0, false, err
	}
	w.uses = code.Uses
	live, v, err := w.e.LiveCode(ctx, w.admin, w.m.app)
	if err != nil {
		return 0, false, err
	}
	if live.Access == code.Access && live.Backend == code.Backend && sameFiles(live.Files, code.Files) {
		return v, false, nil
	}
	info, err := w.e.DeployCode(ctx, w.admin, w.m.app, engine.Code{Access: code.Access, Backend: code.Backend, Files: code.Files})
	return info.Version, err == nil, err
}

// sameFiles reports whether two sets of static files are equal.
func sameFiles(a, b map[string][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for p, x := range a {
		y, ok := b[p]
		if !ok || !bytes.Equal(x, y) {
			return false
		}
	}
	return true
}

// writeTokenFile writes a token to DIR/name, readable only by its owner.
func writeTokenFile(dir, name, token string) (string, error) {
	path := filepath.Join(dir, name)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", errs.New(errs.Internal, "cannot write a token to %s: %v", path, err)
	}
	// A file left by an earlier data directory keeps its old mode on
	// O_TRUNC: make sure it is private.
	err = errors.Join(f.Chmod(0o600), func() error { _, err := fmt.Fprintln(f, token); return err }(), f.Close())
	if err != nil {
		return "", errs.New(errs.Internal, "cannot write a token to %s: %v", path, err)
	}
	return path, nil
}
