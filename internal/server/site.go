package server

import (
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
)

// Each app's site is served on an origin of its own (internal/engine/sites.go):
// http://<name>--<owner>.localhost:<port>/ always (browsers and curl
// resolve *.localhost to this machine), and
// https://<name>--<owner>.<domain>/ with Options.SiteDomain. A page of
// one app can then read neither the console's stored token nor another
// app's, and the API tells the browser, by CORS, which pages may call it
// for which app (cors.go).

// sitePattern labels the metrics of requests to app sites.
const sitePattern = "{site}"

// siteClientPrefix is where a site's page finds the browser client: a
// redirect to the main origin's /client/, so the module's own URL (its
// import.meta.url) tells it where the API is.
const siteClientPrefix = "/_handoff/client/"

// siteLabel returns the app label of a site host ("jobs--alice" for
// jobs--alice.localhost:8080), and whether host is a site host at all.
func (s *Server) siteLabel(host string) (string, bool) {
	h := strings.ToLower(hostOnly(host))
	h = strings.TrimSuffix(h, ".") // a fully qualified name
	for _, parent := range []string{"localhost", s.siteDomain} {
		if parent == "" {
			continue
		}
		if label, ok := strings.CutSuffix(h, "."+parent); ok && label != "" && !strings.Contains(label, ".") {
			return label, true
		}
	}
	return "", false
}

// siteOrigin is the origin of owner/name's site as seen by a client of r.
func (s *Server) siteOrigin(r *http.Request, owner, name string) string {
	label := engine.SiteLabel(owner, name)
	if s.siteDomain != "" {
		return "https://" + label + "." + s.siteDomain
	}
	return localSiteOrigin(r, label)
}

// localSiteOrigin is the *.localhost origin of a site label, on the
// scheme and port r came in on.
func localSiteOrigin(r *http.Request, label string) string {
	return scheme(r) + "://" + label + ".localhost" + portOf(r.Host)
}

// isSiteOrigin reports whether origin is owner/name's site, in either
// of the forms this server serves it at.
func (s *Server) isSiteOrigin(r *http.Request, origin, owner, name string) bool {
	label := engine.SiteLabel(owner, name)
	return origin == localSiteOrigin(r, label) || (s.siteDomain != "" && origin == "https://"+label+"."+s.siteDomain)
}

// mainOrigin is the origin of the API and the console, for a request
// that came to a site.
func (s *Server) mainOrigin(r *http.Request) string {
	if s.siteDomain != "" {
		return "https://" + s.siteDomain
	}
	return scheme(r) + "://localhost" + portOf(r.Host)
}

// serveSite answers a request to an app's site: the fetch lane under
// /api/, the browser client's redirect, and the static files elsewhere.
func (s *Server) serveSite(w http.ResponseWriter, r *http.Request, label string) {
	ref, err := s.e.SiteApp(r.Context(), label)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	p := r.URL.Path
	switch {
	case p == "/api" || strings.HasPrefix(p, "/api/"):
		s.fetchLane(w, r, ref, strings.TrimPrefix(p, "/api"))
	case strings.HasPrefix(p, siteClientPrefix):
		http.Redirect(w, r, s.mainOrigin(r)+"/client/"+strings.TrimPrefix(r.URL.EscapedPath(), siteClientPrefix), http.StatusTemporaryRedirect)
	case strings.Contains(strings.ToLower(r.URL.EscapedPath()), "%2f"):
		// A '/' sent escaped names no file: a separator smuggled into a
		// name would let one path stand for another.
		s.writeError(w, r, errs.New(errs.Invalid, "the path %q has an escaped '/' (%%2F); ask for static files with plain '/' between names", r.URL.EscapedPath()))
	default:
		s.staticFile(w, r, ref, strings.TrimPrefix(p, "/"))
	}
}

// oldSitePath sends /apps/{owner}/{name}/... on the main origin, where
// sites used to be, to the site's own origin. The redirect keeps the
// method and body, so webhooks posting to the old address still arrive.
// It names only the site of an app that exists, with a host built from
// the app's checked name, never from the path's own bytes: the path is
// the client's, and a redirect it could aim anywhere would lend this
// server's name to any page.
func (s *Server) oldSitePath(w http.ResponseWriter, r *http.Request) {
	ref := r.PathValue("owner") + "/" + r.PathValue("name")
	owner, name, err := engine.ParseAppRef(ref)
	if err != nil {
		s.writeError(w, r, errs.New(errs.NotFound, "no app is at %q; an app's address is /apps/OWNER/NAME/ with lowercase letters, digits and '-' (see `handoff app list`)", r.URL.EscapedPath()))
		return
	}
	if got, err := s.e.SiteApp(r.Context(), engine.SiteLabel(owner, name)); err != nil || got != ref {
		if err == nil || errs.Is(err, errs.NotFound) {
			err = errs.New(errs.NotFound, "app %s not found; `handoff app list` shows the apps", ref)
		}
		s.writeError(w, r, err)
		return
	}
	to := s.siteOrigin(r, owner, name) + "/" + r.PathValue("path")
	if esc := r.URL.EscapedPath(); strings.HasPrefix(esc, "/apps/"+ref+"/") {
		to = s.siteOrigin(r, owner, name) + strings.TrimPrefix(esc, "/apps/"+ref)
	}
	if r.URL.RawQuery != "" {
		to += "?" + r.URL.RawQuery
	}
	http.Redirect(w, r, to, http.StatusTemporaryRedirect)
}

// siteURL is the URL of an app's site, for answers that name it.
func (s *Server) siteURL(r *http.Request, ref string) string {
	owner, name, err := engine.ParseAppRef(ref)
	if err != nil {
		return ""
	}
	return s.siteOrigin(r, owner, name) + "/"
}

func scheme(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// hostOnly is host without its port.
func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return host
}

// portOf is ":port" of host, or "" when it has none or none that is a
// port number: the Host header is the client's, and what goes into an
// origin this server names must be only a port.
func portOf(host string) string {
	_, p, err := net.SplitHostPort(host)
	if err != nil || p == "" || len(p) > 5 {
		return ""
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
		return ""
	}
	return ":" + p
}
