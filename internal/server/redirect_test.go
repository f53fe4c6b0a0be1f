package server

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store/sqlite"
)

// redirectServer is a server with the apps alice/jobs and alice/a--b,
// with or without a site domain.
func redirectServer(t testing.TB, siteDomain string) *Server {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := engine.New(st, engine.Options{})
	ctx := context.Background()
	if _, err := e.Bootstrap(ctx, adminToken); err != nil {
		t.Fatal(err)
	}
	admin := engine.Actor{User: engine.AdminUser, Admin: true}
	if _, err := e.AddUser(ctx, admin, "alice"); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"alice/jobs", "alice/a--b"} {
		if _, err := e.CreateApp(ctx, engine.Actor{User: "alice"}, ref, false); err != nil {
			t.Fatal(err)
		}
	}
	return New(e, Options{Logger: slog.New(slog.NewTextHandler(&syncBuffer{}, nil)), SiteDomain: siteDomain})
}

// get sends a GET with the raw target and Host, as a client may send
// them, and returns the recorded answer.
func getRaw(srv *Server, host, target string) *httptest.ResponseRecorder {
	req := &http.Request{Method: "GET", Host: host, RequestURI: target, Header: http.Header{}, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return nil
	}
	req.URL = u
	req.RemoteAddr = "192.0.2.1:1234"
	w := httptest.NewRecorder()
	srv.ServeHTTP(w, req)
	return w
}

// checkLocation fails unless a redirect's Location is one this server
// may send a client to: the main origin or the site of an app that
// exists, with nothing of the request's own bytes in its host.
func checkLocation(t *testing.T, siteDomain, host, target string, w *httptest.ResponseRecorder) {
	t.Helper()
	if w.Code >= 500 {
		t.Fatalf("GET %q (Host %q): %d %s", target, host, w.Code, w.Body)
	}
	loc := w.Header().Get("Location")
	if loc == "" {
		return
	}
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatalf("GET %q (Host %q): Location %q is no URL: %v", target, host, loc, err)
	}
	if u.Scheme == "" && u.Host == "" {
		if strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "/\\") {
			t.Fatalf("GET %q (Host %q): Location %q leaves the host", target, host, loc)
		}
		return // a path on the same host
	}
	if u.User != nil || (u.Scheme != "http" && u.Scheme != "https") {
		t.Fatalf("GET %q (Host %q): Location %q", target, host, loc)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			t.Fatalf("GET %q (Host %q): Location %q has port %q", target, host, loc, p)
		}
	}
	allowed := map[string]bool{"localhost": true, "jobs--alice.localhost": true, "a--b--alice.localhost": true}
	if siteDomain != "" {
		allowed[siteDomain] = true
		allowed["jobs--alice."+siteDomain] = true
		allowed["a--b--alice."+siteDomain] = true
	}
	if !allowed[u.Hostname()] {
		t.Fatalf("GET %q (Host %q): Location %q names host %q", target, host, loc, u.Hostname())
	}
}

