package backend_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
)

// serve runs the fetch handler of b for one request.
func serve(t *testing.T, b appcode.Backend, hc appcode.HandlerContext, method, target string, header map[string][]string, body string) (appcode.FetchResponse, error) {
	t.Helper()
	u, err := url.Parse("http://handoff.test" + target)
	if err != nil {
		t.Fatal(err)
	}
	req := appcode.FetchRequest{Method: method, URL: u.String(), Path: strings.TrimPrefix(u.Path, "/apps/alice/jobs/api"), Header: header}
	if body != "" {
		req.Body = []byte(body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return b.Fetch(ctx, req, hc)
}

// decodeBody parses a JSON response body.
func decodeBody(t *testing.T, r appcode.FetchResponse) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("response body %q is not a JSON object: %v", r.Body, err)
	}
	return m
}

func TestFetchHandlerSeesTheRequestAndWrites(t *testing.T) {
	b := newEnv(t).compile(`
export async function fetch(request, ctx) {
  const body = await request.json();
  const put = await ctx.db.put({ _id: body.id, status: "pending", from: request.headers.get("X-Sender") }, { db: "inbox" });
  return new Response(JSON.stringify({
    method: request.method, path: request.path, url: request.url,
    q: request.query.get("q"), all: request.query.getAll("tag"),
    type: request.headers.get("content-type"), rev: put.rev, used: request.bodyUsed,
  }), { status: 201, headers: { "content-type": "application/json", "x-reply": "yes" } });
}`)
	hc := newFake()
	resp, err := serve(t, b, hc, "POST", "/apps/alice/jobs/api/hooks/build?q=a%20b&tag=x&tag=y",
		map[string][]string{"Content-Type": {"application/json"}, "X-Sender": {"ci"}}, `{"id":"b1"}`)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != 201 || resp.Header["X-Reply"][0] != "yes" || resp.Header["Content-Type"][0] != "application/json" {
		t.Fatalf("response: %+v", resp)
	}
	got := decodeBody(t, resp)
	want := map[string]any{"method": "POST", "path": "/hooks/build", "url": "http://handoff.test/apps/alice/jobs/api/hooks/build?q=a%20b&tag=x&tag=y",
		"q": "a b", "all": []any{"x", "y"}, "type": "application/json", "rev": "1-r", "used": true}
	if asJSON(got) != asJSON(want) {
		t.Fatalf("handler saw %s\nwant %s", asJSON(got), asJSON(want))
	}
	if d := hc.mustDoc(t, "inbox", "b1"); d["from"] != "ci" || d["status"] != "pending" {
		t.Fatalf("written doc: %v", d)
	}
}

