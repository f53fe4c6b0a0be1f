package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

func (e *env) queryIDs(app, db, field, key string) []string {
	e.t.Helper()
	p, err := e.eng.Query(e.ctx, alice, app, db, field, json.RawMessage(key), 0, "")
	if err != nil {
		e.t.Fatalf("Query(%s = %s): %v", field, key, err)
	}
	if p.Next != "" {
		e.t.Fatalf("Query(%s = %s) has a next page", field, key)
	}
	return pageIDs(e.t, p)
}

func testEngineQueryValues(t *testing.T, e *env) {
	e.fixture()
	bodies := map[string]string{}
	for id, b := range queryCorpus {
		// Clients send any spacing and key order.
		bodies[id] = strings.ReplaceAll(strings.ReplaceAll(b, `":`, `" : `), `,"`, ` , "`)
	}
	e.putAll(appJobs, "jobs", bodies)
	for _, c := range queryCases {
		wantIDs(t, e.queryIDs(appJobs, "jobs", c.field, c.key), c.want, fmt.Sprintf("Query(%s = %s)", c.field, c.key))
	}
	// The key may carry spaces around it.
	wantIDs(t, e.queryIDs(appJobs, "jobs", "status", ` "pending" `), []string{"s1", "s3"}, "Query with a spaced key")
	// Query answers full documents.
	p, err := e.eng.Query(e.ctx, alice, appJobs, "jobs", "a.b.c", json.RawMessage(`"deep"`), 0, "")
	if err != nil || len(p.Docs) != 1 {
		t.Fatalf("Query(a.b.c) = %v, %v", p, err)
	}
	d := decodeObject(t, p.Docs[0])
	if d["_id"] != "ne1" || d["_rev"] == nil || d["v"] != "x" {
		t.Fatalf("Query doc = %v", d)
	}
}

func testEngineQueryScope(t *testing.T, e *env) {
	e.fixture()
	e.putAll(appJobs, "jobs", map[string]string{"a1": `{"status":"pending"}`, "a2": `{"status":"pending"}`, "a3": `{"status":"pending"}`})
	e.putAll(appJobs, "other", map[string]string{"o1": `{"status":"pending"}`})
	e.putAll(appOther, "jobs", map[string]string{"b1": `{"status":"pending"}`})
	e.del(alice, appJobs, "jobs", "a2", "")
	e.put(alice, appJobs, "jobs", "a3", `{"status":"running"}`, appcode.PutOptions{})
	wantIDs(t, e.queryIDs(appJobs, "jobs", "status", `"pending"`), []string{"a1"}, "Query(pending)")
	wantIDs(t, e.queryIDs(appJobs, "jobs", "status", `"running"`), []string{"a3"}, "Query(running)")
	wantIDs(t, e.queryIDs(appJobs, "other", "status", `"pending"`), []string{"o1"}, "Query(other db)")
	wantIDs(t, e.queryIDs(appOther, "jobs", "status", `"pending"`), []string{"b1"}, "Query(other app)")
	wantIDs(t, e.queryIDs(appJobs, "nodb", "status", `"pending"`), nil, "Query(unknown db)")
	e.put(alice, appJobs, "jobs", "a2", `{"status":"pending"}`, appcode.PutOptions{})
	wantIDs(t, e.queryIDs(appJobs, "jobs", "status", `"pending"`), []string{"a1", "a2"}, "Query after resurrection")
}

// pageAll follows the cursors of a query (field != "") or scan to the
// end, and checks each page.
func (e *env) pageAll(field, key string, limit int, between func()) []string {
	e.t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		var p appcode.Page
		var err error
		if field == "" {
			p, err = e.eng.Scan(e.ctx, alice, appJobs, "jobs", limit, cursor)
		} else {
			p, err = e.eng.Query(e.ctx, alice, appJobs, "jobs", field, json.RawMessage(key), limit, cursor)
		}
		if err != nil {
			e.t.Fatalf("page %d: %v", pages, err)
		}
		if len(p.Docs) > limit || (p.Next != "" && len(p.Docs) != limit) || (len(p.Docs) == 0 && pages > 0) {
			e.t.Fatalf("page %d has %d docs with limit %d and next %q", pages, len(p.Docs), limit, p.Next)
		}
		for _, raw := range p.Docs {
			d := decodeObject(e.t, raw)
			if field != "" && fmt.Sprint(d[field]) != strings.Trim(key, `"`) {
				e.t.Fatalf("page %d has a doc that does not match: %v", pages, d)
			}
			ids = append(ids, d["_id"].(string))
		}
		if p.Next == "" {
			return ids
		}
		if pages > 1000 {
			e.t.Fatal("pagination does not end")
		}
		cursor = p.Next
		if between != nil {
			between()
		}
	}
}

