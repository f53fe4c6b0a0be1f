package server

import (
	"fmt"
	"strings"
	"testing"
)

type bulkOut struct {
	Results []struct {
		OK       bool
		ID       string
		Rev      string
		Existing bool
		Error    *apiError
	}
}

func TestBulkMixed(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	old := v.put("alice", "jobs", "old", `{"v":1}`)
	body := `{"ifAbsent":true,"docs":[
		{"_id":"b1","status":"pending"},
		{"_id":"b2","_secret":1},
		[1,2],
		{"_id":"old","v":2},
		{"status":"minted"},
		{"_id":"_bad"},
		{"_id":"b3","status":"pending"}
	]}`
	var out bulkOut
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/dbs/jobs/bulk", "bob", body, "X-Handoff-Path", "import"), 200, &out)
	r := out.Results
	if len(r) != 7 {
		t.Fatalf("results = %+v", out)
	}
	if !r[0].OK || r[0].ID != "b1" || r[0].Rev == "" {
		t.Errorf("b1: %+v", r[0])
	}
	if r[1].OK || r[1].ID != "b2" || r[1].Error == nil || r[1].Error.Code != "invalid" {
		t.Errorf("reserved field: %+v", r[1])
	}
	if r[2].OK || r[2].Error == nil || r[2].Error.Code != "invalid" {
		t.Errorf("array: %+v", r[2])
	}
	if !r[3].OK || !r[3].Existing || r[3].Rev != old.Rev {
		t.Errorf("ifAbsent re-put: %+v, want existing %s", r[3], old.Rev)
	}
	// With ifAbsent a document needs an _id: a minted one is new each
	// time, so a re-sent import would write it again.
	if r[4].OK || r[4].Error == nil || r[4].Error.Code != "invalid" {
		t.Errorf("no _id with ifAbsent: %+v", r[4])
	}
	if r[5].OK || r[5].Error == nil || r[5].Error.Code != "invalid" {
		t.Errorf("bad id: %+v", r[5])
	}
	if !r[6].OK || r[6].ID != "b3" {
		t.Errorf("b3: %+v", r[6])
	}
	var h struct{ History []struct{ Path string } }
	v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", "b3")+"/history", "alice", ""), 200, &h)
	if len(h.History) != 1 || h.History[0].Path != "import" {
		t.Errorf("bulk write history = %+v", h)
	}
	var doc map[string]any
	v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", "old"), "alice", ""), 200, &doc)
	if doc["v"] != 1.0 {
		t.Errorf("ifAbsent bulk overwrote: %v", doc)
	}
}

func TestBulkManyInOrder(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	var b strings.Builder
	b.WriteString(`{"docs":[`)
	const n = 300
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"_id":"k%03d","i":%d}`, n-1-i, i)
	}
	b.WriteString(`]}`)
	var out bulkOut
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/dbs/jobs/bulk", "alice", b.String()), 200, &out)
	if len(out.Results) != n {
		t.Fatalf("%d results", len(out.Results))
	}
	for i, r := range out.Results {
		if want := fmt.Sprintf("k%03d", n-1-i); !r.OK || r.ID != want {
			t.Fatalf("results[%d] = %+v, want %s", i, r, want)
		}
	}
	ids, _ := v.collect("/v1/apps/alice/jobs/dbs/jobs/docs?limit=1000")
	if len(ids) != n {
		t.Errorf("scan finds %d docs, want %d", len(ids), n)
	}
}

func TestBulkErrors(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	p := "/v1/apps/alice/jobs/dbs/jobs/bulk"
	v.mustError(v.do("POST", p, "alice", `{"docs":[{"a":1}`), 400, "invalid")
	v.mustError(v.do("POST", p, "alice", `{"docs":{"a":1}}`), 400, "invalid")
	v.mustError(v.do("POST", p, "alice", `{}`), 400, "invalid")
	v.mustError(v.do("POST", p, "alice", `{"docs":[],"ifRev":"1-x"}`), 400, "invalid")
	v.mustError(v.do("POST", p, "alice", `{"docs":[`+strings.Repeat(`{},`, 1000)+`{}]}`), 400, "invalid")
	v.mustError(v.do("POST", "/v1/apps/alice/nope/dbs/jobs/bulk", "alice", `{"docs":[{"a":1},{"b":2}]}`), 404, "not_found")
	v.mustError(v.do("POST", "/v1/apps/alice/jobs/dbs/bad!db/bulk", "alice", `{"docs":[{"a":1}]}`), 400, "invalid")
	v.mustError(v.do("POST", p, "", `{"docs":[{"a":1}]}`), 401, "unauthorized")

	var out bulkOut
	v.mustJSON(v.do("POST", p, "alice", `{"docs":[]}`), 200, &out)
	if out.Results == nil || len(out.Results) != 0 {
		t.Errorf("empty bulk = %+v", out)
	}
	v.mustJSON(v.do("POST", p, "carol", `{"docs":[{"_id":"x"},{"_id":"y"}]}`), 200, &out)
	for _, r := range out.Results {
		if r.OK || r.Error == nil || r.Error.Code != "forbidden" || r.Error.Reason == "" {
			t.Errorf("viewer bulk result %+v", r)
		}
	}
	// A document over the size limit fails alone.
	big := `{"_id":"big","pad":"` + strings.Repeat("a", v.e.MaxDocBytes()) + `"}`
	v.mustJSON(v.do("POST", p, "alice", `{"docs":[{"_id":"small"},`+big+`]}`), 200, &out)
	if !out.Results[0].OK || out.Results[1].OK || out.Results[1].ID != "big" || out.Results[1].Error.Code != "too_large" {
		t.Errorf("oversized doc in bulk: %+v", out.Results)
	}
}

// TestDocumentValuesOverHTTP: a put, each document of a bulk write and a
// query key are held to the same rules on numbers and strings, and a
// refusal is invalid, saying where.
func TestDocumentValuesOverHTTP(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	e := v.mustError(v.do("PUT", docPath("alice/jobs", "jobs", "n"), "alice", `{"input":{"n":1e999999}}`), 400, "invalid")
	if !strings.Contains(e.Message, "document value at .input.n (byte 14)") {
		t.Errorf("put: %s", e.Message)
	}
	body := `{"docs":[{"_id":"ok","n":5e-324},{"_id":"nul","s":"\u0000"},{"_id":"lone","\ud800":1},{"_id":"big","n":` + strings.Repeat("9", 200000) + `}]}`
	var out bulkOut
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/dbs/jobs/bulk", "alice", body), 200, &out)
	if r := out.Results; len(r) != 4 || !r[0].OK {
		t.Fatalf("bulk results = %+v", out)
	}
	for i, want := range []string{"", `document value at .s`, `document key at ["\ud800"]`, "200000 characters long"} {
		if i == 0 {
			continue
		}
		r := out.Results[i]
		if r.OK || r.Error == nil || r.Error.Code != "invalid" || !strings.Contains(r.Error.Message, want) {
			t.Errorf("bulk document %d: %+v, want invalid with %q", i, r, want)
		}
	}
	// A key beyond float64 was a storage error.
	e = v.mustError(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/query?field=v&key=1e999", "alice", ""), 400, "invalid")
	if !strings.Contains(e.Message, "1e999 is out of the range") {
		t.Errorf("query: %s", e.Message)
	}
}
