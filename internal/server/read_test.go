package server

import (
	"fmt"
	"net/url"
	"strconv"
	"testing"
)

type pageOut struct {
	Docs []map[string]any
	Next string
}

// collect follows next cursors from path (which has a query string) and
// returns the ids in page order and the page sizes.
func (v *env) collect(path string) (ids []string, sizes []int) {
	v.t.Helper()
	after := ""
	for range 100 {
		var p pageOut
		u := path
		if after != "" {
			u += "&after=" + url.QueryEscape(after)
		}
		v.mustJSON(v.do("GET", u, "carol", ""), 200, &p)
		sizes = append(sizes, len(p.Docs))
		for _, d := range p.Docs {
			ids = append(ids, d["_id"].(string))
		}
		if p.Next == "" {
			return ids, sizes
		}
		after = p.Next
	}
	v.t.Fatal("pagination never ends")
	return nil, nil
}

func TestQueryPagination(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	for i := range 25 {
		v.put("alice", "jobs", fmt.Sprintf("job-%02d", i), fmt.Sprintf(`{"status":"pending","n":%d}`, i))
	}
	for i := range 3 {
		v.put("alice", "jobs", fmt.Sprintf("run-%d", i), `{"status":"running","n":"3"}`)
	}

	ids, sizes := v.collect("/v1/apps/alice/jobs/dbs/jobs/query?field=status&key=" + url.QueryEscape(`"pending"`) + "&limit=10")
	if fmt.Sprint(sizes) != "[10 10 5]" {
		t.Errorf("page sizes %v", sizes)
	}
	if len(ids) != 25 {
		t.Fatalf("got %d ids", len(ids))
	}
	for i, id := range ids {
		if want := fmt.Sprintf("job-%02d", i); id != want {
			t.Errorf("ids[%d] = %s, want %s (no skips, no repeats, by id)", i, id, want)
		}
	}

	// key is JSON: the number 3 and the string "3" are different keys.
	var p pageOut
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/query?field=n&key=3", "carol", ""), 200, &p)
	if len(p.Docs) != 1 || p.Docs[0]["_id"] != "job-03" || p.Next != "" {
		t.Errorf("n=3: %+v", p)
	}
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/query?field=n&key="+url.QueryEscape(`"3"`), "carol", ""), 200, &p)
	if len(p.Docs) != 3 {
		t.Errorf(`n="3": %+v`, p)
	}
	// A moved document leaves the result.
	v.put("alice", "jobs", "run-0", `{"status":"done"}`)
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/query?field=status&key=%22running%22", "carol", ""), 200, &p)
	if len(p.Docs) != 2 || p.Docs[0]["_id"] != "run-1" {
		t.Errorf("running after a move: %+v", p)
	}

	q := "/v1/apps/alice/jobs/dbs/jobs/query?field=status&key=%22pending%22"
	for name, suffix := range map[string]string{
		"bad cursor":      "&after=not-a-cursor!",
		"limit not int":   "&limit=ten",
		"limit too large": "&limit=5000",
		"limit negative":  "&limit=-1",
		"limit zero":      "&limit=0",
	} {
		t.Run(name, func(t *testing.T) { v.mustError(v.do("GET", q+suffix, "carol", ""), 400, "invalid") })
	}
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/query?field=status", "carol", ""), 400, "invalid")
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/query?key=1", "carol", ""), 400, "invalid")
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/query?field=status&key=running", "carol", ""), 400, "invalid")
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/query?field=bad%20field&key=1", "carol", ""), 400, "invalid")
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/query?field=status&key=1", "dave", ""), 403, "forbidden")
	v.mustError(v.do("GET", "/v1/apps/alice/nope/dbs/jobs/query?field=status&key=1", "alice", ""), 404, "not_found")
}

