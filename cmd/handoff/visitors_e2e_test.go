package main

import (
	"net/http"
	"strings"
	"testing"
)

// TestAppSignupAndInvites: the owner sets the sign-up policy with `app
// set --signup`, `app list` shows it, and a code from `app invite` lets
// one visitor sign up, once.
func TestAppSignupAndInvites(t *testing.T) {
	t.Parallel()
	srv := startServer(t, t.TempDir(), "HANDOFF_ADMIN_TOKEN="+adminToken)
	u := srv.url
	at := decode[map[string]string](t, must(t, u, adminToken, "user", "add", "alice").stdout)["token"]
	bt := decode[map[string]string](t, must(t, u, adminToken, "user", "add", "bob").stdout)["token"]
	const app = "alice/jobs"
	must(t, u, at, "app", "create", app)

	set := decode[map[string]any](t, must(t, u, at, "app", "set", "--app", app, "--signup", "invite").stdout)
	if set["ok"] != true || set["signup"] != "invite" {
		t.Fatalf("app set --signup = %v", set)
	}
	fails(t, u, at, 1, "error: invalid: ", "app", "set", "--app", app, "--signup", "wide")
	fails(t, u, bt, 4, "error: forbidden: ", "app", "set", "--app", app, "--signup", "open")
	apps := decode[[]map[string]any](t, must(t, u, at, "app", "list").stdout)
	if len(apps) != 1 || apps[0]["signup"] != "invite" {
		t.Fatalf("app list = %v", apps)
	}

	fails(t, u, bt, 4, "error: forbidden: ", "app", "invite", "--app", app)
	code := decode[map[string]string](t, must(t, u, at, "app", "invite", "--app", app).stdout)["code"]
	if code == "" {
		t.Fatal("app invite printed no code")
	}
	signup := func(name string) int {
		t.Helper()
		body := `{"name":"` + name + `","password":"long enough","invite":"` + code + `"}`
		res, err := http.Post(u+"/v1/apps/alice/jobs/visitors/signup", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := signup("sam"); got != http.StatusCreated {
		t.Fatalf("sign-up with the invite: %d", got)
	}
	if got := signup("kim"); got != http.StatusForbidden {
		t.Fatalf("sign-up with a used invite: %d", got)
	}
}
