// Package webhook_test runs examples/webhook behind a real HTTP server:
// deliveries with a good HMAC signature become pending-build documents,
// anything else is refused before it reaches the database.
package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appdir"
	"github.com/handoff-run/handoff/internal/backend"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/internal/server"
	"github.com/handoff-run/handoff/internal/testenv"
	"github.com/handoff-run/handoff/store/sqlite"
)

const (
	app    = "alice/hooks"
	secret = "s3cret-shared-with-the-sender"
)

var (
	admin = engine.Actor{User: engine.AdminUser, Admin: true}
	alice = engine.Actor{User: "alice"}
)

type env struct {
	t   *testing.T
	e   *engine.Engine
	url string
}

func newEnv(t *testing.T, withSecret bool) *env {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	key := make([]byte, 32)
	e := engine.New(st, engine.Options{Logger: log, SecretKey: key,
		Code: jsapp.New(jsapp.Options{Backend: backend.Options{Logger: log}})})
	if _, err := e.Bootstrap(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.AddUser(ctx, admin, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateApp(ctx, admin, app, false); err != nil {
		t.Fatal(err)
	}
	code, err := appdir.Read(".")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.DeployCode(ctx, alice, app, engine.Code{Access: code.Access, Backend: code.Backend, Files: code.Files}); err != nil {
		t.Fatalf("deploying examples/webhook: %v", err)
	}
	if withSecret {
		if err := e.SetSecret(ctx, alice, app, "WEBHOOK_SECRET", []byte(secret)); err != nil {
			t.Fatal(err)
		}
	}
	ts := httptest.NewServer(server.New(e, server.Options{Logger: log}))
	t.Cleanup(ts.Close)
	owner, name, _ := strings.Cut(app, "/")
	return &env{t: t, e: e, url: testenv.SiteURL(ts.URL, owner, name, "/api")}
}

func sign(key, body string) string {
	m := hmac.New(sha256.New, []byte(key))
	m.Write([]byte(body))
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// deliver posts body with the signature header (none when sig is "").
func (v *env) deliver(path, body, sig string) (int, map[string]any) {
	v.t.Helper()
	req, _ := http.NewRequest("POST", v.url+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if sig != "" {
		req.Header.Set("X-Signature-256", sig)
	}
	res, err := testenv.SiteClient().Do(req)
	if err != nil {
		v.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(res.Body)
	json.Unmarshal(b, &out)
	return res.StatusCode, out
}

func (v *env) build(id string) map[string]any {
	v.t.Helper()
	doc, err := v.e.Get(context.Background(), alice, app, "builds", id)
	if errs.Is(err, errs.NotFound) {
		return nil
	}
	if err != nil {
		v.t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(doc, &m)
	return m
}

func TestGoodSignatureQueuesABuild(t *testing.T) {
	v := newEnv(t, true)
	body := `{"id":"push-1","repo":"acme/site","commit":"abc123"}`
	status, out := v.deliver("/hooks/push", body, sign(secret, body))
	if status != 202 || out["id"] != "push-1" || out["duplicate"] != false {
		t.Fatalf("delivery: %d %v", status, out)
	}
	b := v.build("push-1")
	if b["status"] != "pending-build" || b["repo"] != "acme/site" || b["commit"] != "abc123" {
		t.Fatalf("build: %v", b)
	}
	// A redelivery of the same event changes nothing.
	status, out = v.deliver("/hooks/push", body, sign(secret, body))
	if status != 200 || out["duplicate"] != true || out["rev"] != b["_rev"] {
		t.Fatalf("redelivery: %d %v", status, out)
	}
	hist, err := v.e.History(context.Background(), alice, app, "builds", "push-1")
	if err != nil || len(hist) != 1 || hist[0].Writer.Handler != "fetch" || hist[0].Writer.User != "" {
		t.Fatalf("ledger: %+v, %v", hist, err)
	}
}

func TestBadSignatureIsRefused(t *testing.T) {
	v := newEnv(t, true)
	body := `{"id":"push-2","repo":"acme/site","commit":"abc123"}`
	for name, sig := range map[string]string{
		"missing":        "",
		"wrong key":      sign("not-the-secret", body),
		"other body":     sign(secret, body+" "),
		"not hex":        "sha256=zz",
		"wrong scheme":   strings.Replace(sign(secret, body), "sha256=", "sha1=", 1),
		"truncated":      sign(secret, body)[:40],
		"upper-case hex": "sha256=" + strings.ToUpper(strings.TrimPrefix(sign("x", body), "sha256=")),
	} {
		status, out := v.deliver("/hooks/push", body, sig)
		if status != 401 || out["error"] != "bad signature" {
			t.Errorf("%s: %d %v", name, status, out)
		}
	}
	// A tampered body under a signature of the original.
	tampered := strings.Replace(body, "abc123", "evil99", 1)
	if status, _ := v.deliver("/hooks/push", tampered, sign(secret, body)); status != 401 {
		t.Errorf("tampered body: %d", status)
	}
	if b := v.build("push-2"); b != nil {
		t.Fatalf("a refused delivery wrote %v", b)
	}
	// Upper-case hex of the right MAC is still the right MAC.
	good := "sha256=" + strings.ToUpper(strings.TrimPrefix(sign(secret, body), "sha256="))
	if status, _ := v.deliver("/hooks/push", body, good); status != 202 {
		t.Fatalf("upper-case hex of the right signature: %d", status)
	}
}

func TestWithoutTheSecretEverythingIsRefused(t *testing.T) {
	v := newEnv(t, false)
	body := `{"id":"push-3","repo":"acme/site","commit":"abc123"}`
	if status, out := v.deliver("/hooks/push", body, sign("", body)); status != 503 {
		t.Fatalf("no secret: %d %v", status, out)
	}
	if b := v.build("push-3"); b != nil {
		t.Fatalf("wrote %v", b)
	}
}

func TestOnlyTheWebhookCreatesBuilds(t *testing.T) {
	v := newEnv(t, true)
	_, err := v.e.Put(context.Background(), alice, app, "builds", "direct",
		[]byte(`{"status":"pending-build","repo":"acme/site","commit":"abc"}`), appcode.PutOptions{})
	if !errs.Is(err, errs.Forbidden) {
		t.Fatalf("the owner created a build directly: %v", err)
	}
	if status, _ := v.deliver("/hooks/other", "{}", ""); status != 404 {
		t.Fatalf("unknown hook: %d", status)
	}
}
