package engine_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store/sqlite"
)

var testSecretKey = bytes.Repeat([]byte{7}, 32)

// secretEnv is an engine with a server key and a Go backend for
// alice/app, and bob as an editor of it.
type secretEnv struct {
	e     *engine.Engine
	dir   string
	admin engine.Actor
	alice engine.Actor
	bob   engine.Actor
}

func newSecretEnv(t *testing.T, key []byte, b *appcodetest.Backend) *secretEnv {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if b == nil {
		b = &appcodetest.Backend{}
	}
	b.Cfg.OnChange.Concurrency = max(b.Cfg.OnChange.Concurrency, 1)
	b.Cfg.OnChange.MaxAttempts = max(b.Cfg.OnChange.MaxAttempts, 1)
	if b.Cfg.OnChange.Timeout == 0 {
		b.Cfg.OnChange.Timeout = appcode.DefaultRunTimeout
	}
	clk := clock.NewVirtual(time.Date(2026, 9, 24, 12, 0, 0, 0, time.UTC))
	e := engine.New(st, engine.Options{Clock: clk, Code: appcodetest.Compiler{B: b}, SecretKey: key})
	tok, err := e.Bootstrap(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	v := &secretEnv{e: e, dir: dir, alice: engine.Actor{User: "alice"}, bob: engine.Actor{User: "bob"}}
	v.admin, _ = e.Authenticate(ctx, tok)
	for _, u := range []string{"alice", "bob"} {
		if _, err := e.AddUser(ctx, v.admin, u); err != nil {
			t.Fatal(err)
		}
	}
	for _, app := range []string{"alice/app", "alice/other"} {
		if _, err := e.CreateApp(ctx, v.admin, app, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.AddMember(ctx, v.alice, "alice/app", "bob", engine.RoleEditor); err != nil {
		t.Fatal(err)
	}
	if b.OnChange != nil {
		if _, err := e.Deploy(ctx, v.admin, "alice/app", "", "// go backend"); err != nil {
			t.Fatal(err)
		}
		if err := e.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
	}
	return v
}

func TestSecretsManagement(t *testing.T) {
	t.Parallel()
	v := newSecretEnv(t, testSecretKey, nil)
	e, ctx := v.e, context.Background()

	if err := e.SetSecret(ctx, v.alice, "alice/app", "API_KEY", []byte("v1-very-secret")); err != nil {
		t.Fatal(err)
	}
	if err := e.SetSecret(ctx, v.admin, "alice/app", "OTHER", []byte("x")); err != nil {
		t.Fatalf("the admin sets a secret: %v", err)
	}
	ss, err := e.ListSecrets(ctx, v.alice, "alice/app")
	if err != nil || len(ss) != 2 || ss[0].Name != "API_KEY" || ss[1].Name != "OTHER" || ss[0].Updated.IsZero() {
		t.Fatalf("ListSecrets = %+v, %v", ss, err)
	}

	// Only the owner and the admin manage secrets; members do not even
	// see the names.
	wantCode(t, e.SetSecret(ctx, v.bob, "alice/app", "API_KEY", []byte("mine")), errs.Forbidden, "an editor sets a secret")
	_, err = e.ListSecrets(ctx, v.bob, "alice/app")
	wantCode(t, err, errs.Forbidden, "an editor lists secrets")
	wantCode(t, e.RemoveSecret(ctx, v.bob, "alice/app", "API_KEY"), errs.Forbidden, "an editor removes a secret")
	wantCode(t, e.SetSecret(ctx, engine.Actor{}, "alice/app", "API_KEY", []byte("x")), errs.Unauthorized, "anonymous sets a secret")
	_, err = e.ListSecrets(ctx, engine.Actor{}, "alice/app")
	wantCode(t, err, errs.Unauthorized, "anonymous lists secrets")

	for _, bad := range []string{"", "1ABC", "A-B", "a b", strings.Repeat("A", 65), "ÄPI"} {
		wantCode(t, e.SetSecret(ctx, v.alice, "alice/app", bad, []byte("x")), errs.Invalid, "secret name "+bad)
	}
	wantCode(t, e.SetSecret(ctx, v.alice, "alice/app", "BIG", bytes.Repeat([]byte("x"), 64<<10+1)), errs.TooLarge, "oversized secret")
	wantCode(t, e.SetSecret(ctx, v.alice, "alice/nope", "K", []byte("x")), errs.NotFound, "secret of a missing app")

	if err := e.RemoveSecret(ctx, v.alice, "alice/app", "OTHER"); err != nil {
		t.Fatal(err)
	}
	wantCode(t, e.RemoveSecret(ctx, v.alice, "alice/app", "OTHER"), errs.NotFound, "remove twice")
	ss, _ = e.ListSecrets(ctx, v.alice, "alice/app")
	if len(ss) != 1 || ss[0].Name != "API_KEY" {
		t.Fatalf("after rm: %+v", ss)
	}
	// Other apps have their own secrets.
	if ss, _ := e.ListSecrets(ctx, v.alice, "alice/other"); len(ss) != 0 {
		t.Fatalf("alice/other lists %+v", ss)
	}

	// At rest the value is sealed: not in the database files in clear.
	for _, name := range []string{"handoff.db", "handoff.db-wal"} {
		b, err := os.ReadFile(filepath.Join(v.dir, name))
		if err != nil {
			continue
		}
		if bytes.Contains(b, []byte("v1-very-secret")) {
			t.Fatalf("%s holds a secret value in clear", name)
		}
	}
}

func TestSecretsNeedAServerKey(t *testing.T) {
	t.Parallel()
	v := newSecretEnv(t, nil, nil)
	err := v.e.SetSecret(context.Background(), v.alice, "alice/app", "K", []byte("x"))
	wantCode(t, err, errs.Unavailable, "a secret without a server key")
}

// Handlers read the secrets of their own app, opened with the server key,
// and see changes at once.
func TestHandlersReadTheirSecrets(t *testing.T) {
	t.Parallel()
	type seen struct {
		v  string
		ok bool
	}
	got := make(chan seen, 10)
	v := newSecretEnv(t, testSecretKey, &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		s, ok := hc.Secret("API_KEY")
		got <- seen{s, ok}
		return nil
	}})
	ctx := context.Background()
	write := func(id string) seen {
		t.Helper()
		if _, err := v.e.Put(ctx, v.alice, "alice/app", "jobs", id, []byte(`{}`), appcode.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		select {
		case s := <-got:
			return s
		case <-time.After(10 * time.Second):
			t.Fatal("onChange did not run")
		}
		return seen{}
	}
	if s := write("a"); s.ok {
		t.Fatalf("a secret before any was set: %+v", s)
	}
	if err := v.e.SetSecret(ctx, v.alice, "alice/app", "API_KEY", []byte("k-1")); err != nil {
		t.Fatal(err)
	}
	// Another app's secret of the same name is not this app's.
	if err := v.e.SetSecret(ctx, v.alice, "alice/other", "API_KEY", []byte("other-app")); err != nil {
		t.Fatal(err)
	}
	if s := write("b"); !s.ok || s.v != "k-1" {
		t.Fatalf("after set: %+v", s)
	}
	if err := v.e.SetSecret(ctx, v.alice, "alice/app", "API_KEY", []byte("k-2")); err != nil {
		t.Fatal(err)
	}
	if s := write("c"); s.v != "k-2" {
		t.Fatalf("after a change: %+v", s)
	}
	if err := v.e.RemoveSecret(ctx, v.alice, "alice/app", "API_KEY"); err != nil {
		t.Fatal(err)
	}
	if s := write("d"); s.ok {
		t.Fatalf("after rm: %+v", s)
	}
}

// A database opened with another server key does not give the secrets
// away: they stay sealed.
func TestSecretsDoNotOpenWithAnotherKey(t *testing.T) {
	t.Parallel()
	got := make(chan bool, 10)
	ctx := context.Background()
	dir := t.TempDir()
	open := func(key []byte, b *appcodetest.Backend) *engine.Engine {
		st, err := sqlite.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		b.Cfg.OnChange.Concurrency, b.Cfg.OnChange.MaxAttempts, b.Cfg.OnChange.Timeout = 1, 1, appcode.DefaultRunTimeout
		return engine.New(st, engine.Options{Clock: clock.NewVirtual(time.Date(2026, 9, 24, 12, 0, 0, 0, time.UTC)),
			Code: appcodetest.Compiler{B: b}, SecretKey: key})
	}
	e := open(testSecretKey, &appcodetest.Backend{})
	tok, _ := e.Bootstrap(ctx, "")
	admin, _ := e.Authenticate(ctx, tok)
	if _, err := e.CreateApp(ctx, admin, "admin/app", false); err != nil {
		t.Fatal(err)
	}
	if err := e.SetSecret(ctx, admin, "admin/app", "K", []byte("sealed")); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Deploy(ctx, admin, "admin/app", "", "// go"); err != nil {
		t.Fatal(err)
	}
	e.Store().Close()

	e2 := open(bytes.Repeat([]byte{9}, 32), &appcodetest.Backend{OnChange: func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		_, ok := hc.Secret("K")
		got <- ok
		return nil
	}})
	defer e2.Store().Close()
	if err := e2.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if _, err := e2.Put(ctx, admin, "admin/app", "jobs", "x", []byte(`{}`), appcode.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-got:
		if ok {
			t.Fatal("a secret opened with the wrong server key")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("onChange did not run")
	}
}
