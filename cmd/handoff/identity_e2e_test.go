package main

// End-to-end tests of devices, login, secrets, member removal and public
// apps through the built binary.

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// cliEnv runs the CLI with exactly the HANDOFF_ variables given, and a
// home and config directory of its own.
type cliEnv struct {
	t    *testing.T
	home string
	vars []string
}

func newCLIEnv(t *testing.T, vars ...string) *cliEnv {
	home := t.TempDir()
	return &cliEnv{t: t, home: home, vars: append([]string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "xdg")}, vars...)}
}

// with returns a copy with more variables.
func (c *cliEnv) with(vars ...string) *cliEnv {
	cp := *c
	cp.vars = append(append([]string(nil), c.vars...), vars...)
	return &cp
}

func (c *cliEnv) run(stdin string, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	for _, kv := range baseEnv() {
		if !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, c.vars...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("running handoff %q: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

func (c *cliEnv) ok(args ...string) result {
	c.t.Helper()
	return c.okIn("", args...)
}

func (c *cliEnv) okIn(stdin string, args ...string) result {
	c.t.Helper()
	r := c.run(stdin, args...)
	if r.code != 0 {
		c.t.Fatalf("handoff %q: %s", args, r)
	}
	return r
}

// fail wants exit code and stderr starting with "error: CODE: " and
// containing each of msgs.
func (c *cliEnv) fail(code int, prefix string, args []string, msgs ...string) result {
	c.t.Helper()
	r := c.run("", args...)
	if r.code != code || !strings.HasPrefix(r.stderr, prefix) {
		c.t.Fatalf("handoff %q: want exit %d and %q...; got %s", args, code, prefix, r)
	}
	for _, m := range msgs {
		if !strings.Contains(r.stderr, m) {
			c.t.Fatalf("handoff %q: stderr does not say %q: %s", args, m, r.stderr)
		}
	}
	if r.stdout != "" {
		c.t.Errorf("handoff %q: a failure printed %q", args, r.stdout)
	}
	return r
}

// identityServer starts a server with alice (owner of alice/jobs and
// alice/other) and bob (editor of alice/jobs).
func identityServer(t *testing.T) (srv *serverProc, data, alice, bob string) {
	data = t.TempDir()
	srv = startServer(t, data, "HANDOFF_ADMIN_TOKEN="+adminToken)
	u := srv.url
	alice = decode[map[string]string](t, must(t, u, adminToken, "user", "add", "alice").stdout)["token"]
	bob = decode[map[string]string](t, must(t, u, adminToken, "user", "add", "bob").stdout)["token"]
	must(t, u, alice, "app", "create", "alice/jobs")
	must(t, u, alice, "app", "create", "alice/other")
	must(t, u, alice, "app", "member", "add", "--app", "alice/jobs", "bob", "--role", "editor")
	return srv, data, alice, bob
}

func TestDeviceCLI(t *testing.T) {
	t.Parallel()
	srv, _, alice, _ := identityServer(t)
	asAlice := newCLIEnv(t, "HANDOFF_SERVER="+srv.url, "HANDOFF_TOKEN="+alice)

	r := asAlice.ok("device", "add", "ci")
	out := decode[map[string]any](t, r.stdout)
	cred, _ := out["HANDOFF_DEVICE"].(string)
	if out["device"] != "ci" || !strings.HasPrefix(cred, "hdv1.") || out["app"] != nil {
		t.Fatalf("device add = %s", r.stdout)
	}
	if !strings.Contains(r.stderr, "hint:") || strings.Contains(r.stderr, cred) {
		t.Errorf("device add stderr: %q", r.stderr)
	}

	// HANDOFF_DEVICE alone: no token anywhere.
	dev := newCLIEnv(t, "HANDOFF_SERVER="+srv.url, "HANDOFF_DEVICE="+cred)
	dev.ok("db", "put", "--app", "alice/jobs", "--db", "jobs", "--id", "d1", `{"by":"device"}`)
	doc := decode[map[string]any](t, dev.ok("db", "get", "--app", "alice/jobs", "--db", "jobs", "d1").stdout)
	if doc["by"] != "device" {
		t.Fatalf("get as the device = %v", doc)
	}
	me := decode[map[string]any](t, dev.ok("whoami").stdout)
	if me["user"] != "alice" || me["device"] != "ci" {
		t.Fatalf("whoami as the device = %v", me)
	}
	// Data through stdin is signed too.
	dev.okIn(`{"from":"stdin"}`, "db", "put", "--app", "alice/jobs", "--db", "jobs", "--id", "d2", "-")
	// A device cannot add devices.
	dev.fail(4, "error: forbidden: ", []string{"device", "add", "more"}, "HANDOFF_TOKEN")

	list := decode[[]map[string]any](t, asAlice.ok("device", "list").stdout)
	if len(list) != 1 || list[0]["name"] != "ci" || list[0]["user"] != "alice" || list[0]["revoked"] != nil {
		t.Fatalf("device list = %v", list)
	}

	// Scoped to one app: refused on any other, and on app create.
	scoped := decode[map[string]any](t, asAlice.ok("device", "add", "jobs-only", "--app", "alice/jobs").stdout)
	if scoped["app"] != "alice/jobs" {
		t.Fatalf("scoped device = %v", scoped)
	}
	sdev := newCLIEnv(t, "HANDOFF_SERVER="+srv.url, "HANDOFF_DEVICE="+scoped["HANDOFF_DEVICE"].(string))
	sdev.ok("db", "put", "--app", "alice/jobs", "--db", "jobs", "--id", "s1", `{}`)
	sdev.fail(4, "error: forbidden: ", []string{"db", "put", "--app", "alice/other", "--db", "jobs", "--id", "s1", `{}`}, "alice/jobs")
	sdev.fail(4, "error: forbidden: ", []string{"db", "get", "--app", "alice/other", "--db", "jobs", "s1"})
	sdev.fail(4, "error: forbidden: ", []string{"app", "create", "alice/new"})

	// A damaged value is refused before anything is sent.
	newCLIEnv(t, "HANDOFF_SERVER="+srv.url, "HANDOFF_DEVICE=hdv1.garbage").
		fail(4, "error: unauthorized: ", []string{"whoami"}, "HANDOFF_DEVICE", "damaged")
	newCLIEnv(t, "HANDOFF_SERVER="+srv.url, "HANDOFF_DEVICE=not-a-device").
		fail(4, "error: unauthorized: ", []string{"whoami"}, "hdv1.")

	// Revoked: the next request is refused with a clear message.
	rv := decode[map[string]any](t, asAlice.ok("device", "revoke", "ci").stdout)
	if rv["ok"] != true || rv["device"] != "ci" {
		t.Fatalf("revoke = %v", rv)
	}
	dev.fail(4, "error: unauthorized: ", []string{"db", "get", "--app", "alice/jobs", "--db", "jobs", "d1"}, "revoked", "device add")
	asAlice.fail(5, "error: not_found: ", []string{"device", "revoke", "ci"})
	list = decode[[]map[string]any](t, asAlice.ok("device", "list").stdout)
	if len(list) != 2 {
		t.Fatalf("device list after revoke = %v", list)
	}
	for _, d := range list {
		if (d["revoked"] != nil) != (d["name"] == "ci") {
			t.Fatalf("device list after revoke = %v", list)
		}
	}
	// The scoped device still works.
	sdev.ok("db", "get", "--app", "alice/jobs", "--db", "jobs", "s1")
	asAlice.fail(2, "error: usage: ", []string{"device", "add"})
}

func TestLoginCLI(t *testing.T) {
	t.Parallel()
	srv, _, alice, bob := identityServer(t)
	c := newCLIEnv(t)
	cfgPath := filepath.Join(c.home, "xdg", "handoff", "config.json")

	// Nothing stored yet: anonymous, and told so.
	c.with("HANDOFF_SERVER="+srv.url).fail(4, "error: unauthorized: ", []string{"whoami"}, "hint: no credential was sent to "+srv.url)

	out := decode[map[string]any](t, c.ok("login", "--server", srv.url, "--token", alice).stdout)
	if out["user"] != "alice" || out["server"] != srv.url || out["config"] != cfgPath {
		t.Fatalf("login = %v", out)
	}
	fi, err := os.Stat(cfgPath)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config file: %v %v", fi, err)
	}
	if di, err := os.Stat(filepath.Dir(cfgPath)); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("config dir: %v %v", di, err)
	}
	// Later commands pick it up: no flag, no variable.
	if me := decode[map[string]any](t, c.ok("whoami").stdout); me["user"] != "alice" {
		t.Fatalf("whoami after login = %v", me)
	}
	c.ok("db", "put", "--app", "alice/jobs", "--db", "jobs", "--id", "l1", `{}`)
	// Flags and variables still win over the file.
	if me := decode[map[string]any](t, c.with("HANDOFF_TOKEN="+bob).ok("whoami").stdout); me["user"] != "bob" {
		t.Fatalf("HANDOFF_TOKEN over the config = %v", me)
	}
	if me := decode[map[string]any](t, c.ok("whoami", "--token", bob).stdout); me["user"] != "bob" {
		t.Fatalf("--token over the config = %v", me)
	}
	// The stored token goes only to the server it was stored for.
	other := strings.Replace(srv.url, "127.0.0.1", "localhost", 1)
	c.with("HANDOFF_SERVER="+other).fail(4, "error: unauthorized: ", []string{"whoami"})

	// The token on standard input (as a pipe; a terminal reads it
	// without echo).
	out = decode[map[string]any](t, c.okIn(bob+"\n", "login", "--server", srv.url).stdout)
	if out["user"] != "bob" {
		t.Fatalf("login from stdin = %v", out)
	}
	if me := decode[map[string]any](t, c.ok("whoami").stdout); me["user"] != "bob" {
		t.Fatalf("whoami after the second login = %v", me)
	}
	// A bad credential is refused and the stored one is kept.
	r := c.run("hnd_wrong\n", "login", "--server", srv.url)
	if r.code != 4 || !strings.HasPrefix(r.stderr, "error: unauthorized: ") || strings.Contains(r.stderr, "hint: no credential") {
		t.Fatalf("login with a bad token: %s", r)
	}
	if me := decode[map[string]any](t, c.ok("whoami").stdout); me["user"] != "bob" {
		t.Fatalf("a failed login replaced the config: %v", me)
	}
	if r := c.run("", "login", "--server", srv.url); r.code != 2 {
		t.Fatalf("login without a credential: %s", r)
	}
	b, _ := os.ReadFile(cfgPath)
	if !strings.Contains(string(b), bob) || strings.Contains(string(b), alice) {
		t.Fatalf("config holds %s", b)
	}

	// A device value logs in too; the server is remembered from before.
	cred := decode[map[string]any](t, c.with("HANDOFF_TOKEN="+alice).ok("device", "add", "laptop").stdout)["HANDOFF_DEVICE"].(string)
	out = decode[map[string]any](t, c.okIn(cred, "login").stdout)
	if out["user"] != "alice" || out["device"] != "laptop" || out["server"] != srv.url {
		t.Fatalf("login with a device = %v", out)
	}
	if me := decode[map[string]any](t, c.ok("whoami").stdout); me["device"] != "laptop" {
		t.Fatalf("whoami as the stored device = %v", me)
	}
	c.ok("db", "get", "--app", "alice/jobs", "--db", "jobs", "l1")

	// Without XDG_CONFIG_HOME the file is under $HOME/.config.
	h := &cliEnv{t: t, home: t.TempDir()}
	h.vars = []string{"HOME=" + h.home}
	h.ok("login", "--server", srv.url, "--token", alice)
	if fi, err := os.Stat(filepath.Join(h.home, ".config", "handoff", "config.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config under HOME: %v %v", fi, err)
	}
	if me := decode[map[string]any](t, h.ok("whoami").stdout); me["user"] != "alice" {
		t.Fatalf("whoami with the HOME config = %v", me)
	}
}

const secretsBackendJS = `export const config = { onChange: { concurrency: 1, maxAttempts: 1, timeout: "30s" } };
export async function onChange(event, ctx) {
  if (event.dbName !== "inbox" || event.deleted) return;
  const k = ctx.secrets.API_KEY;
  await ctx.db.put({ _id: event.docId, reversed: k === undefined ? null : k.split("").reverse().join("") }, { db: "out" });
}
`

func TestSecretCLI(t *testing.T) {
	t.Parallel()
	srv, data, alice, bob := identityServer(t)
	asAlice := newCLIEnv(t, "HANDOFF_SERVER="+srv.url, "HANDOFF_TOKEN="+alice)
	asBob := newCLIEnv(t, "HANDOFF_SERVER="+srv.url, "HANDOFF_TOKEN="+bob)
	const value = "sk_test_e2e-8f3a1c"

	out := decode[map[string]any](t, asAlice.okIn(value+"\n", "secret", "set", "--app", "alice/jobs", "API_KEY").stdout)
	if out["ok"] != true || out["name"] != "API_KEY" || out["app"] != "alice/jobs" {
		t.Fatalf("secret set = %v", out)
	}
	asAlice.okIn("other-secret-value-77", "secret", "set", "--vibe", "alice/jobs", "OTHER")
	r := asAlice.ok("secret", "list", "--app", "alice/jobs")
	list := decode[[]map[string]any](t, r.stdout)
	if len(list) != 2 || list[0]["name"] != "API_KEY" || list[1]["name"] != "OTHER" || list[0]["updated"] == nil {
		t.Fatalf("secret list = %s", r.stdout)
	}
	if strings.Contains(r.stdout, value) || strings.Contains(r.stdout, "other-secret-value-77") {
		t.Fatalf("secret list shows a value: %s", r.stdout)
	}
	asBob.fail(4, "error: forbidden: ", []string{"secret", "list", "--app", "alice/jobs"})
	if r := asBob.run("x", "secret", "set", "--app", "alice/jobs", "API_KEY"); r.code != 4 {
		t.Fatalf("an editor sets a secret: %s", r)
	}
	if r := asAlice.run("", "secret", "set", "--app", "alice/jobs", "EMPTY"); r.code != 2 || !strings.Contains(r.stderr, "stdin") && !strings.Contains(r.stderr, "standard input") {
		t.Fatalf("secret set without a value: %s", r)
	}
	if r := asAlice.run("x", "secret", "set", "--app", "alice/jobs", "bad-name"); r.code != 1 || !strings.HasPrefix(r.stderr, "error: invalid: ") {
		t.Fatalf("secret set with a bad name: %s", r)
	}
	asAlice.fail(2, "error: usage: ", []string{"secret", "list"})

	// Handlers read it as ctx.secrets.API_KEY.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "backend.js"), []byte(secretsBackendJS), 0o644); err != nil {
		t.Fatal(err)
	}
	asAlice.ok("deploy", "--app", "alice/jobs", dir)
	waitReversed := func(c *cliEnv, id, want string) {
		t.Helper()
		c.ok("db", "put", "--app", "alice/jobs", "--db", "inbox", "--id", id, `{}`)
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := c.run("", "db", "get", "--app", "alice/jobs", "--db", "out", id)
			if r.code == 0 {
				if got := decode[map[string]any](t, r.stdout)["reversed"]; got != want {
					t.Fatalf("the handler read %v, want %q", got, want)
				}
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("the handler did not write out/%s: %s\n%s", id, r, srv.log())
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitReversed(asAlice, "m1", reverse(value))

	asAlice.ok("secret", "rm", "--app", "alice/jobs", "OTHER")
	asAlice.fail(5, "error: not_found: ", []string{"secret", "rm", "--app", "alice/jobs", "OTHER"})
	if list := decode[[]map[string]any](t, asAlice.ok("secret", "list", "--app", "alice/jobs").stdout); len(list) != 1 {
		t.Fatalf("after rm: %v", list)
	}

	// The server key: made on first start, private, and kept across a
	// restart, so the secret still opens.
	fi, err := os.Stat(filepath.Join(data, "server.key"))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Fatalf("server.key: %v %v", fi, err)
	}
	key1, _ := os.ReadFile(filepath.Join(data, "server.key"))
	cred := decode[map[string]any](t, asAlice.ok("device", "add", "ci").stdout)["HANDOFF_DEVICE"].(string)

	// At rest: no token, device credential or secret value in clear in
	// the database files.
	var raw []byte
	for _, name := range []string{"handoff.db", "handoff.db-wal"} {
		b, err := os.ReadFile(filepath.Join(data, name))
		if err == nil {
			raw = append(raw, b...)
		}
	}
	if len(raw) == 0 {
		t.Fatal("no database files")
	}
	for _, needle := range []string{alice, bob, adminToken, value, "other-secret-value-77", cred, strings.TrimPrefix(cred, "hdv1.")} {
		if bytes.Contains(raw, []byte(needle)) {
			t.Errorf("the database files hold %q in clear", needle)
		}
	}
	if !bytes.Contains(raw, []byte("alice/jobs")) && !bytes.Contains(raw, []byte("jobs")) {
		t.Fatal("the scan sees no data at all; the check is broken")
	}

	srv.stop(t)
	srv2 := startServer(t, data, "HANDOFF_ADMIN_TOKEN="+adminToken)
	key2, _ := os.ReadFile(filepath.Join(data, "server.key"))
	if !bytes.Equal(key1, key2) {
		t.Fatal("the server key changed on restart")
	}
	waitReversed(newCLIEnv(t, "HANDOFF_SERVER="+srv2.url, "HANDOFF_DEVICE="+cred), "m2", reverse(value))
}

func reverse(s string) string {
	r := []rune(s)
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
		r[i], r[j] = r[j], r[i]
	}
	return string(r)
}

