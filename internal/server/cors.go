package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/handoff-run/handoff/errs"
)

// The API answers CORS for an app's own site and the extra origins the
// app lists (engine.SetOrigins), on that app's routes only, and for no
// other origin: a page of one app can neither read another app's data
// nor send it a token, since a request with Authorization needs a
// preflight the API refuses. Credentials are bearer tokens, never
// cookies, so there is no credentialed mode to allow.

// corsMaxAge lets a browser keep a preflight's answer for ten minutes.
const corsMaxAge = "600"

// corsHeaders are the request headers a page may send.
const corsHeaders = "Authorization, Content-Type, Last-Event-ID, " + pathHeader

// corsExposed are the response headers a page may read.
const corsExposed = "ETag, Retry-After, X-Handoff-Heartbeat"

// cors adds the CORS headers for a request that carries an Origin, and
// answers a preflight itself. It reports whether the request is done.
func (s *Server) cors(w http.ResponseWriter, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	preflight := r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
	if origin == "" {
		return false
	}
	h := w.Header()
	h.Add("Vary", "Origin")
	app, ok := s.corsAllowed(r, origin)
	if ok {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Expose-Headers", corsExposed)
	}
	if !preflight {
		return false
	}
	if !ok {
		msg := "the page at " + origin + " may not call " + r.URL.Path + " from a browser"
		if app != "" {
			msg += "; to let it, run `handoff app set --app " + app + " --origin " + origin + "`"
		} else {
			msg += "; pages may call only their own app's routes (/v1/apps/OWNER/NAME/...) and /v1/whoami"
		}
		s.writeErrorStatus(w, http.StatusForbidden, errs.New(errs.Forbidden, "%s", msg))
		return true
	}
	h.Set("Access-Control-Allow-Methods", "GET, HEAD, POST, PUT, DELETE")
	h.Set("Access-Control-Allow-Headers", corsHeaders)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
	return true
}

// corsAllowed reports whether a page at origin may call r's route, and
// names the app the route belongs to ("" for none).
func (s *Server) corsAllowed(r *http.Request, origin string) (app string, ok bool) {
	p := r.URL.Path
	if p == "/v1/whoami" {
		// Any app's own page may ask who holds its token.
		label, isSite := s.siteLabel(strings.TrimPrefix(strings.TrimPrefix(origin, "https://"), "http://"))
		if !isSite {
			return "", false
		}
		ref, err := s.e.SiteApp(r.Context(), label)
		if err != nil {
			return "", false
		}
		owner, name, _ := strings.Cut(ref, "/")
		return ref, s.isSiteOrigin(r, origin, owner, name)
	}
	rest, found := strings.CutPrefix(p, "/v1/apps/")
	if !found {
		return "", false
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return "", false
	}
	owner, name := parts[0], parts[1]
	ref := owner + "/" + name
	if s.isSiteOrigin(r, origin, owner, name) {
		return ref, true
	}
	extra, err := s.e.Origins(r.Context(), ref)
	if err != nil {
		return "", false
	}
	return ref, slices.Contains(extra, origin)
}
