package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/client"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/backend"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store/sqlite"
)

// idEnv is env with the real access.js and backend.js runtimes, a server
// key for secrets, and the data directory at hand for the at-rest checks.
// It has the users and apps of newEnv.
type idEnv struct {
	*env
	dir string
}

func newIDEnv(t *testing.T) *idEnv {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	logs := &syncBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(i * 7)
	}
	e := engine.New(st, engine.Options{Logger: log, SecretKey: key,
		Code: jsapp.New(jsapp.Options{Backend: backend.Options{Logger: log}})})
	if _, err := e.Bootstrap(context.Background(), adminToken); err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	srv := New(e, Options{Logger: log})
	v := &env{t: t, e: e, srv: srv, tokens: map[string]string{"admin": adminToken}, logs: logs}
	v.ts = httptest.NewServer(srv)
	t.Cleanup(v.ts.Close)
	for _, u := range []string{"alice", "bob", "carol", "dave"} {
		var out struct{ Name, Token string }
		v.mustJSON(v.do("POST", "/v1/users", "admin", `{"name":"`+u+`"}`), 201, &out)
		v.tokens[u] = out.Token
	}
	v.mustJSON(v.do("POST", "/v1/apps", "alice", `{"app":"alice/jobs"}`), 201, nil)
	v.mustJSON(v.do("POST", "/v1/apps", "alice", `{"app":"alice/pub","public":true}`), 201, nil)
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/members", "alice", `{"user":"bob","role":"editor"}`), 200, nil)
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/members", "alice", `{"user":"carol","role":"viewer"}`), 200, nil)
	return &idEnv{env: v, dir: dir}
}

// addDevice registers a new key as user's device name over the API.
func (v *idEnv) addDevice(user, name, app string) auth.DeviceKey {
	v.t.Helper()
	k, err := auth.NewDeviceKey(user, name)
	if err != nil {
		v.t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]string{"name": name, "publicKey": base64.RawURLEncoding.EncodeToString(k.Public()), "app": app})
	var info struct{ Name, User, App string }
	v.mustJSON(v.do("POST", "/v1/devices", user, string(body)), 201, &info)
	if info.Name != name || info.User != user || info.App != app {
		v.t.Fatalf("device added = %+v", info)
	}
	return k
}

// signed sends a request signed by k at when; hdr are more header pairs.
func (v *idEnv) signed(k auth.DeviceKey, when time.Time, method, path, body string, hdr ...string) resp {
	v.t.Helper()
	req, err := http.NewRequest(method, v.ts.URL+path, strings.NewReader(body))
	if err != nil {
		v.t.Fatal(err)
	}
	req.Header.Set("Authorization", k.Sign(method, req.URL.RequestURI(), []byte(body), when))
	return v.send(req, hdr...)
}

// send sends req as it is, with more header pairs, and reads the answer.
func (v *idEnv) send(req *http.Request, hdr ...string) resp {
	v.t.Helper()
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := v.ts.Client().Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}