func TestMemberRemoveAndPublicCLI(t *testing.T) {
	t.Parallel()
	srv, _, alice, bob := identityServer(t)
	asAlice := newCLIEnv(t, "HANDOFF_SERVER="+srv.url, "HANDOFF_TOKEN="+alice)
	asBob := newCLIEnv(t, "HANDOFF_SERVER="+srv.url, "HANDOFF_TOKEN="+bob)
	anon := newCLIEnv(t, "HANDOFF_SERVER="+srv.url)

	asBob.ok("db", "put", "--app", "alice/jobs", "--db", "jobs", "--id", "b1", `{}`)
	asAlice.ok("app", "member", "add", "--app", "alice/jobs", "bob", "--role", "viewer")
	out := decode[map[string]any](t, asAlice.ok("app", "member", "remove", "--app", "alice/jobs", "bob", "--role", "editor").stdout)
	if out["ok"] != true || out["user"] != "bob" || out["role"] != "editor" {
		t.Fatalf("member remove = %v", out)
	}
	asBob.fail(4, "error: forbidden: ", []string{"db", "put", "--app", "alice/jobs", "--db", "jobs", "--id", "b2", `{}`})
	asBob.ok("db", "get", "--app", "alice/jobs", "--db", "jobs", "b1") // still a viewer
	asAlice.fail(5, "error: not_found: ", []string{"app", "member", "remove", "--app", "alice/jobs", "bob", "--role", "editor"})
	asBob.fail(4, "error: forbidden: ", []string{"app", "member", "remove", "--app", "alice/jobs", "bob"})
	asAlice.ok("app", "member", "remove", "--app", "alice/jobs", "bob")
	asBob.fail(4, "error: forbidden: ", []string{"db", "get", "--app", "alice/jobs", "--db", "jobs", "b1"})
	members := decode[[]map[string]any](t, asAlice.ok("app", "member", "list", "--app", "alice/jobs").stdout)
	if len(members) != 0 {
		t.Fatalf("members after remove = %v", members)
	}

	anon.fail(4, "error: unauthorized: ", []string{"db", "get", "--app", "alice/jobs", "--db", "jobs", "b1"})
	out = decode[map[string]any](t, asAlice.ok("app", "set", "--app", "alice/jobs", "--public=true").stdout)
	if out["ok"] != true || out["public"] != true {
		t.Fatalf("app set --public = %v", out)
	}
	anon.ok("db", "get", "--app", "alice/jobs", "--db", "jobs", "b1")
	anon.fail(4, "error: unauthorized: ", []string{"db", "put", "--app", "alice/jobs", "--db", "jobs", "--id", "x", `{}`})
	asAlice.ok("app", "set", "--app", "alice/jobs", "--public=false", "--access-timeout", "250ms")
	anon.fail(4, "error: unauthorized: ", []string{"db", "get", "--app", "alice/jobs", "--db", "jobs", "b1"})
	asAlice.fail(2, "error: usage: ", []string{"app", "set", "--app", "alice/jobs"})
	asBob.fail(4, "error: forbidden: ", []string{"app", "set", "--app", "alice/jobs", "--public"})
	apps := decode[[]map[string]any](t, asAlice.ok("app", "list").stdout)
	for _, a := range apps {
		if a["app"] == "alice/jobs" && a["public"] != false {
			t.Fatalf("app list after --public=false: %v", a)
		}
	}
}