func TestFetchResponseShapes(t *testing.T) {
	b := newEnv(t).compile(`
export async function fetch(request) {
  switch (request.path) {
    case "/plain": return { status: 202, headers: { "x-a": "1" }, body: { queued: true } };
    case "/text": return "hello";
    case "/none": return;
    case "/json": return Response.json([1, 2], { status: 200 });
    case "/bytes": return new Response(new Uint8Array([104, 105]), { headers: [["content-type", "text/plain"]] });
    case "/redirect": return Response.redirect("https://example.com/", 303);
    case "/extra": return { status: 200, bodyy: "typo" };
    case "/status": return new Response("x", { status: 99 });
    case "/throw": throw new Error("boom");
  }
}`)
	hc := newFake()
	cases := []struct {
		path, status, ctype, body string
	}{
		{"/plain", "202", "application/json", `{"queued":true}`},
		{"/text", "200", "text/plain;charset=UTF-8", "hello"},
		{"/none", "204", "", ""},
		{"/json", "200", "application/json", "[1,2]"},
		{"/bytes", "200", "text/plain", "hi"},
		{"/redirect", "303", "", ""},
	}
	for _, c := range cases {
		resp, err := serve(t, b, hc, "GET", "/apps/alice/jobs/api"+c.path, nil, "")
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		ctype := ""
		if v := resp.Header["Content-Type"]; len(v) > 0 {
			ctype = v[0]
		}
		if fmt.Sprint(resp.Status) != c.status || ctype != c.ctype || string(resp.Body) != c.body {
			t.Errorf("%s: got %d %q %q, want %s %q %q", c.path, resp.Status, ctype, resp.Body, c.status, c.ctype, c.body)
		}
	}
	// The app's own failures: the message names them, the detail (for
	// logs only) has the exception's own words.
	for path, want := range map[string][2]string{
		"/extra":  {`"bodyy"`, `"bodyy"`},
		"/status": {"backend.js:11:27: fetch threw RangeError", "status 99"},
		"/throw":  {"backend.js:12:25: fetch threw Error", "boom"},
	} {
		_, err := serve(t, b, hc, "GET", "/apps/alice/jobs/api"+path, nil, "")
		var e *errs.Error
		if !errors.As(err, &e) || e.Code != errs.AppError || !strings.Contains(e.Message, want[0]) ||
			!strings.Contains(e.Message+e.Detail, want[1]) || path == "/throw" && strings.Contains(e.Message, "boom") {
			t.Errorf("%s: err = %#v, want app_error saying %q, detail %q", path, err, want[0], want[1])
		}
	}
}

// outbound compiles a fetch handler that calls the URL in ?url= with the
// global fetch and reports what happened.
func outbound(t *testing.T, config string) appcode.Backend {
	return newEnv(t).compile(`
export const config = { fetch: ` + config + ` };
export async function fetch(request, ctx) {
  try {
    const r = await globalThis.fetch(request.query.get("url"), {
      method: "POST", headers: { "x-test": "yes" }, body: { hello: "world" },
    });
    return Response.json({ status: r.status, ok: r.ok, type: r.headers.get("content-type"), text: await r.text() });
  } catch (err) {
    return Response.json({ error: err.message, code: err.code, name: err.name }, { status: 502 });
  }
}`)
}

func callOut(t *testing.T, b appcode.Backend, target string) map[string]any {
	t.Helper()
	resp, err := serve(t, b, newFake(), "GET", "/apps/alice/jobs/api/?url="+url.QueryEscape(target), nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return decodeBody(t, resp)
}

func TestOutboundFetchToAnAllowedHost(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintf(w, "%s %s %s %s %s", r.Method, r.URL.Path, r.Header.Get("X-Test"), r.Header.Get("Content-Type"), body)
	}))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, allow := range []string{host, "127.0.0.1"} {
		b := outbound(t, `{ allow: ["`+allow+`"] }`)
		got := callOut(t, b, srv.URL+"/v1/items")
		want := map[string]any{"status": 200.0, "ok": true, "type": "text/plain",
			"text": `POST /v1/items yes application/json {"hello":"world"}`}
		if asJSON(got) != asJSON(want) {
			t.Fatalf("allow %s: got %s, want %s", allow, asJSON(got), asJSON(want))
		}
	}
}

