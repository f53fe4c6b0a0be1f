package server

import (
	"net/http"

	"github.com/handoff-run/handoff/errs"
)

// originCheck answers GET /v1/apps/{owner}/{app}/cors: whether a page at
// the request's Origin may call the app's API from a browser. A browser
// hides a refused preflight's answer from the page, which sees only a
// network error; the browser client asks here when a call fails that
// way, so the page learns it was refused and the command that allows it.
// Any origin may read the answer (a simple GET, no credentials, "*"),
// which says nothing that a preflight sent from curl would not.
func (s *Server) originCheck(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Cache-Control", "no-store") // the app's settings may change it
	origin := r.Header.Get("Origin")
	if origin == "" {
		s.writeError(w, r, errs.New(errs.Invalid, "send the Origin header: this route says whether a page at that origin may call the app from a browser (browsers send it themselves on a call from another origin)"))
		return
	}
	ref := appRef(r)
	// corsAllowed reads the app from the path, as for the app's own routes.
	q := r.Clone(r.Context())
	q.URL.Path = "/v1/apps/" + ref + "/"
	app, ok := s.corsAllowed(q, origin)
	out := originAnswer{App: ref, Origin: origin, Allowed: ok}
	switch {
	case ok:
	case origin == "null":
		out.Error = errs.New(errs.Forbidden, "a page with no origin of its own (a file:// page or a sandboxed frame) may not call app %s; serve the page over http(s) and allow its origin with `handoff app set --app %s --origin ORIGIN`", ref, ref)
	case app == "":
		out.Error = errs.New(errs.Forbidden, "the page at %s may not call app %s from a browser: this server has no such app; check the app's name", origin, ref)
	default:
		out.Error = errs.New(errs.Forbidden, "the page at %s may not call app %s from a browser; to let it, run `handoff app set --app %s --origin %s` (--origin replaces the app's list: repeat it for each origin to keep)", origin, ref, ref, origin)
	}
	writeJSON(w, http.StatusOK, out)
}

// originAnswer is originCheck's answer; Error is what the page's call
// fails with when the origin is refused.
type originAnswer struct {
	App     string      `json:"app"`
	Origin  string      `json:"origin"`
	Allowed bool        `json:"allowed"`
	Error   *errs.Error `json:"error,omitempty"`
}