// TestUserTokenCLI: `handoff user token` gives a new token and revokes
// the old ones at once; a user may do it for themself, only the admin for
// others; devices stay; a new $HANDOFF_ADMIN_TOKEN replaces the old one.
func TestUserTokenCLI(t *testing.T) {
	t.Parallel()
	srv, data, alice, bob := identityServer(t)
	u := srv.url
	asAlice := newCLIEnv(t, "HANDOFF_SERVER="+u, "HANDOFF_TOKEN="+alice)
	cred, _ := decode[map[string]any](t, asAlice.ok("device", "add", "ci").stdout)["HANDOFF_DEVICE"].(string)

	// The admin replaces alice's token.
	alice2 := decode[map[string]string](t, must(t, u, adminToken, "user", "token", "alice").stdout)
	if alice2["name"] != "alice" || !strings.HasPrefix(alice2["token"], "hnd_") || alice2["token"] == alice {
		t.Fatalf("user token alice = %v", alice2)
	}
	fails(t, u, alice, 4, "error: unauthorized: ", "whoami")
	if me := decode[map[string]any](t, must(t, u, alice2["token"], "whoami").stdout); me["user"] != "alice" {
		t.Fatalf("whoami with the new token = %v", me)
	}
	// Her device credential is not a token: it still works.
	dev := newCLIEnv(t, "HANDOFF_SERVER="+u, "HANDOFF_DEVICE="+cred)
	dev.ok("whoami")
	// A device key cannot mint a token: it would outlive the device.
	dev.fail(4, "error: forbidden: ", []string{"user", "token"}, "device credential cannot get tokens")
	dev.fail(4, "error: forbidden: ", []string{"user", "token", "alice"}, "device credential cannot get tokens")

	// Alice replaces her own; she may not replace bob's.
	r := handoff(t, u, alice2["token"], "", "user", "token")
	alice3 := decode[map[string]string](t, r.stdout)
	if r.code != 0 || alice3["name"] != "alice" || !strings.Contains(r.stderr, "old token no longer works") {
		t.Fatalf("user token (self) = %s", r)
	}
	fails(t, u, alice2["token"], 4, "error: unauthorized: ", "whoami")
	fails(t, u, alice3["token"], 4, "error: forbidden: ", "user", "token", "bob")
	must(t, u, bob, "whoami")
	fails(t, u, adminToken, 5, "error: not_found: ", "user", "token", "nobody")
	// Without any credential, the refusal says how to send one.
	if r := fails(t, u, "", 4, "error: unauthorized: ", "app", "list"); !strings.Contains(r.stderr, "hint: no credential was sent to "+u) {
		t.Errorf("no hint without a credential: %s", r.stderr)
	}
	if r := fails(t, u, "hnd_wrong", 4, "error: unauthorized: ", "app", "list"); strings.Contains(r.stderr, "hint: no credential") {
		t.Errorf("a wrong token is not a missing one: %s", r.stderr)
	}

	// A restart with another $HANDOFF_ADMIN_TOKEN revokes the old one.
	srv.stop(t)
	srv = startServer(t, data, "HANDOFF_ADMIN_TOKEN=hnd_rotated_admin")
	fails(t, srv.url, adminToken, 4, "error: unauthorized: ", "whoami")
	must(t, srv.url, "hnd_rotated_admin", "whoami")
	srv.stop(t)
}