func TestOutboundFetchToAnotherHostIsRefused(t *testing.T) {
	called := make(chan struct{}, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { called <- struct{}{} }))
	defer srv.Close()
	b := outbound(t, `{ allow: ["api.example.com", "127.0.0.1:1"] }`)
	got := callOut(t, b, srv.URL+"/")
	if got["code"] != "refused" || got["name"] != "TypeError" ||
		!strings.Contains(got["error"].(string), "is not allowed") || !strings.Contains(got["error"].(string), "config.fetch.allow") {
		t.Fatalf("got %v", got)
	}
	// A redirect from an allowed host to another one is refused too.
	redir := httptest.NewServer(http.RedirectHandler(srv.URL+"/elsewhere", http.StatusFound))
	defer redir.Close()
	b = outbound(t, `{ allow: ["`+strings.TrimPrefix(redir.URL, "http://")+`"] }`)
	got = callOut(t, b, redir.URL+"/")
	if got["code"] != "refused" || !strings.Contains(got["error"].(string), "redirected") {
		t.Fatalf("redirect: got %v", got)
	}
	// Without any config nothing is allowed.
	b = outbound(t, `{}`)
	if got = callOut(t, b, srv.URL+"/"); got["code"] != "refused" {
		t.Fatalf("no allow list: got %v", got)
	}
	if len(called) != 0 {
		t.Fatalf("the refused host was called %d times", len(called))
	}
	// Link-local addresses (cloud metadata) are never reached, even when
	// listed.
	b = outbound(t, `{ allow: ["169.254.169.254"], timeout: "5s" }`)
	if got = callOut(t, b, "http://169.254.169.254/latest/meta-data/"); got["code"] != "refused" || !strings.Contains(got["error"].(string), "link-local") {
		t.Fatalf("link-local: got %v", got)
	}
}

func TestOutboundFetchTimesOut(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	b := outbound(t, `{ allow: ["127.0.0.1"], timeout: 150 }`)
	start := time.Now()
	got := callOut(t, b, srv.URL+"/slow")
	if got["code"] != "timeout" || !strings.Contains(got["error"].(string), "150ms") {
		t.Fatalf("got %v", got)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the timeout took %v", d)
	}
}

func TestOutboundFetchRefusesAnOversizedResponse(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/chunked" {
			// No Content-Length: the limit must hold while reading.
			for range 20 {
				w.Write([]byte(strings.Repeat("y", 100)))
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Write([]byte(strings.Repeat("x", 1001)))
	}))
	defer srv.Close()
	b := outbound(t, `{ allow: ["127.0.0.1"], maxBytes: 1000 }`)
	for _, p := range []string{"/declared", "/chunked"} {
		got := callOut(t, b, srv.URL+p)
		if got["code"] != "too_large" || !strings.Contains(got["error"].(string), "1000 bytes") {
			t.Fatalf("%s: got %v", p, got)
		}
	}
	// At the limit is fine.
	b = outbound(t, `{ allow: ["127.0.0.1"], maxBytes: 1001 }`)
	if got := callOut(t, b, srv.URL+"/declared"); got["status"] != 200.0 || len(got["text"].(string)) != 1001 {
		t.Fatalf("at the limit: got %v", got)
	}
}