func testEngineQueryPagination(t *testing.T, e *env) {
	e.fixture()
	bodies := map[string]string{}
	var want []string
	for i := range 310 {
		id := fmt.Sprintf("doc%04d", i)
		if i%31 == 30 {
			bodies[id] = `{"status":"done"}`
			continue
		}
		bodies[id] = fmt.Sprintf(`{"status":"pending","i":%d}`, i)
		want = append(want, id)
	}
	e.putAll(appJobs, "jobs", bodies)
	e.del(alice, appJobs, "jobs", want[100], "")
	want = slices.Delete(want, 100, 101)
	e.put(alice, appJobs, "jobs", "extra-beyond", `{"status":"pending"}`, appcode.PutOptions{})
	want = append(want, "extra-beyond")
	if len(want) != 300 {
		t.Fatalf("corpus has %d matching docs", len(want))
	}
	wantIDs(t, e.pageAll("status", `"pending"`, 7, nil), want, "paged Query, limit 7")
	wantIDs(t, e.pageAll("status", `"pending"`, 300, nil), want, "paged Query, limit = count")
	wantIDs(t, e.pageAll("status", `"pending"`, 1000, nil), want, "paged Query, limit 1000")
}

func testEngineScanPagination(t *testing.T, e *env) {
	e.fixture()
	bodies := map[string]string{}
	var want []string
	for i := range 250 {
		id := fmt.Sprintf("doc%04d", (i*37)%250)
		bodies[id] = fmt.Sprintf(`{"i":%d}`, i)
		want = append(want, id)
	}
	slices.Sort(want)
	e.putAll(appJobs, "jobs", bodies)
	e.putAll(appJobs, "elsewhere", map[string]string{"doc0001x": `{}`})
	wantIDs(t, e.pageAll("", "", 7, nil), want, "paged Scan, limit 7")
}

func testEngineChanges(t *testing.T, e *env) {
	e.fixture()
	type rec struct{ db, id string }
	var all []rec
	var written []int64 // the seq each write returned
	for i := range 14 {
		db := []string{"jobs", "logs"}[i%2]
		id := fmt.Sprint("d", i%5)
		var r appcode.WriteResult
		if i == 11 {
			r = e.del(alice, appJobs, db, id, "")
		} else {
			r = e.put(alice, appJobs, db, id, fmt.Sprintf(`{"i":%d}`, i), appcode.PutOptions{})
		}
		all, written = append(all, rec{db, id}), append(written, r.Seq)
		e.put(alice, appOther, db, id, `{}`, appcode.PutOptions{})
	}
	changes := func(db string, since int64, limit int) engine.Changes {
		t.Helper()
		c, err := e.eng.Changes(e.ctx, alice, appJobs, db, since, limit)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := changes("", 0, 0)
	if len(c.Changes) != len(all) || c.Last != written[len(written)-1] {
		t.Fatalf("Changes(all) has %d entries, last %d; want %d", len(c.Changes), c.Last, len(all))
	}
	for i, ch := range c.Changes {
		if ch.Seq != written[i] || ch.DB != all[i].db || ch.ID != all[i].id || ch.Deleted != (i == 11) || ch.Writer.User != "alice" {
			t.Fatalf("change %d = %+v, want %+v at seq %d", i, ch, all[i], written[i])
		}
		d := decodeObject(t, ch.Doc)
		if d["_id"] != ch.ID || d["_rev"] != ch.Rev || (i != 11 && d["i"] != json.Number(fmt.Sprint(i))) {
			t.Fatalf("change %d doc = %v", i, d)
		}
	}
	jobs := changes("jobs", 0, 0)
	if len(jobs.Changes) != 7 {
		t.Fatalf("Changes(jobs) has %d entries, want 7", len(jobs.Changes))
	}
	for i, ch := range jobs.Changes {
		if ch.DB != "jobs" || ch.Seq != written[2*i] {
			t.Fatalf("Changes(jobs)[%d] = %+v", i, ch)
		}
	}
	if c := changes("", 0, 4); len(c.Changes) != 4 || c.Last != written[3] {
		t.Fatalf("Changes(limit 4) = %d entries, last %d", len(c.Changes), c.Last)
	}
	if c := changes("", written[3], 0); len(c.Changes) != 10 || c.Changes[0].Seq != written[4] || c.Last != written[13] {
		t.Fatalf("Changes(since the 4th) = %d entries, last %d", len(c.Changes), c.Last)
	}
	if c := changes("", written[13], 0); len(c.Changes) != 0 || c.Last != written[13] {
		t.Fatalf("Changes(since last) = %+v", c)
	}
	for _, db := range []string{"", "logs"} {
		var seqs []int64
		since := int64(0)
		for range 100 {
			c := changes(db, since, 3)
			if len(c.Changes) == 0 {
				break
			}
			for _, ch := range c.Changes {
				seqs = append(seqs, ch.Seq)
			}
			since = c.Last
		}
		var want []int64
		for i, r := range all {
			if db == "" || r.db == db {
				want = append(want, written[i])
			}
		}
		if !slices.Equal(seqs, want) {
			t.Fatalf("Changes(%q) resumed by 3 gave seqs %v, want %v", db, seqs, want)
		}
	}
}
