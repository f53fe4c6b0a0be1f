package server

import (
	"strings"
	"testing"
)

// origin is the *.localhost origin of app's site on the test server.
func (v *env) origin(owner, name string) string {
	return "http://" + name + "--" + owner + ".localhost:" + v.port()
}

// preflight sends the browser's OPTIONS request for a call with a
// bearer token from a page at origin.
func (v *env) preflight(path, origin, method string) resp {
	v.t.Helper()
	return v.do("OPTIONS", path, "", "", "Origin", origin, "Access-Control-Request-Method", method,
		"Access-Control-Request-Headers", "authorization,content-type")
}

func TestCORSAnswersOnlyTheAppsOwnSite(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	own := v.origin("alice", "jobs")
	path := "/v1/apps/alice/jobs/dbs/tasks/docs/t1"

	r := v.preflight(path, own, "PUT")
	if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != own ||
		!strings.Contains(r.header.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(r.header.Get("Access-Control-Allow-Methods"), "PUT") {
		t.Fatalf("preflight from the app's own site: %d %v", r.status, r.header)
	}
	// The call itself: the page may read the answer.
	r = v.do("PUT", path, "bob", `{"status":"new"}`, "Origin", own)
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != own || !strings.Contains(r.header.Get("Vary"), "Origin") {
		t.Fatalf("PUT from the app's own site: %d %v %s", r.status, r.header, r.body)
	}

	// Another app's site, a look-alike port, and any other page get no
	// CORS headers: the browser refuses to send or to let them read.
	for _, other := range []string{
		v.origin("alice", "pub"),
		"http://jobs--alice.localhost:1",
		"https://jobs--alice.localhost:" + v.port(),
		"http://evil.example",
		"null",
	} {
		r := v.preflight(path, other, "PUT")
		if r.status != 403 || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight from %s: %d %v", other, r.status, r.header)
		}
		v.mustError(r, 403, "forbidden")
		r = v.do("GET", path, "bob", "", "Origin", other)
		if r.header.Get("Access-Control-Allow-Origin") != "" || r.header.Get("Access-Control-Expose-Headers") != "" {
			t.Errorf("GET from %s has CORS headers: %v", other, r.header)
		}
	}
	// The app's site may not call another app's routes, nor the routes
	// that manage users.
	for _, p := range []string{"/v1/apps/alice/pub/dbs/tasks/docs/t1", "/v1/users", "/v1/apps"} {
		if r := v.preflight(p, own, "GET"); r.status != 403 || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("preflight of %s from %s: %d %v", p, own, r.status, r.header)
		}
	}
	// Any app's own page may ask who holds its token.
	if r := v.preflight("/v1/whoami", v.origin("alice", "pub"), "GET"); r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != v.origin("alice", "pub") {
		t.Errorf("whoami preflight from a site: %d %v", r.status, r.header)
	}
	if r := v.preflight("/v1/whoami", "http://nosuch--alice.localhost:"+v.port(), "GET"); r.status != 403 {
		t.Errorf("whoami preflight from a site that does not exist: %d %v", r.status, r.header)
	}
	// A request without Origin (curl, the CLI) has nothing to do with CORS.
	if r := v.do("GET", path, "bob", ""); r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("a request without Origin got CORS headers: %v", r.header)
	}
}

func TestCORSForTheOriginsAnAppLists(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	dev := "http://localhost:5173"
	path := "/v1/apps/alice/jobs/dbs/tasks/query?field=status&key=%22new%22"
	if r := v.preflight(path, dev, "GET"); r.status != 403 || !strings.Contains(string(r.body), "handoff app set --app alice/jobs --origin "+dev) {
		t.Fatalf("preflight from an unlisted dev server: %d %s", r.status, r.body)
	}
	// Only the owner (or the admin) lists origins, and only origins.
	v.mustError(v.do("PUT", "/v1/apps/alice/jobs/settings", "bob", `{"origins":["`+dev+`"]}`), 403, "forbidden")
	for _, bad := range []string{`"localhost:5173"`, `"ftp://x"`, `"http://x/path"`, `"http://u:p@x"`, `"http://x?q"`, `""`} {
		v.mustError(v.do("PUT", "/v1/apps/alice/jobs/settings", "alice", `{"origins":[`+bad+`]}`), 400, "invalid")
	}
	var out struct{ Origins []string }
	v.mustJSON(v.do("PUT", "/v1/apps/alice/jobs/settings", "alice", `{"origins":["HTTP://LocalHost:5173/","https://jobs.example:443"]}`), 200, &out)
	if strings.Join(out.Origins, " ") != dev+" https://jobs.example" {
		t.Fatalf("origins kept as %q, want the form browsers send", out.Origins)
	}
	for _, o := range []string{dev, "https://jobs.example"} {
		if r := v.preflight(path, o, "GET"); r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != o {
			t.Errorf("preflight from listed %s: %d %v", o, r.status, r.header)
		}
	}
	// A listed origin is the app's only: not another app's.
	if r := v.preflight("/v1/apps/alice/pub/dbs/tasks/docs", dev, "GET"); r.status != 403 {
		t.Errorf("listed origin reached another app: %d", r.status)
	}
	var apps struct {
		Apps []struct {
			App, Site string
			Origins   []string
		}
	}
	v.mustJSON(v.do("GET", "/v1/apps", "alice", ""), 200, &apps)
	for _, a := range apps.Apps {
		if a.App == "alice/jobs" && (a.Site != v.origin("alice", "jobs")+"/" || len(a.Origins) != 2) {
			t.Errorf("app list: %+v", a)
		}
	}
	// An empty list clears it.
	v.mustJSON(v.do("PUT", "/v1/apps/alice/jobs/settings", "alice", `{"origins":[]}`), 200, nil)
	if r := v.preflight(path, dev, "GET"); r.status != 403 {
		t.Errorf("preflight after clearing: %d", r.status)
	}
}

