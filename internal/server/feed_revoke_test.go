package server

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/internal/engine"
)

// TestFeedEndsWhenItsVisitorSignsOut: a visitor's open feed and live
// query end with an error event when the visitor signs out, whatever case
// the sign-out's scheme is written in, and the token is refused after.
// A sign-out with a token that revokes nothing says so.
func TestFeedEndsWhenItsVisitorSignsOut(t *testing.T) {
	t.Parallel()
	cheapPasswords()
	fs := newFeedServer(t, Options{})
	fs.app("alice/jobs", false)
	if err := fs.e.SetSignup(fs.ctx, feedOwner, "alice/jobs", engine.SignupOpen); err != nil {
		t.Fatal(err)
	}
	token, v, err := fs.e.SignUp(fs.ctx, "alice/jobs", "sam", "long enough", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.e.AddMember(fs.ctx, feedOwner, "alice/jobs", v.ID, "viewer"); err != nil {
		t.Fatal(err)
	}
	fs.tokens["sam"] = token
	fs.put("alice/jobs", "jobs", "j1", `{"status":"pending"}`)
	feed, res := fs.open("alice/jobs", "sam", "since=0")
	if feed == nil {
		t.Fatalf("feed: %d", res.StatusCode)
	}
	query, res := fs.open("alice/jobs", "sam", `db=jobs&field=status&key="pending"`)
	if query == nil {
		t.Fatalf("live query: %d", res.StatusCode)
	}
	if ev := feed.next(); ev.name != "ready" {
		t.Fatalf("feed: %+v, want ready", ev)
	}
	change(t, feed.next())
	if ev := query.next(); ev.name != "snapshot" {
		t.Fatalf("live query: %+v, want snapshot", ev)
	}

	signOut := func(scheme string) (int, string) {
		req, _ := http.NewRequest("POST", fs.ts.URL+"/v1/apps/alice/jobs/visitors/signout", nil)
		req.Header.Set("Authorization", scheme+" "+token)
		res, err := fs.ts.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, body := signOut("bearer"); code != 200 {
		t.Fatalf("sign-out with \"bearer\": %d %s", code, body)
	}
	fs.put("alice/jobs", "jobs", "j2", `{"status":"pending"}`)
	for name, s := range map[string]*sseStream{"feed": feed, "live query": query} {
		ev := s.next()
		if ev.name != "error" || !strings.Contains(ev.data, `"code":"unauthorized"`) {
			t.Fatalf("%s after the sign-out: %+v, want an unauthorized error event", name, ev)
		}
		s.ended()
	}
	if code, body := signOut("BEARER"); code != 401 || !strings.Contains(body, "unauthorized") {
		t.Fatalf("a second sign-out: %d %s; want 401", code, body)
	}
	if s, res := fs.open("alice/jobs", "sam", "since=0"); s != nil || res.StatusCode != 401 {
		t.Fatalf("a feed with the signed-out token: %d", res.StatusCode)
	}
}