func TestOutboundFetchFromOnChange(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{"answer":42}`))
	}))
	defer srv.Close()
	b := newEnv(t).compile(`
export const config = { fetch: { allow: ["127.0.0.1"] } };
export async function onChange(event, ctx) {
  const r = await fetch(event.doc.url);
  const { answer } = await r.json();
  await ctx.db.put({ _id: "result", answer });
}`)
	hc := newFake()
	doc, _ := json.Marshal(map[string]any{"_id": "a", "url": srv.URL})
	if err := b.OnChange(context.Background(), event("jobs", "a", doc), hc); err != nil {
		t.Fatal(err)
	}
	if d := hc.mustDoc(t, "jobs", "result"); d["answer"] != 42.0 {
		t.Fatalf("result: %v", d)
	}
}

func TestFetchConfigIsCheckedAtDeploy(t *testing.T) {
	e := newEnv(t)
	for src, parts := range map[string][]string{
		`export const config = { fetch: { allow: "api.example.com" } };`:           {"config.fetch.allow", "array"},
		`export const config = { fetch: { allow: ["https://api.example.com"] } };`: {"config.fetch.allow[0]", "without the scheme"},
		`export const config = { fetch: { allow: ["api.example.com/v1"] } };`:      {"config.fetch.allow[0]", "only the host"},
		`export const config = { fetch: { allow: ["*.example.com"] } };`:           {"wildcards"},
		`export const config = { fetch: { allow: ["host:99999"] } };`:              {"port"},
		`export const config = { fetch: { allow: ["bad_host"] } };`:                {"not a host name"},
		`export const config = { fetch: { timeout: "1d" } };`:                      {"config.fetch.timeout"},
		`export const config = { fetch: { timeout: 10 } };`:                        {"config.fetch.timeout"},
		`export const config = { fetch: { maxBytes: 0 } };`:                        {"config.fetch.maxBytes"},
		`export const config = { fetch: { maxBytes: 1e12 } };`:                     {"config.fetch.maxBytes"},
		`export const config = { fetch: { allowed: [] } };`:                        {"config.fetch.allowed", "allow, timeout and maxBytes"},
	} {
		e.refused(src, parts...)
	}
	b := e.compile(`export const config = { fetch: { allow: ["API.Example.com", "127.0.0.1:8080", "[::1]:9000", "::1"], timeout: "3s", maxBytes: 2048 } };`)
	f := b.Config().Fetch
	if asJSON(f.Allow) != `["api.example.com","127.0.0.1:8080","[::1]:9000","[::1]"]` || f.Timeout != 3*time.Second || f.MaxBytes != 2048 {
		t.Fatalf("config: %+v", f)
	}
	d := e.compile(`export const config = {};`).Config().Fetch
	if len(d.Allow) != 0 || d.Timeout != appcode.DefaultFetchTimeout || d.MaxBytes != appcode.DefaultFetchMaxBytes {
		t.Fatalf("defaults: %+v", d)
	}
}

func TestCryptoSubtleHMACAndDigest(t *testing.T) {
	b := newEnv(t).compile(`
const hex = (buf) => [...new Uint8Array(buf)].map((x) => x.toString(16).padStart(2, "0")).join("");
export async function fetch(request) {
  const enc = new TextEncoder();
  // RFC 4231, test case 2.
  const key = await crypto.subtle.importKey("raw", enc.encode("Jefe"), { name: "HMAC", hash: "SHA-256" }, false, ["sign", "verify"]);
  const mac = await crypto.subtle.sign("HMAC", key, enc.encode("what do ya want for nothing?"));
  const good = await crypto.subtle.verify("HMAC", key, mac, enc.encode("what do ya want for nothing?"));
  const bad = await crypto.subtle.verify("HMAC", key, mac, enc.encode("what do ya want for nothing!"));
  const sha = hex(await crypto.subtle.digest("SHA-256", enc.encode("abc")));
  let exported;
  try { await crypto.subtle.exportKey("raw", key); } catch (err) { exported = err.name; }
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  return { body: {
    mac: hex(mac), good, bad, sha, exported, algorithm: key.algorithm, type: key.type,
    text: new TextDecoder().decode(enc.encode("héllo ✓")), uuid: /^[0-9a-f-]{36}$/.test(crypto.randomUUID()),
    random: bytes.length, keyFields: Object.keys(key).length,
  } };
}`)
	resp, err := serve(t, b, newFake(), "GET", "/apps/alice/jobs/api/", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	got := decodeBody(t, resp)
	want := map[string]any{
		"mac":  "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
		"good": true, "bad": false,
		"sha":      "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
		"exported": "InvalidAccessError", "algorithm": map[string]any{"name": "HMAC", "hash": map[string]any{"name": "SHA-256"}, "length": 32.0},
		"type": "secret", "text": "héllo ✓", "uuid": true, "random": 16.0, "keyFields": 0.0,
	}
	if asJSON(got) != asJSON(want) {
		t.Fatalf("got  %s\nwant %s", asJSON(got), asJSON(want))
	}
}

func TestFetchHandlerWithoutExport(t *testing.T) {
	b := newEnv(t).compile(`export async function onChange() {}`)
	if b.Has("fetch") {
		t.Fatal("Has(fetch) without the export")
	}
	_, err := b.Fetch(context.Background(), appcode.FetchRequest{Method: "GET"}, newFake())
	if !errs.Is(err, errs.Invalid) {
		t.Fatalf("err = %v", err)
	}
}
