package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store/sqlite"
)

// The only way to pass requireBackend is the app's own backend.js. The
// access function below lets nothing but the onChange handler write to
// "jobs"; "inbox" takes any signed-in write and tells who wrote it.
const requireBackendAccessJS = `
export function jobs(doc, oldDoc, user, ctx) {
  ctx.requireBackend("onChange");
  return { channels: ["jobs"] };
}
export function inbox(doc, oldDoc, user, ctx) {
  if (!user) throw { forbidden: "sign in" };
  if (doc.probe) throw { forbidden: "device=" + (user.device || "-") + " roles=" + user.roles.join(",") + " owner=" + user.isOwner };
  return { channels: ["inbox"] };
}
`

const requireBackendBackendJS = `
export const config = { onChange: { concurrency: 1, maxAttempts: 1, timeout: "30s" } };
export async function onChange(event, ctx) {
  if (event.dbName !== "inbox" || event.deleted) return;
  const k = ctx.secrets.API_KEY;
  await ctx.db.put({ _id: event.docId, from: "backend", reversed: k === undefined ? null : k.split("").reverse().join("") }, { db: "jobs" });
}
`

func deployCode(v *env, app, accessJS, backendJS string) {
	v.t.Helper()
	body, _ := json.Marshal(map[string]string{"access": accessJS, "backend": backendJS})
	v.mustJSON(v.do("POST", "/v1/apps/"+app+"/code", "alice", string(body)), 201, nil)
	// -race on a loaded machine can exceed the default access deadline.
	v.mustJSON(v.do("PUT", "/v1/apps/"+app+"/settings", "alice", `{"accessTimeout":"10s"}`), 200, nil)
}