// TestUserListRemoveCLI: the admin lists users and removes one; the
// removed user's token and device stop working; the admin and owners of
// apps are refused with what to do instead.
func TestUserListRemoveCLI(t *testing.T) {
	t.Parallel()
	srv, _, alice, bob := identityServer(t)
	u := srv.url
	asBob := newCLIEnv(t, "HANDOFF_SERVER="+u, "HANDOFF_TOKEN="+bob)
	cred := decode[map[string]any](t, asBob.ok("device", "add", "ci").stdout)["HANDOFF_DEVICE"].(string)
	dev := newCLIEnv(t, "HANDOFF_SERVER="+u, "HANDOFF_DEVICE="+cred)
	dev.ok("whoami")

	type user struct {
		Name  string   `json:"name"`
		Admin bool     `json:"admin"`
		Apps  []string `json:"apps"`
	}
	us := decode[[]user](t, must(t, u, adminToken, "user", "list").stdout)
	if len(us) != 3 || us[0].Name != "admin" || !us[0].Admin || us[1].Name != "alice" || strings.Join(us[1].Apps, ",") != "alice/jobs,alice/other" ||
		us[2].Name != "bob" || len(us[2].Apps) != 0 {
		t.Fatalf("user list = %+v", us)
	}
	fails(t, u, alice, 4, "error: forbidden: ", "user", "list")
	fails(t, u, alice, 4, "error: forbidden: ", "user", "remove", "bob")
	if r := fails(t, u, adminToken, 5, "error: not_found: ", "user", "remove", "bbo"); !strings.Contains(r.stderr, "hint: did you mean bob?") {
		t.Fatalf("a mistyped user: %s", r)
	}
	fails(t, u, adminToken, 4, "error: forbidden: user admin is the admin", "user", "remove", "admin")
	if r := fails(t, u, adminToken, 3, "error: conflict: user alice owns alice/jobs, alice/other", "user", "remove", "alice"); !strings.Contains(r.stderr, "handoff user token alice") {
		t.Fatalf("removing an owner: %s", r)
	}
	fails(t, u, adminToken, 2, "error: usage: ", "user", "remove")

	if out := decode[map[string]any](t, must(t, u, adminToken, "user", "remove", "bob").stdout); out["ok"] != true || out["user"] != "bob" {
		t.Fatalf("user remove bob = %v", out)
	}
	fails(t, u, bob, 4, "error: unauthorized: ", "whoami")
	dev.fail(4, "error: unauthorized: ", []string{"whoami"})
	if ms := must(t, u, alice, "app", "member", "list", "--app", "alice/jobs").stdout; strings.Contains(ms, "bob") {
		t.Fatalf("bob is still a member: %s", ms)
	}
	if us := decode[[]user](t, must(t, u, adminToken, "user", "list").stdout); len(us) != 2 {
		t.Fatalf("user list after removing bob = %+v", us)
	}
	srv.stop(t)
}