func TestDeviceRoutes(t *testing.T) {
	t.Parallel()
	v := newIDEnv(t)
	k := v.addDevice("bob", "ci", "")

	var me struct{ User, Device string }
	v.mustJSON(v.signed(k, time.Now(), "GET", "/v1/whoami", ""), 200, &me)
	if me.User != "bob" || me.Device != "ci" {
		t.Fatalf("whoami as a device = %+v", me)
	}
	// A device writes and reads as its user; the ledger names it.
	var w writeOut
	v.mustJSON(v.signed(k, time.Now(), "PUT", docPath("alice/jobs", "jobs", "d/1")+"?ifAbsent=true", `{"by":"ci"}`), 200, &w)
	var doc map[string]any
	v.mustJSON(v.signed(k, time.Now(), "GET", docPath("alice/jobs", "jobs", "d/1"), ""), 200, &doc)
	if doc["by"] != "ci" {
		t.Fatalf("get = %v", doc)
	}
	var h struct {
		History []struct{ Writer struct{ User, Device string } }
	}
	v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", "d/1")+"/history", "alice", ""), 200, &h)
	if len(h.History) != 1 || h.History[0].Writer.User != "bob" || h.History[0].Writer.Device != "ci" {
		t.Fatalf("history = %+v", h)
	}

	var list struct {
		Devices []struct {
			Name, User string
			Created    time.Time
			Revoked    *time.Time
		}
	}
	v.mustJSON(v.do("GET", "/v1/devices", "bob", ""), 200, &list)
	if len(list.Devices) != 1 || list.Devices[0].Name != "ci" || list.Devices[0].Revoked != nil || list.Devices[0].Created.IsZero() {
		t.Fatalf("devices = %s", v.do("GET", "/v1/devices", "bob", "").body)
	}
	if r := v.do("GET", "/v1/devices", "carol", ""); !bytes.Contains(r.body, []byte(`"devices":[]`)) {
		t.Fatalf("carol's devices = %s", r.body)
	}
	// Devices do not manage devices.
	v.mustError(v.signed(k, time.Now(), "GET", "/v1/devices", ""), 403, "forbidden")
	v.mustError(v.signed(k, time.Now(), "DELETE", "/v1/devices/ci", ""), 403, "forbidden")
	v.mustError(v.do("GET", "/v1/devices", "", ""), 401, "unauthorized")

	// Bad requests.
	pub := base64.RawURLEncoding.EncodeToString(k.Public())
	v.mustError(v.do("POST", "/v1/devices", "bob", `{"name":"x","publicKey":"***"}`), 400, "invalid")
	v.mustError(v.do("POST", "/v1/devices", "bob", `{"name":"x","publicKey":"`+pub[:20]+`"}`), 400, "invalid")
	v.mustError(v.do("POST", "/v1/devices", "bob", `{"name":"x"}`), 400, "invalid")
	v.mustError(v.do("POST", "/v1/devices", "bob", `{"name":"x","publicKey":"`+pub+`","scope":"all"}`), 400, "invalid")
	v.mustError(v.do("POST", "/v1/devices", "bob", `{"name":"ci","publicKey":"`+pub+`"}`), 409, "exists")
	v.mustError(v.do("POST", "/v1/devices", "dave", `{"name":"x","publicKey":"`+pub+`","app":"alice/jobs"}`), 403, "forbidden")
	// Padded base64url is accepted too.
	v.mustJSON(v.do("POST", "/v1/devices", "bob", `{"name":"padded","publicKey":"`+base64.URLEncoding.EncodeToString(k.Public())+`"}`), 201, nil)

	// Revoked: the very next request is refused, with a message that
	// says so.
	v.mustJSON(v.do("DELETE", "/v1/devices/ci", "bob", ""), 200, nil)
	e := v.mustError(v.signed(k, time.Now(), "GET", "/v1/whoami", ""), 401, "unauthorized")
	if !strings.Contains(e.Message, "revoked") {
		t.Errorf("revoked device message: %q", e.Message)
	}
	v.mustError(v.do("DELETE", "/v1/devices/ci", "bob", ""), 404, "not_found")
	v.mustJSON(v.do("GET", "/v1/devices", "bob", ""), 200, &list)
	if len(list.Devices) != 2 || list.Devices[0].Revoked == nil {
		t.Fatalf("after revoke: %+v", list.Devices)
	}
}

