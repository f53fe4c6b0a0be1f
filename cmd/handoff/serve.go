package main

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/backend"
	"github.com/handoff-run/handoff/internal/compilechild"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/internal/jsvm"
	"github.com/handoff-run/handoff/internal/server"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
	"github.com/handoff-run/handoff/store/sqlite"
)

const (
	defaultAddr    = "127.0.0.1:8080"
	defaultDataDir = "handoff-data"
	// adminTokenFile holds the admin token minted on first start.
	adminTokenFile = "admin.token"
	// serverKeyFile holds the key app secrets are sealed with (identity_key.go).
	serverKeyFile = "server.key"
	// shutdownGrace is how long in-flight requests get to finish after
	// SIGINT or SIGTERM.
	shutdownGrace = 15 * time.Second
)

type serveOptions struct {
	data     string
	addr     string
	postgres []string
	apps     []string
	vibes    []string // --vibe, the alias of --app
	mounts   []mount
	jsMemory int // MiB
	// compileTimeout bounds the child that compiles a deploy first.
	compileTimeout time.Duration
	// siteDomain serves app sites at https://NAME--OWNER.DOMAIN/.
	siteDomain string
}

func (c *cli) serveCmd() *cobra.Command {
	var o serveOptions
	cmd := &cobra.Command{
		Use:   "serve [--data DIR] [--addr HOST:PORT] [--postgres URL]",
		Short: "Run the handoff server",
		Long: `Run the handoff server on an embedded store in the data directory
(--data, else $HANDOFF_DATA, else ./` + defaultDataDir + `).

On first start the admin user is created. With $HANDOFF_ADMIN_TOKEN set,
that is the admin's token; otherwise a random token is written to
DIR/` + adminTokenFile + ` (mode 0600) and its path is printed.

One data directory belongs to one server: while it runs, it holds a lock
on DIR/` + lockFile + ` (with its PID), and a second server on DIR refuses to
start. The lock ends with the process, so a crash never blocks a restart.

With --postgres URL (else $HANDOFF_POSTGRES), the store is that PostgreSQL
database instead, which several servers may share, and so may they their
data directory: it then holds only ` + adminTokenFile + ` and ` + serverKeyFile + `.
With several --postgres URLs, apps are spread over those databases: the
first holds users, tokens and apps, and each app's data lives in one of
them (docs/scaling.md); every node must be given the same URLs in the
same order.

SIGINT or SIGTERM stops the server gracefully: it stops accepting
connections and lets requests in flight finish.`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			if env := c.getenv("HANDOFF_POSTGRES"); len(o.postgres) == 0 && env != "" {
				o.postgres = []string{env}
			}
			for _, u := range o.postgres {
				if err := postgres.CheckURL(u); err != nil {
					return usageError{"--postgres (or HANDOFF_POSTGRES) must be a postgres://USER:PASSWORD@HOST:PORT/DB URL: " + err.Error()}
				}
			}
			for _, a := range append(o.apps, o.vibes...) {
				m, err := parseMount(a)
				if err != nil {
					return err
				}
				o.mounts = append(o.mounts, m)
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
	fl.StringArrayVar(&o.postgres, "postgres", nil, "PostgreSQL URL, postgres://USER:PASSWORD@HOST:PORT/DB, to use instead of the embedded store (default $HANDOFF_POSTGRES); repeat it to spread apps over several databases")
	fl.StringArrayVar(&o.apps, "app", nil, "owner/name=DIR: serve the app's code from DIR and redeploy it on every edit (repeatable)")
	fl.StringArrayVar(&o.vibes, "vibe", nil, "alias of --app")
	fl.StringVar(&o.siteDomain, "site-domain", "", "serve each app's site at https://NAME--OWNER.DOMAIN/ and expect the API at https://DOMAIN, behind a proxy that ends TLS (sites are always at http://NAME--OWNER.localhost:PORT/ too)")
	fl.DurationVar(&o.compileTimeout, "compile-timeout", compilechild.DefaultTimeout, "how long a deploy's JavaScript may take to compile; each deploy is compiled in a child process first, so code that would crash or stall the compiler fails the deploy instead")
	fl.IntVar(&o.jsMemory, "js-memory", jsvm.DefaultHeapCeiling>>20, "MiB of heap past which the apps' running JavaScript calls are stopped; the Go runtime also collects harder from there")
	return cmd
}

func (c *cli) serve(ctx context.Context, o serveOptions) error {
	log := slog.New(slog.NewTextHandler(c.stderr, nil))
	limitMemory(o.jsMemory)

	// Listen first: a busy address then fails the start before it makes
	// a data directory, a store or an admin token it would not use.
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return errs.New(errs.Unavailable, "cannot listen on %s: %v; pick another address with --addr", o.addr, err)
	}
	defer ln.Close() // when the start fails; after Serve, Shutdown closes it

	if err := os.MkdirAll(o.data, 0o700); err != nil {
		return errs.New(errs.Invalid, "cannot create the data directory %s: %v", o.data, err)
	}
	if len(o.postgres) == 0 {
		// A second server on the same embedded store would not see the
		// first one's writes in its feeds and caches. PostgreSQL nodes may
		// share a data directory: it holds only their key and tokens.
		release, err := lockDataDir(o.data, "stop that server, or start this one with another --data")
		if err != nil {
			return err
		}
		defer release() // after the store is closed
	}
	var st store.Store
	var mover server.Mover
	where := o.data
	if len(o.postgres) > 0 {
		if st, mover, where, err = openPostgres(ctx, o.postgres); err != nil {
			return err
		}
	} else if st, err = sqlite.Open(o.data); err != nil {
		return errs.New(errs.Internal, "cannot open the store in %s: %v", o.data, err)
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("closing the store", "err", err)
		}
	}()

	secretKey, err := loadServerKey(o.data, log)
	if err != nil {
		return err
	}
	vet, err := compilechild.ForThisProgram(o.compileTimeout)
	if err != nil {
		return err
	}
	eng := engine.New(st, engine.Options{
		MaxJSMemory: o.jsMemory,
		SecretKey:   secretKey,
		Logger:      log,
		Code:        jsapp.New(jsapp.Options{Backend: backend.Options{Logger: log}}),
		VetCode:     vet.Check,
	})
	envToken := c.getenv("HANDOFF_ADMIN_TOKEN")
	token, err := eng.Bootstrap(ctx, envToken)
	if err != nil {
		return err
	}
	switch {
	case envToken != "":
		log.Info("admin token taken from HANDOFF_ADMIN_TOKEN")
	case token != "":
		path, err := writeTokenFile(o.data, adminTokenFile, token)
		if err != nil {
			return err
		}
		// The token itself never goes to the log: only where to find it.
		log.Info("created the admin user; its token is in the file", "path", path,
			"hint", "export HANDOFF_TOKEN=$(cat "+path+")")
	}

	for _, m := range o.mounts {
		if err := m.start(ctx, eng, o.data, log); err != nil {
			return err
		}
	}

	if err := eng.Start(ctx); err != nil {
		return err
	}
	defer eng.Close()

	// Live feeds run until the client leaves; shutdown ends them through
	// their request context instead of waiting out the grace period.
	streams, endStreams := context.WithCancel(context.Background())
	defer endStreams()
	api := server.New(eng, server.Options{Logger: log, SiteDomain: o.siteDomain, Mover: mover})
	registerRuntimeMetrics(api.Registry(), eng)
	hs := &http.Server{
		BaseContext:       func(net.Listener) context.Context { return streams },
		Handler:           api,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	served := make(chan error, 1)
	go func() { served <- hs.Serve(ln) }()
	log.Info("handoff listening", "url", "http://"+ln.Addr().String(), "data", o.data, "store", where, "version", versionString())
	for _, m := range o.mounts {
		log.Info("app site", "app", m.app, "url", siteURL(m.app, ln.Addr(), o.siteDomain))
	}

	select {
	case err := <-served:
		return errs.New(errs.Internal, "the server stopped: %v", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	endStreams()
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

// limitMemory applies --js-memory: the JavaScript heap ceiling, and a soft
// limit for the Go runtime a quarter above it (unless GOMEMLIMIT sets one),
// so the garbage of calls stopped for memory is collected and returned to
// the system promptly instead of at the next doubling of the heap.
func limitMemory(mib int) {
	if mib <= 0 {
		jsvm.SetHeapCeiling(0)
		return
	}
	jsvm.SetHeapCeiling(int64(mib) << 20)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(int64(mib) << 20 * 5 / 4)
	}
}

// siteURL is where the server at addr serves the app's site.
func siteURL(app string, addr net.Addr, domain string) string {
	owner, name, _ := strings.Cut(app, "/")
	label := engine.SiteLabel(owner, name)
	if domain != "" {
		return "https://" + label + "." + strings.Trim(domain, ".") + "/"
	}
	port := ""
	if ta, ok := addr.(*net.TCPAddr); ok {
		port = ":" + strconv.Itoa(ta.Port)
	}
	return "http://" + label + ".localhost" + port + "/"
}

// registerRuntimeMetrics adds the JavaScript runtimes' series: how many
// are alive, how many calls had to make one, how many idle ones were
// retired. An app nobody uses holds none.
func registerRuntimeMetrics(reg prometheus.Registerer, eng *engine.Engine) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "handoff_apps_loaded",
			Help: "Apps whose state and code are in memory: those used since they last changed.",
		}, func() float64 { return float64(eng.LoadedApps()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "handoff_js_runtimes",
			Help: "JavaScript runtimes alive, in every app's pools.",
		}, func() float64 { return float64(jsvm.Stats().Runtimes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "handoff_js_cold_starts_total",
			Help: "Calls that found no idle runtime for their app's code and waited for one to be made.",
		}, func() float64 { return float64(jsvm.Stats().ColdStarts) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "handoff_js_runtimes_retired_idle_total",
			Help: "Runtimes retired after being idle for their pool's idle timeout.",
		}, func() float64 { return float64(jsvm.Stats().Trimmed) }),
	)
}
