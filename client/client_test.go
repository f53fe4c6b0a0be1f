package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/errs"
)

// recorded is what the fake server saw of one request.
type recorded struct {
	method, path, query string
	auth, label, ctype  string
	body                string
}

// fake answers every request with status and body and records it.
func fake(t *testing.T, status int, body string) (*httptest.Server, *[]recorded) {
	t.Helper()
	var seen []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen = append(seen, recorded{
			method: r.Method, path: r.URL.EscapedPath(), query: r.URL.RawQuery,
			auth: r.Header.Get("Authorization"), label: r.Header.Get(PathHeader),
			ctype: r.Header.Get("Content-Type"), body: string(b),
		})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

func TestRequestsMatchTheAPIContract(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name   string
		answer string
		call   func(c *Client) (any, error)
		want   recorded // auth/label/ctype checked separately
		result any
	}{
		{"whoami", `{"user":"alice","admin":false}`,
			func(c *Client) (any, error) { return c.WhoAmI(ctx) },
			recorded{method: "GET", path: "/v1/whoami"},
			Identity{User: "alice"}},
		{"add user", `{"name":"bob","token":"hnd_x"}`,
			func(c *Client) (any, error) { return c.AddUser(ctx, "bob") },
			recorded{method: "POST", path: "/v1/users", body: `{"name":"bob"}`},
			NewUser{Name: "bob", Token: "hnd_x"}},
		{"create app", `{"app":"alice/jobs","owner":"alice","name":"jobs","public":true,"roles":["owner"]}`,
			func(c *Client) (any, error) { return c.CreateApp(ctx, "alice/jobs", true) },
			recorded{method: "POST", path: "/v1/apps", body: `{"app":"alice/jobs","public":true}`},
			App{App: "alice/jobs", Owner: "alice", Name: "jobs", Public: true, Roles: []string{"owner"}}},
		{"apps", `{"apps":[{"app":"alice/jobs","owner":"alice","name":"jobs"}]}`,
			func(c *Client) (any, error) { return c.Apps(ctx) },
			recorded{method: "GET", path: "/v1/apps"},
			[]App{{App: "alice/jobs", Owner: "alice", Name: "jobs"}}},
		{"add member", `{"ok":true}`,
			func(c *Client) (any, error) { return nil, c.AddMember(ctx, "alice/jobs", "bob", "editor") },
			recorded{method: "POST", path: "/v1/apps/alice/jobs/members", body: `{"role":"editor","user":"bob"}`},
			nil},
		{"members", `{"members":[{"user":"bob","roles":["editor"]}]}`,
			func(c *Client) (any, error) { return c.Members(ctx, "alice/jobs") },
			recorded{method: "GET", path: "/v1/apps/alice/jobs/members"},
			[]Member{{User: "bob", Roles: []string{"editor"}}}},
		{"databases", `{"dbs":["jobs","logs"]}`,
			func(c *Client) (any, error) { return c.Databases(ctx, "alice/jobs") },
			recorded{method: "GET", path: "/v1/apps/alice/jobs/dbs"},
			[]string{"jobs", "logs"}},
		{"put with id", `{"ok":true,"id":"a/b","rev":"2-x","seq":7}`,
			func(c *Client) (any, error) {
				return c.Put(ctx, "alice/jobs", "jobs", "a/b", json.RawMessage(`{"status":"running"}`), PutOptions{IfRev: "1-y"})
			},
			recorded{method: "PUT", path: "/v1/apps/alice/jobs/dbs/jobs/docs/a%2Fb", query: "ifRev=1-y", body: `{"status":"running"}`},
			WriteResult{OK: true, ID: "a/b", Rev: "2-x", Seq: 7}},
		{"put without id", `{"ok":true,"id":"j1","rev":"1-x","existing":true}`,
			func(c *Client) (any, error) {
				return c.Put(ctx, "alice/jobs", "jobs", "", json.RawMessage(`{"_id":"j1"}`), PutOptions{IfAbsent: true})
			},
			recorded{method: "POST", path: "/v1/apps/alice/jobs/dbs/jobs/docs", query: "ifAbsent=true", body: `{"_id":"j1"}`},
			WriteResult{OK: true, ID: "j1", Rev: "1-x", Existing: true}},
		{"get", `{"_id":"j1","_rev":"1-x","status":"pending"}`,
			func(c *Client) (any, error) { return c.Get(ctx, "alice/jobs", "jobs", "j1") },
			recorded{method: "GET", path: "/v1/apps/alice/jobs/dbs/jobs/docs/j1"},
			json.RawMessage(`{"_id":"j1","_rev":"1-x","status":"pending"}`)},
		{"history", `{"history":[{"seq":1,"id":"j1","db":"jobs","rev":"1-x","doc":{"_id":"j1"},"writer":{"user":"alice"},"path":"cli","time":"2026-01-02T03:04:05Z"}]}`,
			func(c *Client) (any, error) {
				h, err := c.History(ctx, "alice/jobs", "jobs", "j1")
				for i := range h {
					h[i].Time = h[i].Time.UTC()
				}
				return h, err
			},
			recorded{method: "GET", path: "/v1/apps/alice/jobs/dbs/jobs/docs/j1/history"},
			nil /* checked below */},
		{"delete", `{"ok":true,"id":"j1","rev":"3-z","seq":9}`,
			func(c *Client) (any, error) { return c.Delete(ctx, "alice/jobs", "jobs", "j1", "2-x") },
			recorded{method: "DELETE", path: "/v1/apps/alice/jobs/dbs/jobs/docs/j1", query: "ifRev=2-x"},
			WriteResult{OK: true, ID: "j1", Rev: "3-z", Seq: 9}},
		{"query", `{"docs":[{"_id":"j1"}],"next":"abc"}`,
			func(c *Client) (any, error) {
				return c.Query(ctx, "alice/jobs", "jobs", "status", json.RawMessage(`"running"`), 10, "cur")
			},
			recorded{method: "GET", path: "/v1/apps/alice/jobs/dbs/jobs/query", query: "after=cur&field=status&key=%22running%22&limit=10"},
			Page{Docs: []json.RawMessage{json.RawMessage(`{"_id":"j1"}`)}, Next: "abc"}},
		{"scan", `{"docs":[],"next":""}`,
			func(c *Client) (any, error) { return c.Scan(ctx, "alice/jobs", "jobs", 0, "") },
			recorded{method: "GET", path: "/v1/apps/alice/jobs/dbs/jobs/docs"},
			Page{Docs: []json.RawMessage{}}},
		{"db changes", `{"changes":[],"last":5}`,
			func(c *Client) (any, error) { return c.Changes(ctx, "alice/jobs", "jobs", 5, 100) },
			recorded{method: "GET", path: "/v1/apps/alice/jobs/dbs/jobs/changes", query: "limit=100&since=5"},
			Changes{Changes: []Entry{}, Last: 5}},
		{"app changes", `{"changes":[],"last":0}`,
			func(c *Client) (any, error) { return c.Changes(ctx, "alice/jobs", "", 0, 0) },
			recorded{method: "GET", path: "/v1/apps/alice/jobs/changes"},
			Changes{Changes: []Entry{}}},
		{"bulk", `{"results":[{"ok":true,"id":"a","rev":"1-a"},{"ok":false,"id":"b","error":{"code":"invalid","message":"bad"}}]}`,
			func(c *Client) (any, error) {
				return c.Bulk(ctx, "alice/jobs", "jobs", []json.RawMessage{json.RawMessage(`{"_id":"a"}`), json.RawMessage(`{"_id":"b","_x":1}`)}, BulkOptions{IfAbsent: true})
			},
			recorded{method: "POST", path: "/v1/apps/alice/jobs/dbs/jobs/bulk", body: `{"docs":[{"_id":"a"},{"_id":"b","_x":1}],"ifAbsent":true}`},
			[]BulkResult{{OK: true, ID: "a", Rev: "1-a"}, {OK: false, ID: "b", Error: &errs.Error{Code: errs.Invalid, Message: "bad"}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, seen := fake(t, http.StatusOK, tc.answer)
			c := New(srv.URL, "hnd_tok", WithPath("cli"))
			got, err := tc.call(c)
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if len(*seen) != 1 {
				t.Fatalf("%d requests, want 1", len(*seen))
			}
			r := (*seen)[0]
			if r.method != tc.want.method || r.path != tc.want.path || r.query != tc.want.query {
				t.Errorf("request %s %s?%s, want %s %s?%s", r.method, r.path, r.query, tc.want.method, tc.want.path, tc.want.query)
			}
			if tc.want.body != "" && r.body != tc.want.body {
				t.Errorf("body %s, want %s", r.body, tc.want.body)
			}
			if tc.want.body != "" && r.ctype != "application/json" {
				t.Errorf("Content-Type %q", r.ctype)
			}
			if r.auth != "Bearer hnd_tok" || r.label != "cli" {
				t.Errorf("Authorization %q, X-Handoff-Path %q", r.auth, r.label)
			}
			if tc.name == "history" {
				h := got.([]Entry)
				if len(h) != 1 || h[0].Seq != 1 || h[0].Rev != "1-x" || h[0].Writer.User != "alice" || h[0].Path != "cli" || h[0].Time.Year() != 2026 || string(h[0].Doc) != `{"_id":"j1"}` {
					t.Errorf("history %+v", h)
				}
				return
			}
			if tc.result != nil && !reflect.DeepEqual(got, tc.result) {
				t.Errorf("result %#v, want %#v", got, tc.result)
			}
		})
	}
}

func TestIDsWithSlashesStayOneSegment(t *testing.T) {
	// A real ServeMux with the same {id} wildcard as the server: the id
	// must arrive whole, however odd.
	var got []string
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/apps/{owner}/{app}/dbs/{db}/docs/{id}", func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.PathValue("id"))
		io.WriteString(w, `{}`)
	})
	mux.HandleFunc("GET /v1/apps/{owner}/{app}/dbs/{db}/docs/{id}/history", func(w http.ResponseWriter, r *http.Request) {
		got = append(got, "history:"+r.PathValue("id"))
		io.WriteString(w, `{"history":[]}`)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := New(srv.URL, "")
	ids := []string{"plain", "a/b/c", "with space", "q?x=1#frag", "100%", "ünï/cödé", "history", ".", ".."}
	for _, id := range ids {
		if _, err := c.Get(context.Background(), "alice/jobs", "jobs", id); err != nil {
			t.Fatalf("get %q: %v", id, err)
		}
	}
	if _, err := c.History(context.Background(), "alice/jobs", "jobs", "a/b"); err != nil {
		t.Fatal(err)
	}
	want := append(append([]string{}, ids...), "history:a/b")
	if !reflect.DeepEqual(got, want) {
		t.Errorf("server saw ids %q, want %q", got, want)
	}
}

func TestNoTokenNoHeaders(t *testing.T) {
	srv, seen := fake(t, http.StatusOK, `{"ok":true}`)
	c := New(srv.URL, "")
	if err := c.Health(context.Background()); err != nil {
		t.Fatal(err)
	}
	if r := (*seen)[0]; r.auth != "" || r.label != "" || r.path != "/healthz" {
		t.Errorf("anonymous request sent %+v", r)
	}
}

func TestPathLabel(t *testing.T) {
	srv, seen := fake(t, http.StatusOK, `{"apps":[]}`)
	c := New(srv.URL+"/", "t", WithPath("cli"))
	imp := c.WithPathLabel("import")
	if _, err := imp.Apps(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apps(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.SetPath("console")
	if _, err := c.Apps(context.Background()); err != nil {
		t.Fatal(err)
	}
	var labels []string
	for _, r := range *seen {
		labels = append(labels, r.label)
		if r.path != "/v1/apps" {
			t.Errorf("path %q: a trailing slash of the base URL leaked", r.path)
		}
	}
	if want := []string{"import", "cli", "console"}; !reflect.DeepEqual(labels, want) {
		t.Errorf("labels %q, want %q", labels, want)
	}
}

func TestErrorsAreDecodedFromTheBody(t *testing.T) {
	cases := []struct {
		status int
		body   string
		want   errs.Error
	}{
		{409, `{"error":{"code":"conflict","message":"document \"j1\" is at rev 2-b, not 1-a"}}`,
			errs.Error{Code: errs.Conflict, Message: `document "j1" is at rev 2-b, not 1-a`}},
		{403, `{"error":{"code":"forbidden","message":"not yours","reason":"not an editor"}}`,
			errs.Error{Code: errs.Forbidden, Message: "not yours", Reason: "not an editor"}},
		{404, `{"error":{"code":"not_found","message":"app \"x/y\" does not exist"}}`,
			errs.Error{Code: errs.NotFound, Message: `app "x/y" does not exist`}},
		// Bodies of another shape still give the status's code.
		{502, `<html>bad gateway</html>`, errs.Error{Code: errs.Unavailable}},
		{401, ``, errs.Error{Code: errs.Unauthorized}},
		{500, `{"oops":1}`, errs.Error{Code: errs.Internal}},
	}
	for _, tc := range cases {
		srv, _ := fake(t, tc.status, tc.body)
		_, err := New(srv.URL, "t").Get(context.Background(), "alice/jobs", "jobs", "j1")
		var e *errs.Error
		if !errors.As(err, &e) {
			t.Fatalf("status %d: error %T %v is not an *errs.Error", tc.status, err, err)
		}
		if e.Code != tc.want.Code {
			t.Errorf("status %d: code %q, want %q", tc.status, e.Code, tc.want.Code)
		}
		if tc.want.Message != "" && (e.Message != tc.want.Message || e.Reason != tc.want.Reason) {
			t.Errorf("status %d: %+v, want %+v", tc.status, *e, tc.want)
		}
		if tc.want.Message == "" && !strings.Contains(e.Message, "status") {
			t.Errorf("status %d: message %q does not say what the server answered", tc.status, e.Message)
		}
	}
}

func TestUnreachableServer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close() // nothing listens there any more
	_, err := New(url, "t").WhoAmI(context.Background())
	if !errs.Is(err, errs.Unavailable) {
		t.Fatalf("error %v, want unavailable", err)
	}
	for _, want := range []string{url, "unreachable", "handoff serve", "HANDOFF_SERVER"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not mention %q", err.Error(), want)
		}
	}
}

func TestBadArgumentsFailBeforeAnyRequest(t *testing.T) {
	srv, seen := fake(t, http.StatusOK, `{}`)
	c := New(srv.URL, "t")
	ctx := context.Background()
	checks := map[string]error{
		"app without slash": func() error { _, err := c.Databases(ctx, "jobs"); return err }(),
		"empty db":          func() error { _, err := c.Scan(ctx, "alice/jobs", "", 0, ""); return err }(),
		"empty id":          func() error { _, err := c.Get(ctx, "alice/jobs", "jobs", ""); return err }(),
		"too many docs": func() error {
			_, err := c.Bulk(ctx, "alice/jobs", "jobs", make([]json.RawMessage, MaxBulkDocs+1), BulkOptions{})
			return err
		}(),
	}
	for name, err := range checks {
		if !errs.Is(err, errs.Invalid) {
			t.Errorf("%s: error %v, want invalid", name, err)
		}
	}
	if len(*seen) != 0 {
		t.Errorf("%d requests were sent", len(*seen))
	}
}

func TestBulkResultCountMismatch(t *testing.T) {
	srv, _ := fake(t, http.StatusOK, `{"results":[{"ok":true,"id":"a","rev":"1-a"}]}`)
	_, err := New(srv.URL, "t").Bulk(context.Background(), "alice/jobs", "jobs",
		[]json.RawMessage{json.RawMessage(`{}`), json.RawMessage(`{}`)}, BulkOptions{})
	if !errs.Is(err, errs.Internal) {
		t.Fatalf("error %v, want internal", err)
	}
}

func TestNormalizeURL(t *testing.T) {
	for in, want := range map[string]string{
		"":                        DefaultServer,
		"localhost:9000":          "http://localhost:9000",
		"https://h.example/x/":    "https://h.example/x",
		" http://127.0.0.1:8080 ": "http://127.0.0.1:8080",
	} {
		if got := NormalizeURL(in); got != want {
			t.Errorf("NormalizeURL(%q) = %q, want %q", in, got, want)
		}
	}
}