// TestOldSitePathRedirectsOnlyToAnAppsOwnSite: /apps/OWNER/NAME/...
// redirects only for an app that exists, and only to that app's site;
// an owner or name that would put other bytes into the host is a 404.
func TestOldSitePathRedirectsOnlyToAnAppsOwnSite(t *testing.T) {
	t.Parallel()
	for _, domain := range []string{"", "apps.example.test"} {
		srv := redirectServer(t, domain)
		for _, target := range []string{
			"/apps/x/evil.com%2F/", "/apps/x/evil.com%23/", "/apps/x/evil.com%3F/", "/apps/a@evil.com%2F/x/",
			"/apps/alice/evil.com%2F/", "/apps/alice/jobs%2F@evil.com/", "/apps/alice/nope/", "/apps/Alice/jobs/",
			"/apps/alice/b--alice%2F/", "/apps/x/%2F%2Fevil.com/",
		} {
			w := getRaw(srv, "localhost:8080", target)
			if w.Code != http.StatusNotFound || w.Header().Get("Location") != "" {
				t.Errorf("GET %s: %d, Location %q; want 404 and no redirect", target, w.Code, w.Header().Get("Location"))
			}
		}
		want := "http://jobs--alice.localhost:8080/x/y?z=1"
		if domain != "" {
			want = "https://jobs--alice." + domain + "/x/y?z=1"
		}
		if w := getRaw(srv, "localhost:8080", "/apps/alice/jobs/x/y?z=1"); w.Code != http.StatusTemporaryRedirect || w.Header().Get("Location") != want {
			t.Errorf("GET /apps/alice/jobs/x/y?z=1: %d %q; want 307 to %s", w.Code, w.Header().Get("Location"), want)
		}
		if w := getRaw(srv, "localhost:8080", "/apps/alice/a--b/"); w.Code != http.StatusTemporaryRedirect {
			t.Errorf("GET /apps/alice/a--b/: %d; want 307", w.Code)
		}
		// The Host header is the client's too: only a port number of it
		// goes into the Location.
		for _, host := range []string{"localhost:80@evil.com", "localhost:8080/evil.com", "localhost:1x", "localhost:99999", "localhost:080"} {
			w := getRaw(srv, host, "/apps/alice/jobs/")
			checkLocation(t, domain, host, "/apps/alice/jobs/", w)
			if w.Code != http.StatusTemporaryRedirect && w.Code != http.StatusBadRequest {
				t.Errorf("GET /apps/alice/jobs/ with Host %q: %d", host, w.Code)
			}
		}
	}
}

// TestSiteRefusesAnEscapedSlash: %2F in a static file's path is refused
// as docs/api.md says, in either case.
func TestSiteRefusesAnEscapedSlash(t *testing.T) {
	t.Parallel()
	v := newSiteEnv(t)
	v.deployApp("alice/site", "", "", map[string]string{"sub/index.html": "SUB", "index.html": "TOP"})
	if status, _, body := v.rawGet("/apps/alice/site/sub/index.html"); status != 200 || body != "SUB" {
		t.Fatalf("the plain path: %d %q", status, body)
	}
	for _, p := range []string{"/apps/alice/site/sub%2findex.html", "/apps/alice/site/sub%2Findex.html", "/apps/alice/site/sub%2F"} {
		if status, _, body := v.rawGet(p); status != 400 || !strings.Contains(body, `"invalid"`) {
			t.Errorf("GET %s on the site: %d %q; want 400 invalid", p, status, body)
		}
	}
}

// FuzzSiteRedirect: whatever path and Host a client sends, the server
// never answers with a redirect to a host other than its own and its
// apps' sites, and never with a 5xx.
func FuzzSiteRedirect(f *testing.F) {
	for _, s := range [][2]string{
		{"/apps/x/evil.com%2F/", "localhost:8080"},
		{"/apps/alice/jobs/x", "localhost:80@evil.com"},
		{"/apps/alice/jobs//evil.com", "localhost:8080"},
		{"/_handoff/client/handoff.js", "jobs--alice.localhost:8080"},
		{"/_handoff/client//evil.com", "jobs--alice.localhost:1@evil.com"},
		{"/apps/alice/a--b/%5c%5cevil.com", "localhost"},
		{"/sub", "a--b--alice.localhost:8080"},
		{"/apps/alice/jobs", "localhost:8080"},
	} {
		f.Add(s[0], s[1])
	}
	srvs := map[string]*Server{"": redirectServer(f, ""), "apps.example.test": redirectServer(f, "apps.example.test")}
	f.Fuzz(func(t *testing.T, target, host string) {
		if !strings.HasPrefix(target, "/") {
			return
		}
		for domain, srv := range srvs {
			if w := getRaw(srv, host, target); w != nil {
				checkLocation(t, domain, host, target, w)
			}
		}
	})
}
