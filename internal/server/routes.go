package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/server/web"
)

// routes registers the v1 API (docs/api.md). Paths name the app as
// {owner}/{app}; document ids are one path-escaped segment, so an id may
// contain '/' as %2F.
func (s *Server) routes() {
	s.handle("GET /healthz", http.HandlerFunc(s.healthz))
	s.handle("GET /metrics", s.metrics.handler)

	s.api("GET /v1/whoami", s.whoami)
	s.api("POST /v1/users", s.addUser)
	s.api("GET /v1/users", s.listUsers)
	s.api("DELETE /v1/users/{user}", s.removeUser)
	s.api("POST /v1/users/{user}/token", s.rotateToken)
	s.api("POST /v1/apps", s.createApp)
	s.api("GET /v1/apps", s.listApps)
	s.api("POST /v1/apps/{owner}/{app}/members", s.addMember)
	s.api("GET /v1/apps/{owner}/{app}/members", s.listMembers)
	s.api("GET /v1/apps/{owner}/{app}/dbs", s.listDBs)
	s.api("GET /v1/apps/{owner}/{app}/changes", s.changes)
	s.api("POST /v1/apps/{owner}/{app}/code", s.deploy)
	s.api("GET /v1/apps/{owner}/{app}/code", s.codeVersions)
	s.api("POST /v1/apps/{owner}/{app}/code/{version}/activate", s.activate)
	s.api("PUT /v1/apps/{owner}/{app}/settings", s.settings)
	s.api("POST /v1/apps/{owner}/{app}/move", s.moveApp)
	s.api("GET /v1/apps/{owner}/{app}/logs", s.logs)
	s.api("GET /v1/apps/{owner}/{app}/events", s.events)
	s.api("POST /v1/apps/{owner}/{app}/events/{seq}/replay", s.replay)
	s.api("GET /v1/apps/{owner}/{app}/schedule", s.schedule)
	s.api("GET /v1/apps/{owner}/{app}/feed", s.feed)
	// No credentials: any page may ask whether its origin is allowed.
	s.handle("GET /v1/apps/{owner}/{app}/cors", http.HandlerFunc(s.originCheck))

	const db = "/v1/apps/{owner}/{app}/dbs/{db}"
	s.api("GET "+db+"/docs", s.scan)
	s.api("POST "+db+"/docs", s.postDoc)
	s.api("PUT "+db+"/docs/{id}", s.putDoc)
	s.api("GET "+db+"/docs/{id}", s.getDoc)
	s.api("DELETE "+db+"/docs/{id}", s.deleteDoc)
	s.api("GET "+db+"/docs/{id}/history", s.history)
	s.api("GET "+db+"/query", s.query)
	s.api("GET "+db+"/changes", s.changes)
	s.api("POST "+db+"/bulk", s.bulk)
	s.api("GET "+db+"/transitions", s.transitions)
	web.Register(s.handle) // the console at / and the browser client module at /client/

	s.identityRoutes()
	s.visitorRoutes()
	s.fetchRoutes()
	s.fallbacks()
}

// apiHandler is a v1 handler: it gets the authenticated actor and returns
// an error instead of writing one, so every error takes the same path to
// the client.
type apiHandler func(w http.ResponseWriter, r *http.Request, a engine.Actor) error

// api registers a v1 route. Credentials are checked before the handler
// runs: a bad token is refused even where anonymous access is allowed, so
// a client with an expired token learns it instead of silently seeing
// less.
func (s *Server) api(pattern string, h apiHandler) {
	s.handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, err := s.actor(r)
		if err == nil && a.User != "" {
			s.authenticated(r)
		}
		if err == nil {
			err = checkQuery(r)
		}
		if err == nil {
			err = h(w, r, a)
		}
		if err != nil {
			s.writeError(w, r, err)
		}
	}))
}

// handle registers pattern ("METHOD /path") and remembers its method for
// the 405 answers.
func (s *Server) handle(pattern string, h http.Handler) {
	method, path, _ := strings.Cut(pattern, " ")
	if _, ok := s.methods[path]; !ok {
		s.paths = append(s.paths, path)
	}
	s.methods[path] = append(s.methods[path], method)
	s.patterns[pattern] = true
	s.mux.Handle(pattern, h)
}

// fallbacks makes the mux answer in JSON where it would answer in plain
// text: each known path without a method catches the methods it does not
// serve (405), and "/" catches every other path (404). A pattern with a
// method is more specific than the same path without one, so these never
// shadow a real route.
func (s *Server) fallbacks() {
	for _, path := range s.paths {
		allow := slices.Clone(s.methods[path])
		if slices.Contains(allow, http.MethodGet) {
			allow = append(allow, http.MethodHead)
		}
		s.patterns[path] = true
		s.mux.Handle(path, s.methodNotAllowed(strings.Join(allow, ", ")))
	}
	s.mux.HandleFunc("/", s.notFound)
}

func (s *Server) methodNotAllowed(allow string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		// No code names this case, and a wrong method is a malformed
		// request: invalid, under the status HTTP clients expect.
		s.writeErrorStatus(w, http.StatusMethodNotAllowed, &errs.Error{Code: errs.Invalid,
			Message: r.Method + " is not allowed on " + r.URL.Path + "; use " + allow})
	})
}

func (s *Server) notFound(w http.ResponseWriter, r *http.Request) {
	msg := "no route for " + r.Method + " " + r.URL.Path + "; see docs/api.md for the routes"
	if strings.Contains(r.URL.Path, "/docs/") {
		msg += " (a '/' inside a document id must be escaped as %2F)"
	}
	s.writeError(w, r, errs.New(errs.NotFound, "%s", msg))
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// appRef is the engine's "owner/name" for the app named in the path.
func appRef(r *http.Request) string { return r.PathValue("owner") + "/" + r.PathValue("app") }
