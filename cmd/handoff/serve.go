package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/handoff-run/handoff/engine"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/server"
	"github.com/handoff-run/handoff/store/sqlite"
)

const (
	defaultAddr    = "127.0.0.1:8080"
	defaultDataDir = "handoff-data"
	// adminTokenFile holds the admin token minted on first start.
	adminTokenFile = "admin.token"
	// shutdownGrace is how long in-flight requests get to finish after
	// SIGINT or SIGTERM.
	shutdownGrace = 15 * time.Second
)

type serveOptions struct {
	data     string
	addr     string
	postgres string
	apps     []string
}

func (c *cli) serveCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve [--data DIR] [--addr HOST:PORT]",
		Short: "Run the handoff server",
		Long: `Run the handoff server on an embedded store in the data directory
(--data, else $HANDOFF_DATA, else ./` + defaultDataDir + `).

On first start the admin user is created. With $HANDOFF_ADMIN_TOKEN set,
that is the admin's token; otherwise a random token is written to
DIR/` + adminTokenFile + ` (mode 0600) and its path is printed.

SIGINT or SIGTERM stops the server gracefully: it stops accepting
connections and lets requests in flight finish.`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			if o.postgres != "" {
				return usageError{"--postgres is not supported yet; run without it to use the embedded store in --data"}
			}
			if len(o.apps) > 0 {
				return usageError{"--app is not supported yet on serve; deploying app code at start is not implemented"}
			}
			if o.data == "" {
				o.data = c.getenv("HANDOFF_DATA")
			}
			if o.data == "" {
				o.data = defaultDataDir
			}
			return c.serve(cmd.Context(), o)
		}),
	}
	fl := cmd.Flags()
	fl.StringVar(&o.data, "data", "", "data directory (default $HANDOFF_DATA, else ./"+defaultDataDir+")")
	fl.StringVar(&o.addr, "addr", defaultAddr, "address to listen on, HOST:PORT (port 0 picks a free one)")
	fl.StringVar(&o.postgres, "postgres", "", "PostgreSQL URL (not supported yet)")
	fl.StringArrayVar(&o.apps, "app", nil, "owner/name=DIR: deploy an app's code at start (not supported yet)")
	return cmd
}

func (c *cli) serve(ctx context.Context, o serveOptions) error {
	log := slog.New(slog.NewTextHandler(c.stderr, nil))

	if err := os.MkdirAll(o.data, 0o700); err != nil {
		return errs.New(errs.Invalid, "cannot create the data directory %s: %v", o.data, err)
	}
	st, err := sqlite.Open(o.data)
	if err != nil {
		return errs.New(errs.Internal, "cannot open the store in %s: %v", o.data, err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("closing the store", "err", err)
		}
	}()

	eng := engine.New(st, engine.Options{Logger: log})
	envToken := c.getenv("HANDOFF_ADMIN_TOKEN")
	token, err := eng.Bootstrap(ctx, envToken)
	if err != nil {
		return err
	}
	switch {
	case envToken != "":
		log.Info("admin token taken from HANDOFF_ADMIN_TOKEN")
	case token != "":
		path, err := writeAdminToken(o.data, token)
		if err != nil {
			return err
		}
		// The token itself never goes to the log: only where to find it.
		log.Info("created the admin user; its token is in the file", "path", path,
			"hint", "export HANDOFF_TOKEN=$(cat "+path+")")
	}

	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return errs.New(errs.Unavailable, "cannot listen on %s: %v; pick another address with --addr", o.addr, err)
	}
	hs := &http.Server{
		Handler:           server.New(eng, server.Options{Logger: log}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("handoff listening", "url", "http://"+ln.Addr().String(), "data", o.data, "version", versionString())

	select {
	case err := <-served:
		return errs.New(errs.Internal, "the server stopped: %v", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		log.Warn("requests still in flight were cut off", "err", err)
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("server", "err", err)
	}
	log.Info("stopped")
	return nil
}

// writeAdminToken stores a minted admin token in DIR/admin.token, readable
// only by its owner.
func writeAdminToken(dir, token string) (string, error) {
	path := filepath.Join(dir, adminTokenFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return "", errs.New(errs.Internal, "cannot write the admin token to %s: %v", path, err)
	}
	// A file left by an earlier data directory keeps its old mode on
	// O_TRUNC: make sure it is private.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return "", errs.New(errs.Internal, "cannot restrict %s to its owner: %v", path, err)
	}
	if _, err := fmt.Fprintln(f, token); err != nil {
		f.Close()
		return "", errs.New(errs.Internal, "cannot write the admin token to %s: %v", path, err)
	}
	if err := f.Close(); err != nil {
		return "", errs.New(errs.Internal, "cannot write the admin token to %s: %v", path, err)
	}
	return path, nil
}