// Each signed token is good for one request: its method, path, query and
// body, for a minute.
func TestDeviceSignatures(t *testing.T) {
	t.Parallel()
	v := newIDEnv(t)
	k := v.addDevice("alice", "ci", "")
	path := docPath("alice/jobs", "jobs", "s1")

	// Replay: the same header twice.
	req, _ := http.NewRequest("PUT", v.ts.URL+path, strings.NewReader(`{"n":1}`))
	h := k.Sign("PUT", req.URL.RequestURI(), []byte(`{"n":1}`), time.Now())
	req.Header.Set("Authorization", h)
	v.mustJSON(v.send(req), 200, nil)
	req, _ = http.NewRequest("PUT", v.ts.URL+path, strings.NewReader(`{"n":1}`))
	req.Header.Set("Authorization", h)
	e := v.mustError(v.send(req), 401, "unauthorized")
	if !strings.Contains(e.Message, "already used") {
		t.Errorf("replay message: %q", e.Message)
	}

	signedFor := func(method, target, body string, when time.Time) string {
		return k.Sign(method, target, []byte(body), when)
	}
	try := func(header, method, path, body string) resp {
		req, _ := http.NewRequest(method, v.ts.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", header)
		return v.send(req)
	}
	for name, r := range map[string]resp{
		"expired (signed 2 minutes ago)": try(signedFor("PUT", path, `{"n":2}`, time.Now().Add(-2*time.Minute)), "PUT", path, `{"n":2}`),
		"signed for another path":        try(signedFor("PUT", docPath("alice/jobs", "jobs", "other"), `{"n":2}`, time.Now()), "PUT", path, `{"n":2}`),
		"signed for another body":        try(signedFor("PUT", path, `{"n":2}`, time.Now()), "PUT", path, `{"n":3}`),
		"signed for another query":       try(signedFor("PUT", path, `{"n":2}`, time.Now()), "PUT", path+"?ifAbsent=true", `{"n":2}`),
		"signed for another method":      try(signedFor("GET", path, ``, time.Now()), "DELETE", path, ``),
		"lowercase scheme, bad token":    try("device abc.def", "GET", path, ""),
	} {
		if r.status != 401 || !bytes.Contains(r.body, []byte(`"unauthorized"`)) {
			t.Errorf("%s: %d %s", name, r.status, r.body)
		}
	}
	// Nothing of the refused writes landed.
	var doc map[string]any
	v.mustJSON(v.do("GET", path, "alice", ""), 200, &doc)
	if doc["n"] != 1.0 {
		t.Fatalf("a refused signed write landed: %v", doc)
	}
	// Two Authorization headers are refused, whatever they hold.
	req, _ = http.NewRequest("GET", v.ts.URL+"/v1/whoami", nil)
	req.Header.Add("Authorization", "Bearer "+v.tokens["alice"])
	req.Header.Add("Authorization", "Bearer "+v.tokens["admin"])
	v.mustError(v.send(req), 401, "unauthorized")
}

func TestScopedDeviceRoutes(t *testing.T) {
	t.Parallel()
	v := newIDEnv(t)
	v.mustJSON(v.do("POST", "/v1/apps", "alice", `{"app":"alice/other"}`), 201, nil)
	k := v.addDevice("alice", "jobs-ci", "alice/jobs")
	v.mustJSON(v.signed(k, time.Now(), "PUT", docPath("alice/jobs", "jobs", "x"), `{}`), 200, nil)
	e := v.mustError(v.signed(k, time.Now(), "PUT", docPath("alice/other", "jobs", "x"), `{}`), 403, "forbidden")
	if !strings.Contains(e.Message, "alice/jobs") {
		t.Errorf("scoped refusal does not name the scope: %q", e.Message)
	}
	v.mustError(v.signed(k, time.Now(), "GET", docPath("alice/pub", "jobs", "x"), ``), 403, "forbidden")
	v.mustError(v.signed(k, time.Now(), "POST", "/v1/apps", `{"app":"alice/new"}`), 403, "forbidden")
	v.mustError(v.signed(k, time.Now(), "PUT", "/v1/apps/alice/other/secrets/K", `{"value":"x"}`), 403, "forbidden")
	var apps struct{ Apps []struct{ App string } }
	v.mustJSON(v.signed(k, time.Now(), "GET", "/v1/apps", ``), 200, &apps)
	if len(apps.Apps) != 1 || apps.Apps[0].App != "alice/jobs" {
		t.Fatalf("a scoped device lists %+v", apps)
	}
}

func TestSecretRoutes(t *testing.T) {
	t.Parallel()
	v := newIDEnv(t)
	const value = "sk_live_5f2c9a0e1b7d"
	var bodies [][]byte
	keep := func(r resp) resp { bodies = append(bodies, r.body); return r }

	var out map[string]any
	v.mustJSON(keep(v.do("PUT", "/v1/apps/alice/jobs/secrets/API_KEY", "alice", `{"value":"`+value+`"}`)), 200, &out)
	if out["ok"] != true || out["name"] != "API_KEY" {
		t.Fatalf("set = %v", out)
	}
	v.mustJSON(keep(v.do("PUT", "/v1/apps/alice/jobs/secrets/EMPTY", "admin", `{"value":""}`)), 200, nil)
	var list struct {
		Secrets []map[string]any
	}
	v.mustJSON(keep(v.do("GET", "/v1/apps/alice/jobs/secrets", "alice", "")), 200, &list)
	if len(list.Secrets) != 2 || list.Secrets[0]["name"] != "API_KEY" || list.Secrets[0]["updated"] == nil || len(list.Secrets[0]) != 2 {
		t.Fatalf("list = %+v", list)
	}
	// Members, strangers and anonymous callers get nothing.
	keep(v.mustErrorResp(v.do("GET", "/v1/apps/alice/jobs/secrets", "bob", ""), 403, "forbidden"))
	keep(v.mustErrorResp(v.do("PUT", "/v1/apps/alice/jobs/secrets/API_KEY", "bob", `{"value":"mine"}`), 403, "forbidden"))
	keep(v.mustErrorResp(v.do("DELETE", "/v1/apps/alice/jobs/secrets/API_KEY", "carol", ""), 403, "forbidden"))
	keep(v.mustErrorResp(v.do("GET", "/v1/apps/alice/jobs/secrets", "", ""), 401, "unauthorized"))
	keep(v.mustErrorResp(v.do("GET", "/v1/apps/alice/pub/secrets", "", ""), 401, "unauthorized"))
	// Bad requests.
	keep(v.mustErrorResp(v.do("PUT", "/v1/apps/alice/jobs/secrets/API-KEY", "alice", `{"value":"x"}`), 400, "invalid"))
	keep(v.mustErrorResp(v.do("PUT", "/v1/apps/alice/jobs/secrets/API_KEY", "alice", `{}`), 400, "invalid"))
	keep(v.mustErrorResp(v.do("PUT", "/v1/apps/alice/jobs/secrets/API_KEY", "alice", `{"value":7}`), 400, "invalid"))
	keep(v.mustErrorResp(v.do("PUT", "/v1/apps/alice/jobs/secrets/API_KEY", "alice", value), 400, "invalid"))
	keep(v.mustErrorResp(v.do("PUT", "/v1/apps/alice/jobs/secrets/BIG", "alice", `{"value":"`+strings.Repeat("x", 65<<10)+`"}`), 413, "too_large"))
	// No route reads a value back.
	keep(v.mustErrorResp(v.do("GET", "/v1/apps/alice/jobs/secrets/API_KEY", "alice", ""), 405, "invalid"))

	v.mustJSON(keep(v.do("DELETE", "/v1/apps/alice/jobs/secrets/EMPTY", "alice", "")), 200, nil)
	keep(v.mustErrorResp(v.do("DELETE", "/v1/apps/alice/jobs/secrets/EMPTY", "alice", ""), 404, "not_found"))
	v.mustJSON(keep(v.do("GET", "/v1/apps/alice/jobs/secrets", "admin", "")), 200, &list)
	if len(list.Secrets) != 1 {
		t.Fatalf("after rm: %+v", list)
	}
	for _, b := range bodies {
		if bytes.Contains(b, []byte(value)) {
			t.Fatalf("an answer holds the secret value: %s", b)
		}
	}
}

// mustErrorResp is mustError that hands the answer back.
func (v *env) mustErrorResp(r resp, status int, code string) resp {
	v.t.Helper()
	v.mustError(r, status, code)
	return r
}

func TestMemberRemoveRoute(t *testing.T) {
	t.Parallel()
	v := newIDEnv(t)
	v.put("bob", "jobs", "b1", `{}`)
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/members", "alice", `{"user":"bob","role":"reviewer"}`), 200, nil)
	v.mustError(v.do("DELETE", "/v1/apps/alice/jobs/members/bob?role=editor", "bob", ""), 403, "forbidden")
	v.mustError(v.do("DELETE", "/v1/apps/alice/jobs/members/bob?role=editor", "", ""), 401, "unauthorized")
	v.mustJSON(v.do("DELETE", "/v1/apps/alice/jobs/members/bob?role=editor", "alice", ""), 200, nil)
	// No longer an editor: bob's next write is refused; still a reviewer.
	v.mustError(v.do("PUT", docPath("alice/jobs", "jobs", "b2"), "bob", `{}`), 403, "forbidden")
	var ms struct {
		Members []struct {
			User  string
			Roles []string
		}
	}
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/members", "alice", ""), 200, &ms)
	for _, m := range ms.Members {
		if m.User == "bob" && (len(m.Roles) != 1 || m.Roles[0] != "reviewer") {
			t.Fatalf("bob's roles: %v", m.Roles)
		}
	}
	v.mustError(v.do("DELETE", "/v1/apps/alice/jobs/members/bob?role=editor", "alice", ""), 404, "not_found")
	// Without ?role every role goes.
	v.mustJSON(v.do("DELETE", "/v1/apps/alice/jobs/members/bob", "alice", ""), 200, nil)
	v.mustError(v.do("GET", docPath("alice/jobs", "jobs", "b1"), "bob", ""), 403, "forbidden")
	v.mustError(v.do("DELETE", "/v1/apps/alice/jobs/members/nobody", "alice", ""), 404, "not_found")
}

func TestSettingsPublic(t *testing.T) {
	t.Parallel()
	v := newIDEnv(t)
	v.put("alice", "jobs", "j1", `{}`)
	v.mustError(v.do("GET", docPath("alice/jobs", "jobs", "j1"), "", ""), 401, "unauthorized")
	var out map[string]any
	v.mustJSON(v.do("PUT", "/v1/apps/alice/jobs/settings", "alice", `{"public":true}`), 200, &out)
	if out["public"] != true || out["accessTimeout"] != nil {
		t.Fatalf("settings = %v", out)
	}
	v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", "j1"), "", ""), 200, nil)
	var apps struct {
		Apps []struct {
			App    string
			Public bool
		}
	}
	v.mustJSON(v.do("GET", "/v1/apps", "alice", ""), 200, &apps)
	for _, a := range apps.Apps {
		if a.App == "alice/jobs" && !a.Public {
			t.Fatal("the app is not listed as public")
		}
	}
	// Both settings at once; an invalid deadline changes nothing.
	v.mustError(v.do("PUT", "/v1/apps/alice/jobs/settings", "alice", `{"accessTimeout":"forever","public":false}`), 400, "invalid")
	v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", "j1"), "", ""), 200, nil)
	v.mustJSON(v.do("PUT", "/v1/apps/alice/jobs/settings", "alice", `{"accessTimeout":"250ms","public":false}`), 200, &out)
	if out["public"] != false || out["accessTimeout"] != "250ms" {
		t.Fatalf("settings = %v", out)
	}
	v.mustError(v.do("GET", docPath("alice/jobs", "jobs", "j1"), "", ""), 401, "unauthorized")
	v.mustError(v.do("PUT", "/v1/apps/alice/jobs/settings", "alice", `{}`), 400, "invalid")
	v.mustError(v.do("PUT", "/v1/apps/alice/jobs/settings", "alice", `{"public":"yes"}`), 400, "invalid")
	v.mustError(v.do("PUT", "/v1/apps/alice/jobs/settings", "bob", `{"public":true}`), 403, "forbidden")
	v.mustError(v.do("PUT", "/v1/apps/alice/jobs/settings", "", `{"public":true}`), 401, "unauthorized")
}

// The Go client signs every request with WithDevice, live feeds too.
func TestClientWithDevice(t *testing.T) {
	t.Parallel()
	v := newIDEnv(t)
	k := v.addDevice("alice", "script", "alice/jobs")
	c := client.New(v.ts.URL, "", client.WithDevice(k), client.WithPath("cli"))
	ctx := context.Background()
	id, err := c.WhoAmI(ctx)
	if err != nil || id.User != "alice" || id.Device != "script" {
		t.Fatalf("WhoAmI = %+v, %v", id, err)
	}
	w, err := c.Put(ctx, "alice/jobs", "jobs", "a/b c", json.RawMessage(`{"x":"ü"}`), client.PutOptions{IfAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "alice/jobs", "jobs", "a/b c", json.RawMessage(`{"x":2}`), client.PutOptions{IfRev: w.Rev}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "alice/jobs", "jobs", "a/b c"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Query(ctx, "alice/jobs", "jobs", "x", json.RawMessage(`2`), 10, ""); err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(ctx, "alice/pub", "jobs", "x")
	if !errs.Is(err, errs.Forbidden) {
		t.Fatalf("scoped device on another app: %v", err)
	}

	// A live feed signs its request too.
	fctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	stop := errors.New("stop")
	err = c.Follow(fctx, "alice/jobs", "jobs", 0, func(e client.Entry) error {
		if e.ID == "a/b c" {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) && !strings.Contains(errString(err), "stop") {
		t.Fatalf("Follow as a device: %v", err)
	}

	// Signed with a clock two minutes behind: refused.
	late := client.New(v.ts.URL, "", client.WithDevice(k), client.WithClock(func() time.Time { return time.Now().Add(-2 * time.Minute) }))
	if _, err := late.WhoAmI(ctx); !errs.Is(err, errs.Unauthorized) {
		t.Fatalf("expired signature: %v", err)
	}
	// A client whose credential could not be read sends nothing.
	broken := client.New(v.ts.URL, "", client.WithCredentialError(errors.New("HANDOFF_DEVICE is damaged")))
	if _, err := broken.WhoAmI(ctx); !errs.Is(err, errs.Unauthorized) || !strings.Contains(err.Error(), "damaged") {
		t.Fatalf("broken credential: %v", err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
