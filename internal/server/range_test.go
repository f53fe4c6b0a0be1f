package server

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

// getPage reads one page of GET .../dbs/{db}/query as user.
func (fs *feedServer) getPage(app, db, user string, q url.Values) (int, appcode.Page) {
	fs.t.Helper()
	req, _ := http.NewRequest("GET", fs.ts.URL+"/v1/apps/"+app+"/dbs/"+db+"/query?"+q.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+fs.tokens[user])
	res, err := fs.ts.Client().Do(req)
	if err != nil {
		fs.t.Fatal(err)
	}
	defer res.Body.Close()
	var p appcode.Page
	json.NewDecoder(res.Body).Decode(&p)
	return res.StatusCode, p
}

// queryAll pages through a query with limit 1 and returns the ids.
func (fs *feedServer) queryAll(app, db, user string, q url.Values) []string {
	fs.t.Helper()
	var ids []string
	q, _ = url.ParseQuery(q.Encode())
	q.Set("limit", "1")
	for {
		code, p := fs.getPage(app, db, user, q)
		if code != http.StatusOK {
			fs.t.Fatalf("query %s: %d", q.Encode(), code)
		}
		for _, d := range p.Docs {
			var h struct {
				ID string `json:"_id"`
			}
			json.Unmarshal(d, &h)
			ids = append(ids, h.ID)
		}
		if p.Next == "" {
			return ids
		}
		q.Set("after", p.Next)
	}
}

// TestRangeQueriesShowOnlyWhatTheReaderMayRead: range and prefix
// queries, paged and live, never show a reader a document it may not
// read, and a document that becomes unreadable leaves a live result.
func TestRangeQueriesShowOnlyWhatTheReaderMayRead(t *testing.T) {
	t.Parallel()
	fs := newFeedServer(t, Options{})
	const app = "alice/private"
	fs.app(app, false)
	if _, err := fs.e.Deploy(fs.ctx, feedOwner, app, feedAccess, ""); err != nil {
		t.Fatal(err)
	}
	fs.put(app, "docs", "g-bob", `{"grant":{"users":{"bob":["u:bob"]}}}`)
	fs.put(app, "docs", "a1", `{"n":1,"name":"tea-a1","channels":["u:alice"]}`)
	fs.put(app, "docs", "b1", `{"n":2,"name":"tea-b1","channels":["u:bob"]}`)
	fs.put(app, "docs", "a2", `{"n":3,"name":"tea-a2","channels":["u:alice"]}`)
	fs.put(app, "docs", "b2", `{"n":4,"name":"tea-b2","channels":["u:bob"]}`)
	fs.put(app, "docs", "a3", `{"n":5,"name":"tea-a3","channels":["u:alice"]}`)

	cases := []struct {
		q          url.Values
		bob, alice []string
	}{
		{url.Values{"field": {"n"}, "from": {"1"}, "to": {"10"}}, []string{"b1", "b2"}, []string{"a1", "b1", "a2", "b2", "a3"}},
		{url.Values{"field": {"n"}, "from": {"3"}}, []string{"b2"}, []string{"a2", "b2", "a3"}},
		{url.Values{"field": {"name"}, "prefix": {"tea-"}}, []string{"b1", "b2"}, []string{"a1", "a2", "a3", "b1", "b2"}},
		{url.Values{"field": {"name"}, "prefix": {"tea-a"}}, nil, []string{"a1", "a2", "a3"}},
	}
	for _, c := range cases {
		for user, want := range map[string][]string{"bob": c.bob, "alice": c.alice} {
			if got := fs.queryAll(app, "docs", user, c.q); !slices.Equal(got, want) {
				t.Errorf("%s: %s = %v, want %v", user, c.q.Encode(), got, want)
			}
		}
	}
	if code, _ := fs.getPage(app, "docs", "dave", url.Values{"field": {"n"}, "from": {"0"}}); code != http.StatusForbidden {
		t.Errorf("a stranger's range query: %d, want 403", code)
	}
	for _, q := range []string{"field=n&from=true", "field=n&from=1&prefix=a", "field=n", "field=n&key=1&to=2", "field=n&from=1&after=bogus"} {
		v, _ := url.ParseQuery(q)
		if code, _ := fs.getPage(app, "docs", "bob", v); code != http.StatusBadRequest {
			t.Errorf("%s: %d, want 400", q, code)
		}
	}

	// Live: the snapshot and the changes hold only bob's documents.
	live := map[string]*sseStream{}
	for name, q := range map[string]string{"range": "db=docs&field=n&from=0&to=100", "prefix": "db=docs&field=name&prefix=tea"} {
		s, res := fs.open(app, "bob", q)
		if s == nil {
			t.Fatalf("live %s: %d", name, res.StatusCode)
		}
		ev := s.next()
		var snap struct {
			Docs []struct {
				ID string `json:"_id"`
			}
		}
		json.Unmarshal([]byte(ev.data), &snap)
		if ev.name != "snapshot" || len(snap.Docs) != 2 || snap.Docs[0].ID != "b1" || snap.Docs[1].ID != "b2" {
			t.Fatalf("live %s snapshot: %+v", name, ev)
		}
		live[name] = s
	}
	fs.put(app, "docs", "a4", `{"n":6,"name":"tea-a4","channels":["u:alice"],"secret":"s"}`)
	fs.put(app, "docs", "b3", `{"n":7,"name":"tea-b3","channels":["u:bob"]}`)
	fs.put(app, "docs", "b4", `{"n":700,"name":"coffee","channels":["u:bob"]}`)
	fs.put(app, "docs", "b1", `{"n":2,"name":"tea-b1","channels":["u:alice"],"secret":"s"}`)
	for name, s := range live {
		var got []string
		for range 2 {
			ev := s.next()
			if strings.Contains(ev.data, "secret") {
				t.Fatalf("live %s shows bob an unreadable document: %s", name, ev.data)
			}
			var qc engine.QueryChange
			json.Unmarshal([]byte(ev.data), &qc)
			if qc.ID == "b1" && (qc.Match || string(qc.Doc) != "null" && qc.Doc != nil) {
				t.Fatalf("live %s: b1 left bob's view but the change is %s", name, ev.data)
			}
			got = append(got, qc.ID)
		}
		if !slices.Equal(got, []string{"b3", "b1"}) {
			t.Fatalf("live %s changes %v, want [b3 b1]", name, got)
		}
	}
}
