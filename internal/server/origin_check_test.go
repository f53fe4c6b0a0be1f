package server

import (
	"strings"
	"testing"
)

// TestOriginCheckSaysWhyAPageIsRefused: a browser hides a refused
// preflight's answer, so a page asks /v1/apps/OWNER/NAME/cors with a
// simple GET that any origin may read, and learns whether its origin is
// allowed and the command that allows it.
func TestOriginCheckSaysWhyAPageIsRefused(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	dev := "http://localhost:5173"
	check := func(app, origin string) originAnswer {
		t.Helper()
		var hdr []string
		if origin != "" {
			hdr = []string{"Origin", origin}
		}
		r := v.do("GET", "/v1/apps/"+app+"/cors", "", "", hdr...)
		if r.header.Get("Access-Control-Allow-Origin") != "*" || r.header.Get("Cache-Control") != "no-store" {
			t.Errorf("check of %s from %s: headers %v; want any origin to read it, uncached", app, origin, r.header)
		}
		var out originAnswer
		v.mustJSON(r, 200, &out)
		return out
	}

	got := check("alice/jobs", dev)
	want := "`handoff app set --app alice/jobs --origin " + dev + "`"
	if got.Allowed || got.App != "alice/jobs" || got.Origin != dev || got.Error == nil || got.Error.Code != "forbidden" || !strings.Contains(got.Error.Message, want) {
		t.Fatalf("an unlisted origin: %+v %+v; want forbidden naming %s", got, got.Error, want)
	}
	// The preflight the browser hid says the same command.
	if r := v.preflight("/v1/apps/alice/jobs/dbs/tasks/docs/t1", dev, "PUT"); r.status != 403 || !strings.Contains(string(r.body), want) {
		t.Errorf("preflight: %d %s", r.status, r.body)
	}

	// The app's own site, and an origin the app lists, are allowed.
	if got := check("alice/jobs", v.origin("alice", "jobs")); !got.Allowed || got.Error != nil {
		t.Errorf("the app's own site: %+v", got)
	}
	v.mustJSON(v.do("PUT", "/v1/apps/alice/jobs/settings", "alice", `{"origins":["`+dev+`"]}`), 200, nil)
	if got := check("alice/jobs", dev); !got.Allowed || got.Error != nil {
		t.Errorf("a listed origin: %+v", got)
	}
	// A listed origin is the app's only.
	if got := check("alice/pub", dev); got.Allowed || got.Error == nil || !strings.Contains(got.Error.Message, "--app alice/pub --origin "+dev) {
		t.Errorf("another app from a listed origin: %+v", got)
	}
	// An app that does not exist is named as such, with no command.
	if got := check("alice/nosuch", dev); got.Allowed || got.Error == nil || !strings.Contains(got.Error.Message, "no such app") || strings.Contains(got.Error.Message, "handoff app set") {
		t.Errorf("an unknown app: %+v %+v", got, got.Error)
	}
	// A file:// page has no origin to allow.
	if got := check("alice/jobs", "null"); got.Allowed || got.Error == nil || !strings.Contains(got.Error.Message, "over http(s)") {
		t.Errorf("origin null: %+v %+v", got, got.Error)
	}
	// Without Origin there is nothing to check.
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/cors", "", ""), 400, "invalid")
	// No credential is needed, and none changes the answer.
	r := v.do("GET", "/v1/apps/alice/jobs/cors", "alice", "", "Origin", "http://evil.example")
	var out originAnswer
	v.mustJSON(r, 200, &out)
	if out.Allowed || out.Error == nil {
		t.Errorf("with alice's token: %+v", out)
	}
}