func TestSitesHaveTheirOwnOrigin(t *testing.T) {
	t.Parallel()
	v := newSiteEnv(t)
	v.deployApp("alice/site", "", "", map[string]string{"index.html": "alice's", "css/a.css": "a"})

	// The old path on the main origin redirects to the site's origin,
	// keeping the rest of the path, the query and (307) the method.
	st, h, _ := v.rawMainGet("/apps/alice/site/css/a.css?v=2")
	if want := v.origin("alice", "site") + "/css/a.css?v=2"; st != 307 || h.Get("Location") != want {
		t.Fatalf("old path: %d %q, want 307 to %s", st, h.Get("Location"), want)
	}
	// The site's page finds the browser client on the main origin.
	st, h, _ = v.rawGetHost("site--alice.localhost:"+v.port(), "/_handoff/client/handoff.js")
	if want := "http://localhost:" + v.port() + "/client/handoff.js"; st != 307 || h.Get("Location") != want {
		t.Fatalf("client on a site: %d %q, want 307 to %s", st, h.Get("Location"), want)
	}
	// A site host serves only the site: not the API, not the console.
	if st, _, body := v.rawGetHost("site--alice.localhost:"+v.port(), "/v1/whoami"); st != 404 || strings.Contains(body, "admin") {
		t.Fatalf("the API on a site host: %d %s", st, body)
	}
	if st, _, body := v.rawGetHost("nosuch--alice.localhost:"+v.port(), "/"); st != 404 || !strings.Contains(body, "not_found") {
		t.Fatalf("a site that does not exist: %d %s", st, body)
	}
	if st, _, body := v.rawGetHost("SITE--ALICE.localhost.:"+v.port(), "/"); st != 200 || body != "alice's" {
		t.Fatalf("a site host in capitals with a final dot: %d %s", st, body)
	}
}

func TestSiteDomain(t *testing.T) {
	t.Parallel()
	v := newEnvWith(t, Options{SiteDomain: "Apps.Example."})
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/code", "alice", deployBody("", "", map[string]string{"index.html": "jobs"})), 201, nil)
	if st, _, body := v.rawGetHost("jobs--alice.apps.example", "/"); st != 200 || body != "jobs" {
		t.Fatalf("site on the site domain: %d %s", st, body)
	}
	if st, h, _ := v.rawMainGet("/apps/alice/jobs/"); st != 307 || h.Get("Location") != "https://jobs--alice.apps.example/" {
		t.Fatalf("old path with a site domain: %d %v", st, h)
	}
	own := "https://jobs--alice.apps.example"
	if r := v.preflight("/v1/apps/alice/jobs/dbs/x/docs", own, "GET"); r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != own {
		t.Fatalf("preflight from the site domain: %d %v", r.status, r.header)
	}
	if st, h, _ := v.rawGetHost("jobs--alice.apps.example", "/_handoff/client/react.js"); st != 307 || h.Get("Location") != "https://apps.example/client/react.js" {
		t.Fatalf("client on a site domain: %d %v", st, h)
	}
}

func TestAppNamesKeepSiteAddressesApart(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	v.mustJSON(v.do("POST", "/v1/users", "admin", `{"name":"b--c"}`), 201, nil)
	v.mustJSON(v.do("POST", "/v1/users", "admin", `{"name":"c"}`), 201, nil)
	v.mustJSON(v.do("POST", "/v1/apps", "admin", `{"app":"c/a--b"}`), 201, nil)
	// b--c/a would be served at a--b--c too.
	e := v.mustError(v.do("POST", "/v1/apps", "admin", `{"app":"b--c/a"}`), 409, "exists")
	if !strings.Contains(e.Message, "c/a--b") {
		t.Fatalf("message does not name the app in the way: %s", e.Message)
	}
	long := strings.Repeat("x", 60)
	v.mustError(v.do("POST", "/v1/apps", "alice", `{"app":"alice/`+long+`"}`), 400, "invalid")
}