func TestNoClientPassesRequireBackend(t *testing.T) {
	t.Parallel()
	v := newIDEnv(t)
	deployCode(v.env, "alice/jobs", requireBackendAccessJS, requireBackendBackendJS)
	v.mustJSON(v.do("PUT", "/v1/apps/alice/jobs/secrets/API_KEY", "alice", `{"value":"abc123"}`), 200, nil)
	dev := v.addDevice("alice", "ci", "")
	adminDev := v.addDevice("admin", "root", "")

	path := docPath("alice/jobs", "jobs", "forged")
	refused := func(what string, r resp) {
		t.Helper()
		if r.status != 400 && r.status != 401 && r.status != 403 {
			t.Errorf("%s: status %d, want a refusal: %s", what, r.status, r.body)
		}
	}
	// A bulk write answers 200 with each document's own outcome.
	bulkRefused := func(what string, r resp) {
		t.Helper()
		if r.status == 200 && !bytes.Contains(r.body, []byte(`"ok":true`)) {
			return
		}
		refused(what, r)
	}
	// Credentials: the owner, an editor, the admin, their devices,
	// anonymous.
	for _, who := range []string{"alice", "bob", "admin", ""} {
		refused("token "+who, v.do("PUT", path, who, `{"x":1}`))
	}
	refused("device", v.signed(dev, time.Now(), "PUT", path, `{"x":1}`))
	refused("admin device", v.signed(adminDev, time.Now(), "PUT", path, `{"x":1}`))
	// Headers that name a handler, a path or an origin.
	for _, h := range [][]string{
		{"X-Handoff-Path", "onChange"}, {"X-Handoff-Path", "scheduled"}, {"X-Handoff-Path", "fetch"},
		{"X-Handoff-Handler", "onChange"}, {"X-Handoff-Origin", "fetch"}, {"Handler", "onChange"},
		{"X-Forwarded-For", "127.0.0.1"}, {"X-Handoff-Backend", "true"}, {"Origin", "onChange"},
	} {
		refused("header "+h[0]+": "+h[1], v.do("PUT", path, "alice", `{"x":1}`, h...))
		refused("device with header "+h[0], v.signed(dev, time.Now(), "PUT", path, `{"x":1}`, h...))
		refused("anonymous with header "+h[0], v.do("PUT", path, "", `{"x":1}`, h...))
	}
	// Fields in the body and the query.
	for _, body := range []string{
		`{"_handler":"onChange"}`, `{"_path":"onChange"}`, `{"_writer":{"handler":"onChange"}}`,
		`{"_origin":"fetch"}`, `{"_backend":true}`, `{"handler":"onChange"}`, `{"writer":{"handler":"onChange"}}`,
	} {
		refused("body "+body, v.do("PUT", path, "alice", body))
		refused("POST body "+body, v.do("POST", "/v1/apps/alice/jobs/dbs/jobs/docs", "alice", body))
		bulkRefused("bulk "+body, v.do("POST", "/v1/apps/alice/jobs/dbs/jobs/bulk", "alice", `{"docs":[`+body+`]}`))
	}
	refused("query handler", v.do("PUT", path+"?handler=onChange&path=onChange&_handler=onChange", "alice", `{}`))
	// Bulk answers 200 with per-document results: each must be refused.
	bulkRefused("bulk with a path header", v.do("POST", "/v1/apps/alice/jobs/dbs/jobs/bulk", "alice", `{"docs":[{"_id":"b1"},{"_id":"b2","_handler":"onChange"}]}`, "X-Handoff-Path", "onChange"))
	bulkRefused("device bulk", v.signed(dev, time.Now(), "POST", "/v1/apps/alice/jobs/dbs/jobs/bulk", `{"docs":[{"_id":"b3"}]}`, "X-Handoff-Path", "onChange"))

	// The one passing path: the backend's onChange, which also reads the
	// app's secret.
	v.mustJSON(v.do("PUT", docPath("alice/jobs", "inbox", "m1"), "bob", `{"hello":1}`), 200, nil)
	var doc map[string]any
	deadline := time.Now().Add(20 * time.Second)
	for {
		r := v.do("GET", docPath("alice/jobs", "jobs", "m1"), "alice", "")
		if r.status == 200 {
			v.mustJSON(r, 200, &doc)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("onChange never wrote jobs/m1; log:\n%s", v.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if doc["from"] != "backend" || doc["reversed"] != "321cba" {
		t.Fatalf("the handler's write = %v", doc)
	}
	var h struct {
		History []struct {
			Writer struct{ User, Handler string }
		}
	}
	v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", "m1")+"/history", "alice", ""), 200, &h)
	if len(h.History) != 1 || h.History[0].Writer.Handler != "onChange" {
		t.Fatalf("handler history = %+v", h)
	}
	// Clients cannot touch what the handler wrote either.
	refused("update of a handler's doc", v.do("PUT", docPath("alice/jobs", "jobs", "m1"), "alice", `{"from":"me"}`, "X-Handoff-Path", "onChange"))
	refused("delete of a handler's doc", v.do("DELETE", docPath("alice/jobs", "jobs", "m1"), "admin", ""))
	refused("device delete of a handler's doc", v.signed(dev, time.Now(), "DELETE", docPath("alice/jobs", "jobs", "m1"), ""))

	// Nothing a client sent landed in jobs.
	var page struct{ Docs []map[string]any }
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/docs", "alice", ""), 200, &page)
	if len(page.Docs) != 1 || page.Docs[0]["_id"] != "m1" {
		t.Fatalf("jobs holds %v", page.Docs)
	}

	// access.js sees user.device and user.roles.
	e := v.mustError(v.signed(dev, time.Now(), "PUT", docPath("alice/jobs", "inbox", "p"), `{"probe":1}`), 403, "forbidden")
	if e.Reason != "device=ci roles= owner=true" {
		t.Errorf("access.js saw %q", e.Reason)
	}
	e = v.mustError(v.do("PUT", docPath("alice/jobs", "inbox", "p"), "bob", `{"probe":1}`), 403, "forbidden")
	if e.Reason != "device=- roles=editor owner=false" {
		t.Errorf("access.js saw %q", e.Reason)
	}
}

// Tokens are stored hashed, secrets sealed, and device private keys never
// reach the server: none of them is in the database files in clear.
func TestCredentialsAtRest(t *testing.T) {
	t.Parallel()
	v := newIDEnv(t)
	var needles []string
	for user, tok := range v.tokens {
		if user != "admin" {
			needles = append(needles, tok)
		}
	}
	var keys []auth.DeviceKey
	for _, name := range []string{"ci", "deploy"} {
		k := v.addDevice("alice", name, "")
		keys = append(keys, k)
		v.mustJSON(v.signed(k, time.Now(), "PUT", docPath("alice/jobs", "jobs", "by-"+name), `{}`), 200, nil)
	}
	for _, k := range keys {
		seed := k.Private.Seed()
		needles = append(needles, k.Encode(), string(seed), base64.RawURLEncoding.EncodeToString(seed),
			base64.StdEncoding.EncodeToString(seed), hex.EncodeToString(seed))
	}
	secrets := map[string]string{
		"STRIPE_KEY": "sk_live_d2f0a9c8b7e6d5c4", "WEBHOOK_SECRET": "whsec-4c1f9e8d7a6b5c4d",
		"PASSWORD": "correct horse battery staple",
	}
	for name, val := range secrets {
		body, _ := json.Marshal(map[string]string{"value": val})
		v.mustJSON(v.do("PUT", "/v1/apps/alice/jobs/secrets/"+name, "alice", string(body)), 200, nil)
		needles = append(needles, val, base64.StdEncoding.EncodeToString([]byte(val)), hex.EncodeToString([]byte(val)))
	}
	// The server's own token in its hashed form is fine; a mistake that
	// stored it raw is what this catches.
	var raw []byte
	files := 0
	for _, name := range []string{sqlite.FileName, sqlite.FileName + "-wal", sqlite.FileName + "-shm", sqlite.FileName + "-journal"} {
		b, err := os.ReadFile(filepath.Join(v.dir, name))
		if err == nil {
			raw = append(raw, b...)
			files++
		}
	}
	entries, _ := os.ReadDir(v.dir)
	if files == 0 || len(raw) == 0 {
		t.Fatalf("no database files found in %s: %v", v.dir, entries)
	}
	for _, n := range needles {
		if bytes.Contains(raw, []byte(n)) {
			t.Errorf("the database files hold %q in clear", n)
		}
	}
	// The check itself works: an ordinary document is found.
	if !bytes.Contains(raw, []byte("by-ci")) {
		t.Fatal("the scan does not see ordinary data; the check is broken")
	}
}

// rateEnv drives a server on a virtual clock through ServeHTTP, so each
// request can come from any address.
type rateEnv struct {
	t   *testing.T
	srv *Server
	clk *clock.Virtual
	tok string
}

func newRateEnv(t *testing.T) *rateEnv {
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clk := clock.NewVirtual(time.Date(2027, 3, 1, 9, 0, 0, 0, time.UTC))
	e := engine.New(st, engine.Options{Clock: clk})
	if _, err := e.Bootstrap(context.Background(), adminToken); err != nil {
		t.Fatal(err)
	}
	admin, _ := e.Authenticate(context.Background(), adminToken)
	if _, err := e.CreateApp(context.Background(), admin, "admin/pub", true); err != nil {
		t.Fatal(err)
	}
	return &rateEnv{t: t, srv: New(e, Options{Logger: slog.New(slog.NewTextHandler(&syncBuffer{}, nil))}), clk: clk, tok: adminToken}
}

func (r *rateEnv) do(addr, authz, path string, hdr ...string) (int, string) {
	req := httptest.NewRequest("GET", path, nil)
	req.RemoteAddr = addr
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	r.srv.ServeHTTP(w, req)
	return w.Code, w.Body.String()
}

func TestBadCredentialsAreRateLimited(t *testing.T) {
	t.Parallel()
	r := newRateEnv(t)
	const attacker, other = "203.0.113.7:40000", "198.51.100.2:5000"
	good := "Bearer " + r.tok
	for i := range authFailBurst {
		if code, body := r.do(attacker, "Bearer hnd_guess"+string(rune('a'+i)), "/v1/whoami"); code != 401 {
			t.Fatalf("guess %d: %d %s", i, code, body)
		}
	}
	code, body := r.do(attacker, "Bearer hnd_guess-more", "/v1/whoami")
	if code != 429 || !strings.Contains(body, `"rate_limited"`) || !strings.Contains(body, "every credential from it is refused") {
		t.Fatalf("guess past the limit: %d %s", code, body)
	}
	// While limited, even a good credential from that address is not
	// looked at (so guesses cannot be told apart), and a forged
	// X-Forwarded-For does not help.
	if code, _ := r.do(attacker, good, "/v1/whoami"); code != 429 {
		t.Fatalf("good token from the limited address: %d", code)
	}
	if code, _ := r.do("203.0.113.7:40001", "Bearer hnd_x", "/v1/whoami", "X-Forwarded-For", "192.0.2.99"); code != 429 {
		t.Fatalf("X-Forwarded-For escaped the limit: %d", code)
	}
	// Device signatures are limited the same way.
	if code, _ := r.do(attacker, "Device abc.def", "/v1/whoami"); code != 429 {
		t.Fatalf("device token from the limited address: %d", code)
	}
	// Anonymous reads carry nothing to guess and still pass.
	if code, body := r.do(attacker, "", "/v1/apps/admin/pub/dbs"); code != 200 {
		t.Fatalf("anonymous read from the limited address: %d %s", code, body)
	}
	// Another address is unaffected, good or bad.
	if code, body := r.do(other, good, "/v1/whoami"); code != 200 {
		t.Fatalf("good token from another address: %d %s", code, body)
	}
	if code, _ := r.do(other, "Bearer hnd_typo", "/v1/whoami"); code != 401 {
		t.Fatalf("one bad token from another address: %d", code)
	}
	// The bucket refills: one attempt every 6 s.
	r.clk.Advance(authFailRefill + time.Second)
	if code, _ := r.do(attacker, good, "/v1/whoami"); code != 200 {
		t.Fatalf("good token after the wait: %d", code)
	}
	if code, _ := r.do(attacker, "Bearer hnd_again", "/v1/whoami"); code != 401 {
		t.Fatalf("one guess after the wait: %d", code)
	}
	if code, _ := r.do(attacker, "Bearer hnd_again2", "/v1/whoami"); code != 429 {
		t.Fatalf("the second guess after the wait: %d", code)
	}
	r.clk.Advance(time.Minute)
	for i := range authFailBurst {
		if code, _ := r.do(attacker, "Bearer hnd_later", "/v1/whoami"); code != 401 {
			t.Fatalf("after a minute, guess %d was not looked at", i)
		}
	}

	// IPv6 addresses are limited by their /64.
	for i := range authFailBurst {
		r.do("[2001:db8:1:2::"+strconv.Itoa(i+1)+"]:443", "Bearer hnd_v6", "/v1/whoami")
	}
	if code, _ := r.do("[2001:db8:1:2:ffff::1]:443", good, "/v1/whoami"); code != 429 {
		t.Fatalf("same /64: %d", code)
	}
	if code, _ := r.do("[2001:db8:1:3::1]:443", good, "/v1/whoami"); code != 200 {
		t.Fatalf("another /64: %d", code)
	}
}

// TestRevokedDeviceIsToldWhenRateLimited: a revoked device's requests
// are answered 401 saying it was revoked, never 429, and its retries do
// not use up its address's allowance.
func TestRevokedDeviceIsToldWhenRateLimited(t *testing.T) {
	t.Parallel()
	r := newRateEnv(t)
	ctx := context.Background()
	admin, _ := r.srv.e.Authenticate(ctx, r.tok)
	bobTok, err := r.srv.e.AddUser(ctx, admin, "bob")
	if err != nil {
		t.Fatal(err)
	}
	bob := engine.Actor{User: "bob"}
	k, _ := auth.NewDeviceKey("bob", "ci")
	if _, err := r.srv.e.AddDevice(ctx, bob, "ci", k.Public(), ""); err != nil {
		t.Fatal(err)
	}
	if err := r.srv.e.RevokeDevice(ctx, bob, "ci"); err != nil {
		t.Fatal(err)
	}
	const addr = "203.0.113.9:4000"
	revoked := func(when string) {
		t.Helper()
		code, body := r.do(addr, k.Sign("GET", "/v1/whoami", nil, r.clk.Now()), "/v1/whoami")
		if code != 401 || !strings.Contains(body, "device ci of user bob was revoked") || !strings.Contains(body, "handoff device add") {
			t.Fatalf("revoked device %s: %d %s", when, code, body)
		}
	}
	for range 2 * authFailBurst {
		revoked("retrying")
	}
	if code, body := r.do(addr, "Bearer "+bobTok, "/v1/whoami"); code != 200 {
		t.Fatalf("bob's token after his revoked device's retries: %d %s", code, body)
	}
	for range authFailBurst {
		r.do(addr, "Bearer hnd_guess", "/v1/whoami")
	}
	if code, _ := r.do(addr, "Bearer hnd_guess", "/v1/whoami"); code != 429 {
		t.Fatalf("the address is not limited: %d", code)
	}
	revoked("from a limited address")
	// Other device credentials from there are still limited.
	other, _ := auth.NewDeviceKey("bob", "laptop")
	for _, h := range []string{"Device abc.def", other.Sign("GET", "/v1/whoami", nil, r.clk.Now())} {
		if code, body := r.do(addr, h, "/v1/whoami"); code != 429 {
			t.Fatalf("%.20s... from a limited address: %d %s", h, code, body)
		}
	}
}

func TestFailLimiterStaysBounded(t *testing.T) {
	t.Parallel()
	var l failLimiter
	now := time.Now()
	for i := range authFailMaxClients + 100 {
		l.fail("k"+strconv.Itoa(i), now)
	}
	if n := len(l.buckets); n > authFailMaxClients {
		t.Fatalf("%d buckets", n)
	}
}