func TestScan(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	for i := range 7 {
		v.put("alice", "jobs", fmt.Sprintf("d%d", i), `{}`)
	}
	v.mustJSON(v.do("DELETE", docPath("alice/jobs", "jobs", "d3"), "alice", ""), 200, nil)
	ids, sizes := v.collect("/v1/apps/alice/jobs/dbs/jobs/docs?limit=3")
	if fmt.Sprint(ids) != "[d0 d1 d2 d4 d5 d6]" || fmt.Sprint(sizes) != "[3 3]" {
		t.Errorf("scan ids %v sizes %v", ids, sizes)
	}
	var p pageOut
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/dbs/empty/docs", "alice", ""), 200, &p)
	if p.Docs == nil || len(p.Docs) != 0 || p.Next != "" {
		t.Errorf("empty scan = %+v", p)
	}
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/docs?after=%%%", "alice", ""), 400, "invalid")
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/docs?after=Zm9v", "alice", ""), 400, "invalid")
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/docs?limit=1.5", "alice", ""), 400, "invalid")
}

func TestChangesAndDatabases(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	a := v.put("alice", "jobs", "c1", `{"n":1}`)
	b := v.put("alice", "logs", "l1", `{"n":2}`)
	c := v.put("bob", "jobs", "c1", `{"n":3}`)

	type changesOut struct {
		Changes []struct {
			Seq    int64
			ID, DB string
			Rev    string
			Doc    map[string]any
			Writer struct{ User string }
		}
		Last int64
	}
	var all changesOut
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/changes", "carol", ""), 200, &all)
	if len(all.Changes) != 3 || all.Last != c.Seq {
		t.Fatalf("app changes = %+v", all)
	}
	for i, want := range []writeOut{a, b, c} {
		got := all.Changes[i]
		if got.Seq != want.Seq || got.Rev != want.Rev || got.ID != want.ID || got.Doc["_rev"] != want.Rev {
			t.Errorf("changes[%d] = %+v, want %+v", i, got, want)
		}
	}
	if all.Changes[2].Writer.User != "bob" || all.Changes[1].DB != "logs" {
		t.Errorf("changes carry the wrong writer or db: %+v", all.Changes)
	}

	var jobs changesOut
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/changes?since="+strconv.FormatInt(a.Seq, 10), "carol", ""), 200, &jobs)
	if len(jobs.Changes) != 1 || jobs.Changes[0].Seq != c.Seq || jobs.Last != c.Seq {
		t.Errorf("jobs changes since %d = %+v", a.Seq, jobs)
	}
	var page changesOut
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/changes?limit=2", "carol", ""), 200, &page)
	if len(page.Changes) != 2 || page.Last != b.Seq {
		t.Errorf("limited page = %+v", page)
	}
	var none changesOut
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/changes?since="+strconv.FormatInt(c.Seq, 10), "carol", ""), 200, &none)
	if len(none.Changes) != 0 || none.Last != c.Seq {
		t.Errorf("caught-up page = %+v", none)
	}
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/changes?since=abc", "carol", ""), 400, "invalid")
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/changes?since=-1", "carol", ""), 400, "invalid")
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/changes?limit=x", "carol", ""), 400, "invalid")
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/changes", "dave", ""), 403, "forbidden")
	v.mustError(v.do("GET", "/v1/apps/alice/nope/changes", "alice", ""), 404, "not_found")

	var dbs struct{ DBs []string }
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/dbs", "carol", ""), 200, &dbs)
	if fmt.Sprint(dbs.DBs) != "[jobs logs]" {
		t.Errorf("dbs = %v", dbs.DBs)
	}
	v.mustJSON(v.do("GET", "/v1/apps/alice/pub/dbs", "", ""), 200, &dbs)
	if dbs.DBs == nil || len(dbs.DBs) != 0 {
		t.Errorf("empty app dbs = %#v", dbs.DBs)
	}
	v.mustError(v.do("GET", "/v1/apps/alice/jobs/dbs", "dave", ""), 403, "forbidden")
}
