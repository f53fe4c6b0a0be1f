// Package server is handoff's HTTP API. It turns requests into engine
// calls and engine errors into JSON, and nothing more: every rule about
// who may do what lives in the engine, so the API, the CLI and backend
// handlers can never disagree about a decision.
package server

import (
	"cmp"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/handoff-run/handoff/internal/engine"
)

// Options configure a Server. Zero values pick the defaults.
type Options struct {
	// Logger receives failures the client cannot act on (internal errors,
	// recovered panics). Nil means slog.Default().
	Logger *slog.Logger
	// Registry is where the HTTP metrics are registered and what /metrics
	// serves. Nil means a new registry with the Go and process collectors.
	Registry *prometheus.Registry
	// Heartbeat is how often an idle live feed sends a heartbeat comment.
	// Zero means 15 seconds.
	Heartbeat time.Duration
	// BodyTimeout bounds how long a request body may take to arrive, from
	// the start of the request, unless the request has a valid bearer
	// token: a client that trickles a body holds a connection and a
	// goroutine. A device-signed body counts here too, as its signature
	// can only be checked once it is in. Zero means 30 seconds.
	BodyTimeout time.Duration
	// AuthBodyTimeout is BodyTimeout for requests with a valid bearer
	// token: generous, for bulk imports over slow links. Zero means 10
	// minutes.
	AuthBodyTimeout time.Duration
	// SiteDomain, when set, serves each app's site at
	// https://<name>--<owner>.<SiteDomain>/ (behind a proxy that ends
	// TLS) and expects the API at https://<SiteDomain>. Sites are also
	// served at http://<name>--<owner>.localhost:<port>/, which is the
	// only address without it.
	SiteDomain string
	// Mover moves apps between databases; nil on a server with one.
	Mover Mover
}

// Default body deadlines (Options).
const (
	defaultBodyTimeout     = 30 * time.Second
	defaultAuthBodyTimeout = 10 * time.Minute
)

// Server serves the v1 HTTP API of one engine. It is an http.Handler.
type Server struct {
	e       *engine.Engine
	log     *slog.Logger
	reg     *prometheus.Registry
	metrics *metrics
	mux     *http.ServeMux
	// heartbeat is the idle interval of live feeds.
	heartbeat time.Duration
	// bodyTimeout and authBodyTimeout bound request bodies (Options).
	bodyTimeout, authBodyTimeout time.Duration
	// authFails limits failed credentials per client address (ratelimit.go).
	authFails failLimiter
	// visitorFails limits failed visitor sign-ins and sign-ups per client
	// address and per visitor name (ratelimit_visitors.go).
	visitorFails failLimiter
	// ceremonyStarts limits passkey ceremonies started per client address
	// (ratelimit_visitors.go).
	ceremonyStarts failLimiter
	// siteDomain is Options.SiteDomain, lowercase, without dots around.
	siteDomain string
	mover      Mover

	// patterns is every registered pattern: the metrics label requests
	// only with one of these, so the label set stays fixed. methods lists
	// the methods served per path (paths in registration order), for the
	// 405 answers and their Allow header.
	patterns map[string]bool
	methods  map[string][]string
	paths    []string
}

// New returns a server for e with every route registered.
func New(e *engine.Engine, o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Registry == nil {
		o.Registry = newRegistry()
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = defaultHeartbeat
	}
	s := &Server{
		e:        e,
		log:      o.Logger,
		reg:      o.Registry,
		metrics:  newMetrics(o.Registry),
		mux:      http.NewServeMux(),
		patterns: map[string]bool{},
		methods:  map[string][]string{},
	}
	s.ceremonyStarts.burst, s.ceremonyStarts.refill = ceremonyBurst, ceremonyRefill
	s.heartbeat = o.Heartbeat
	s.bodyTimeout = cmp.Or(o.BodyTimeout, defaultBodyTimeout)
	s.authBodyTimeout = cmp.Or(o.AuthBodyTimeout, defaultAuthBodyTimeout)
	s.siteDomain = strings.Trim(strings.ToLower(o.SiteDomain), ".")
	s.mover = o.Mover
	s.routes()
	return s
}

// Registry is the registry /metrics serves, for callers that add their
// own collectors to it.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// ServeHTTP routes the request, records its metrics and turns a panic
// into a 500 so that one bad request never takes the server down.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rw := &responseWriter{ResponseWriter: w}
	defer func() {
		abort := false
		if v := recover(); v != nil {
			abort = s.recovered(rw, r, v)
		}
		s.metrics.observe(s.routeLabel(r), rw.code(), time.Since(start))
		if abort {
			// The response was already under way: abort the connection
			// so the client sees a broken reply, not a complete wrong one.
			panic(http.ErrAbortHandler)
		}
	}()
	rw.Header().Set("X-Content-Type-Options", "nosniff")
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = newTimedBody(r.Body, http.NewResponseController(rw), start, s.bodyTimeout)
	}
	if label, ok := s.siteLabel(r.Host); ok {
		r.Pattern = sitePattern
		s.serveSite(rw, r, label)
		return
	}
	if s.cors(rw, r) {
		return
	}
	s.mux.ServeHTTP(rw, r)
}

// routeLabel is the metrics label of a request: the pattern that the mux
// matched (ServeMux sets r.Pattern on the request it is given). Anything
// else, such as the mux's own redirects, is "unmatched", which keeps the
// label set bounded no matter which paths clients send.
func (s *Server) routeLabel(r *http.Request) string {
	if r.Pattern == "" || r.Pattern == "/" || !s.patterns[r.Pattern] {
		return "unmatched"
	}
	return r.Pattern
}

// responseWriter remembers the status sent, for the metrics and to know
// whether a panic can still be answered with a JSON error.
type responseWriter struct {
	http.ResponseWriter
	status int
}

func (w *responseWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *responseWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets streaming responses through the wrapper.
func (w *responseWriter) Flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap gives http.ResponseController access to the real writer.
func (w *responseWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *responseWriter) code() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}
