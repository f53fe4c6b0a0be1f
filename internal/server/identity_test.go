package server

import (
	"net/url"
	"strings"
	"testing"
)

// escapeID escapes an id for a path the way clients must: url.PathEscape,
// plus the ids "." and "..", which a path would otherwise lose to
// path cleaning.
func escapeID(id string) string {
	switch id {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(id)
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	var me struct {
		User  string
		Admin bool
	}
	v.mustJSON(v.do("GET", "/v1/whoami", "alice", ""), 200, &me)
	if me.User != "alice" || me.Admin {
		t.Errorf("whoami alice = %+v", me)
	}
	v.mustJSON(v.do("GET", "/v1/whoami", "admin", ""), 200, &me)
	if me.User != "admin" || !me.Admin {
		t.Errorf("whoami admin = %+v", me)
	}
	v.mustJSON(v.do("GET", "/v1/whoami", "raw:bearer "+v.tokens["bob"], ""), 200, &me)
	if me.User != "bob" {
		t.Errorf("a lowercase scheme is not accepted: %+v", me)
	}

	r := v.do("GET", "/v1/whoami", "", "")
	v.mustError(r, 401, "unauthorized")
	if r.header.Get("WWW-Authenticate") == "" {
		t.Error("401 without WWW-Authenticate")
	}
	for _, h := range []string{"Bearer hnd_wrong", "Basic YWxpY2U6eA==", "Bearer ", "hnd_notascheme"} {
		v.mustError(v.do("GET", "/v1/whoami", "raw:"+h, ""), 401, "unauthorized")
	}

	// A public app reads anonymously, but a bad token is still refused,
	// never quietly treated as anonymous.
	v.mustJSON(v.do("PUT", docPath("alice/pub", "notes", "n1"), "alice", `{"x":1}`), 200, nil)
	v.mustJSON(v.do("GET", docPath("alice/pub", "notes", "n1"), "", ""), 200, nil)
	v.mustError(v.do("GET", docPath("alice/pub", "notes", "n1"), "raw:Bearer hnd_expired", ""), 401, "unauthorized")
	v.mustError(v.do("GET", "/v1/apps/alice/pub/dbs", "raw:Bearer hnd_expired", ""), 401, "unauthorized")
	// Anonymous readers of a private app need a credential.
	v.mustError(v.do("GET", docPath("alice/jobs", "jobs", "x"), "", ""), 401, "unauthorized")
}

func TestUsers(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	var out struct{ Name, Token string }
	v.mustJSON(v.do("POST", "/v1/users", "admin", `{"name":"erin"}`), 201, &out)
	if out.Name != "erin" || !strings.HasPrefix(out.Token, "hnd_") {
		t.Fatalf("add user = %+v", out)
	}
	v.tokens["erin"] = out.Token
	var me struct{ User string }
	v.mustJSON(v.do("GET", "/v1/whoami", "erin", ""), 200, &me)
	if me.User != "erin" {
		t.Errorf("the new token is %q", me.User)
	}

	v.mustError(v.do("POST", "/v1/users", "admin", `{"name":"erin"}`), 409, "exists")
	e := v.mustError(v.do("POST", "/v1/users", "alice", `{"name":"frank"}`), 403, "forbidden")
	if e.Reason == "" {
		t.Errorf("forbidden without a reason: %+v", e)
	}
	v.mustError(v.do("POST", "/v1/users", "", `{"name":"frank"}`), 401, "unauthorized")
	v.mustError(v.do("POST", "/v1/users", "admin", `{"name":"Frank!"}`), 400, "invalid")
	v.mustError(v.do("POST", "/v1/users", "admin", `{"name":`), 400, "invalid")
	v.mustError(v.do("POST", "/v1/users", "admin", ``), 400, "invalid")
	v.mustError(v.do("POST", "/v1/users", "admin", `{"name":"frank"} {}`), 400, "invalid")
	e = v.mustError(v.do("POST", "/v1/users", "admin", `{"nmae":"frank"}`), 400, "invalid")
	if !strings.Contains(e.Message, "nmae") {
		t.Errorf("unknown field not named: %q", e.Message)
	}
	e = v.mustError(v.do("POST", "/v1/users", "admin", `{"name":7}`), 400, "invalid")
	if !strings.Contains(e.Message, `"name" must be a string`) {
		t.Errorf("type error not explained: %q", e.Message)
	}
	v.mustError(v.do("POST", "/v1/users", "admin", `{"name":"`+strings.Repeat("a", 70<<10)+`"}`), 413, "too_large")
}

// TestListAndRemoveUsers: the admin lists users and removes them; a
// removed user's token stops working, owners and the admin stay.
func TestListAndRemoveUsers(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	var list struct {
		Users []struct {
			Name  string
			Admin bool
			Apps  []string
		}
	}
	v.mustJSON(v.do("GET", "/v1/users", "admin", ""), 200, &list)
	if len(list.Users) != 5 || list.Users[0].Name != "admin" || !list.Users[0].Admin || list.Users[1].Name != "alice" || len(list.Users[1].Apps) != 2 {
		t.Fatalf("users = %+v", list.Users)
	}
	v.mustError(v.do("GET", "/v1/users", "alice", ""), 403, "forbidden")
	v.mustError(v.do("DELETE", "/v1/users/carol", "alice", ""), 403, "forbidden")
	v.mustError(v.do("DELETE", "/v1/users/carol", "", ""), 401, "unauthorized")
	v.mustError(v.do("DELETE", "/v1/users/admin", "admin", ""), 403, "forbidden")
	if e := v.mustError(v.do("DELETE", "/v1/users/alice", "admin", ""), 409, "conflict"); !strings.Contains(e.Message, "alice/jobs, alice/pub") {
		t.Errorf("removing an owner: %q does not name her apps", e.Message)
	}
	v.mustError(v.do("DELETE", "/v1/users/nobody", "admin", ""), 404, "not_found")

	v.mustJSON(v.do("GET", "/v1/whoami", "carol", ""), 200, nil)
	v.mustJSON(v.do("DELETE", "/v1/users/carol", "admin", ""), 200, nil)
	v.mustError(v.do("GET", "/v1/whoami", "carol", ""), 401, "unauthorized")
	v.mustError(v.do("DELETE", "/v1/users/carol", "admin", ""), 404, "not_found")
	v.mustJSON(v.do("GET", "/v1/users", "admin", ""), 200, &list)
	if len(list.Users) != 4 {
		t.Fatalf("users after removing carol = %+v", list.Users)
	}
}

func TestApps(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	var info struct {
		App, Owner, Name string
		Public           bool
		Roles            []string
	}
	v.mustJSON(v.do("POST", "/v1/apps", "bob", `{"app":"bob/ci","public":true}`), 201, &info)
	if info.App != "bob/ci" || info.Owner != "bob" || info.Name != "ci" || !info.Public || len(info.Roles) != 1 || info.Roles[0] != "owner" {
		t.Errorf("create app = %+v", info)
	}
	v.mustJSON(v.do("POST", "/v1/apps", "admin", `{"app":"carol/lab"}`), 201, nil)
	v.mustError(v.do("POST", "/v1/apps", "bob", `{"app":"bob/ci"}`), 409, "exists")
	v.mustError(v.do("POST", "/v1/apps", "bob", `{"app":"alice/other"}`), 403, "forbidden")
	v.mustError(v.do("POST", "/v1/apps", "", `{"app":"bob/x"}`), 401, "unauthorized")
	v.mustError(v.do("POST", "/v1/apps", "admin", `{"app":"nobody/x"}`), 404, "not_found")
	v.mustError(v.do("POST", "/v1/apps", "bob", `{"app":"Bob/CI"}`), 400, "invalid")
	v.mustError(v.do("POST", "/v1/apps", "bob", `{"app":"bob/x","public":"yes"}`), 400, "invalid")

	var list struct {
		Apps []struct {
			App   string
			Roles []string
		}
	}
	v.mustJSON(v.do("GET", "/v1/apps", "bob", ""), 200, &list)
	got := map[string]string{}
	for _, a := range list.Apps {
		got[a.App] = strings.Join(a.Roles, ",")
	}
	if len(got) != 2 || got["bob/ci"] != "owner" || got["alice/jobs"] != "editor" {
		t.Errorf("bob's apps = %v", got)
	}
	v.mustJSON(v.do("GET", "/v1/apps", "dave", ""), 200, &list)
	if len(list.Apps) != 0 {
		t.Errorf("dave sees %+v", list.Apps)
	}
	v.mustError(v.do("GET", "/v1/apps", "", ""), 401, "unauthorized")
}

func TestMembers(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	var out struct {
		Members []struct {
			User  string
			Roles []string
		}
	}
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/members", "carol", ""), 200, &out)
	got := map[string]string{}
	for _, m := range out.Members {
		got[m.User] = strings.Join(m.Roles, ",")
	}
	if len(got) != 2 || got["bob"] != "editor" || got["carol"] != "viewer" {
		t.Errorf("members = %v", got)
	}

	v.mustError(v.do("POST", "/v1/apps/alice/jobs/members", "bob", `{"user":"dave","role":"editor"}`), 403, "forbidden")
	v.mustError(v.do("POST", "/v1/apps/alice/jobs/members", "alice", `{"user":"nobody","role":"editor"}`), 404, "not_found")
	v.mustError(v.do("POST", "/v1/apps/alice/nope/members", "alice", `{"user":"dave","role":"editor"}`), 404, "not_found")
	v.mustError(v.do("POST", "/v1/apps/alice/jobs/members", "alice", `{"user":"dave"}`), 400, "invalid")
	v.mustError(v.do("POST", "/v1/apps/alice/jobs/members", "alice", `{"user":"dave","role":"bad role"}`), 400, "invalid")
	v.mustError(v.do("POST", "/v1/apps/alice/jobs/members", "alice", `["dave"]`), 400, "invalid")
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/members", "dave", ""), 403, "forbidden")
	v.mustError(v.do("GET", "/v1/apps/alice/nope/members", "alice", ""), 404, "not_found")

	// A new editor can write at once.
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/members", "alice", `{"user":"dave","role":"editor"}`), 200, nil)
	v.put("dave", "jobs", "by-dave", `{"ok":1}`)
}
