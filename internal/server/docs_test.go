package server

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPutGetDelete(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	w1 := v.put("alice", "jobs", "j1", `{"status":"pending","n":1}`)
	if !strings.HasPrefix(w1.Rev, "1-") {
		t.Errorf("first rev %q", w1.Rev)
	}
	var doc map[string]any
	v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", "j1"), "carol", ""), 200, &doc)
	if doc["_id"] != "j1" || doc["_rev"] != w1.Rev || doc["status"] != "pending" || doc["n"] != 1.0 {
		t.Errorf("get = %v", doc)
	}

	// Compare-and-set: the current rev wins, a stale one conflicts.
	var w2 writeOut
	v.mustJSON(v.do("PUT", docPath("alice/jobs", "jobs", "j1")+"?ifRev="+w1.Rev, "bob", `{"status":"running"}`), 200, &w2)
	if !strings.HasPrefix(w2.Rev, "2-") || w2.Seq <= w1.Seq {
		t.Errorf("second write %+v after %+v", w2, w1)
	}
	v.mustError(v.do("PUT", docPath("alice/jobs", "jobs", "j1")+"?ifRev="+w1.Rev, "bob", `{"status":"done"}`), 409, "conflict")
	v.mustError(v.do("PUT", docPath("alice/jobs", "jobs", "missing")+"?ifRev=1-abc", "bob", `{}`), 409, "conflict")
	v.mustError(v.do("DELETE", docPath("alice/jobs", "jobs", "j1")+"?ifRev="+w1.Rev, "bob", ""), 409, "conflict")

	// A _rev in the body is ignored: handlers spread documents they read.
	w3 := v.put("alice", "jobs", "j1", `{"_rev":"9-bogus","_id":"j1","status":"done"}`)

	var del writeOut
	v.mustJSON(v.do("DELETE", docPath("alice/jobs", "jobs", "j1")+"?ifRev="+w3.Rev, "bob", ""), 200, &del)
	if !del.OK || del.ID != "j1" || !strings.HasPrefix(del.Rev, "4-") || del.Seq <= w3.Seq {
		t.Errorf("delete = %+v", del)
	}
	v.mustError(v.do("GET", docPath("alice/jobs", "jobs", "j1"), "alice", ""), 404, "not_found")
	v.mustError(v.do("DELETE", docPath("alice/jobs", "jobs", "j1"), "alice", ""), 404, "not_found")

	// The ledger keeps every revision, oldest first, tombstone included.
	var h struct {
		History []struct {
			Seq     int64
			Rev     string
			Deleted bool
			Doc     map[string]any
			Writer  struct{ User string }
			Path    string
		}
	}
	v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", "j1")+"/history", "carol", ""), 200, &h)
	wantRevs := []string{w1.Rev, w2.Rev, w3.Rev, del.Rev}
	wantUsers := []string{"alice", "bob", "alice", "bob"}
	if len(h.History) != 4 {
		t.Fatalf("history has %d entries: %+v", len(h.History), h.History)
	}
	for i, e := range h.History {
		if e.Rev != wantRevs[i] || e.Writer.User != wantUsers[i] || e.Path != "http" {
			t.Errorf("history[%d] = %+v, want rev %s by %s", i, e, wantRevs[i], wantUsers[i])
		}
		if i > 0 && e.Seq <= h.History[i-1].Seq {
			t.Errorf("history not in commit order: %+v", h.History)
		}
	}
	if !h.History[3].Deleted || h.History[3].Doc["_deleted"] != true || h.History[1].Doc["status"] != "running" {
		t.Errorf("history docs: %+v", h.History)
	}

	// Writing a deleted document again revives it.
	v.put("alice", "jobs", "j1", `{"status":"pending"}`)
	v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", "j1"), "alice", ""), 200, nil)
}

func TestPostDoc(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	var w writeOut
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/dbs/jobs/docs", "alice", `{"_id":"from-body","x":1}`), 200, &w)
	if !w.OK || w.ID != "from-body" {
		t.Errorf("post with _id = %+v", w)
	}
	var m1, m2 writeOut
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/dbs/jobs/docs", "alice", `{"x":1}`), 200, &m1)
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/dbs/jobs/docs", "alice", `{"x":2}`), 200, &m2)
	if m1.ID == "" || m2.ID == "" || m1.ID == m2.ID {
		t.Errorf("minted ids %q %q", m1.ID, m2.ID)
	}
	var doc map[string]any
	v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", m2.ID), "alice", ""), 200, &doc)
	if doc["x"] != 2.0 {
		t.Errorf("minted doc = %v", doc)
	}
	var again writeOut
	v.mustJSON(v.do("POST", "/v1/apps/alice/jobs/dbs/jobs/docs?ifAbsent=true", "alice", `{"_id":"from-body","x":9}`), 200, &again)
	if !again.Existing || again.Rev != w.Rev {
		t.Errorf("ifAbsent post = %+v, want existing %s", again, w.Rev)
	}
	v.mustError(v.do("POST", "/v1/apps/alice/jobs/dbs/jobs/docs?ifRev=1-x", "alice", `{"x":1}`), 400, "invalid")
	// The path id and the body's _id must agree.
	v.mustError(v.do("PUT", docPath("alice/jobs", "jobs", "a"), "alice", `{"_id":"b"}`), 400, "invalid")
}

func TestIfAbsent(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	var first, second writeOut
	v.mustJSON(v.do("PUT", docPath("alice/jobs", "inbox", "evt-1")+"?ifAbsent=true", "alice", `{"n":1}`), 200, &first)
	if first.Existing || first.Seq == 0 {
		t.Errorf("first ingest = %+v", first)
	}
	v.mustJSON(v.do("PUT", docPath("alice/jobs", "inbox", "evt-1")+"?ifAbsent=true", "alice", `{"n":2}`), 200, &second)
	if !second.Existing || second.Rev != first.Rev || second.ID != "evt-1" {
		t.Errorf("re-ingest = %+v, want existing rev %s", second, first.Rev)
	}
	var doc map[string]any
	v.mustJSON(v.do("GET", docPath("alice/jobs", "inbox", "evt-1"), "alice", ""), 200, &doc)
	if doc["n"] != 1.0 {
		t.Errorf("re-ingest changed the doc: %v", doc)
	}
	v.mustError(v.do("PUT", docPath("alice/jobs", "inbox", "evt-1")+"?ifAbsent=maybe", "alice", `{}`), 400, "invalid")
	v.mustError(v.do("PUT", docPath("alice/jobs", "inbox", "evt-1")+"?ifAbsent=true&ifRev="+first.Rev, "alice", `{}`), 400, "invalid")
}

// TestWriteQueryGuards: a write whose compare-and-set was lost on the way
// (an empty ifRev, a misspelt parameter) is refused and changes nothing;
// so is ifAbsent without an id, which could never be a no-op.
func TestWriteQueryGuards(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	p := docPath("alice/jobs", "inbox", "g1")
	var w writeOut
	v.mustJSON(v.do("PUT", p, "alice", `{"n":1}`), 200, &w)
	for _, q := range []string{"?ifRev=", "?if_rev=" + w.Rev, "?ifrev=" + w.Rev, "?ifabsent=true", "?ifRev=" + w.Rev + "&force=1"} {
		e := v.mustError(v.do("PUT", p+q, "alice", `{"n":2}`), 400, "invalid")
		if !strings.Contains(e.Message, "ifRev") {
			t.Errorf("PUT %s: %q does not name ifRev", q, e.Message)
		}
		v.mustError(v.do("DELETE", p+q, "alice", ""), 400, "invalid")
	}
	var doc map[string]any
	v.mustJSON(v.do("GET", p, "alice", ""), 200, &doc)
	if doc["n"] != 1.0 || doc["_rev"] != w.Rev {
		t.Fatalf("a refused write changed the document: %v", doc)
	}
	v.mustError(v.do("POST", "/v1/apps/alice/jobs/dbs/inbox/docs?ifAbsent=true", "alice", `{"n":1}`), 400, "invalid")
	// With the right parameters the same writes go through.
	v.mustJSON(v.do("PUT", p+"?ifRev="+w.Rev, "alice", `{"n":2}`), 200, &w)
	v.mustJSON(v.do("DELETE", p+"?ifRev="+w.Rev, "alice", ""), 200, &w)
}

func TestWriteErrors(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	p := docPath("alice/jobs", "jobs", "w1")
	e := v.mustError(v.do("PUT", p, "dave", `{"x":1}`), 403, "forbidden")
	if e.Reason == "" {
		t.Errorf("forbidden without reason: %+v", e)
	}
	v.mustError(v.do("PUT", p, "carol", `{"x":1}`), 403, "forbidden")
	v.mustError(v.do("DELETE", p, "carol", ""), 403, "forbidden")
	v.mustError(v.do("PUT", p, "", `{"x":1}`), 401, "unauthorized")
	v.mustError(v.do("PUT", docPath("alice/nope", "jobs", "w1"), "alice", `{"x":1}`), 404, "not_found")
	v.mustError(v.do("GET", docPath("alice/nope", "jobs", "w1"), "alice", ""), 404, "not_found")
	v.mustError(v.do("GET", docPath("alice/jobs", "jobs", "never"), "alice", ""), 404, "not_found")
	v.mustError(v.do("GET", docPath("alice/jobs", "jobs", "never")+"/history", "alice", ""), 404, "not_found")
	v.mustError(v.do("GET", p, "dave", ""), 403, "forbidden")

	for name, body := range map[string]string{
		"reserved field":              `{"_x":1}`,
		"malformed":                   `{"x":`,
		"not an object":               `[1,2]`,
		"trailing data":               `{"x":1} {"y":2}`,
		"empty":                       ``,
		"bad _id":                     `{"_id":5}`,
		"invalid UTF-8":               "{\"a\":\"\xff\"}",
		"field twice":                 `{"a":1,"b":2,"a":3}`,
		"same field, escaped and not": `{"\u00e9":1,"é":2}`,
	} {
		t.Run(name, func(t *testing.T) {
			v.mustError(v.do("PUT", p, "alice", body), 400, "invalid")
		})
	}
	v.mustError(v.do("PUT", docPath("alice/jobs", "bad db!", "w1"), "alice", `{}`), 400, "invalid")
	v.mustError(v.do("PUT", docPath("alice/jobs", "jobs", "_reserved"), "alice", `{}`), 400, "invalid")
	v.mustError(v.do("PUT", docPath("alice/jobs", "jobs", strings.Repeat("x", 513)), "alice", `{}`), 400, "invalid")
}

func TestDocumentSizeLimit(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	max := v.e.MaxDocBytes()
	doc := func(size int) string {
		const frame = `{"pad":""}`
		return `{"pad":"` + strings.Repeat("a", size-len(frame)) + `"}`
	}
	v.put("alice", "jobs", "at-limit", doc(max))
	v.mustError(v.do("PUT", docPath("alice/jobs", "jobs", "over"), "alice", doc(max+1)), 413, "too_large")
	v.mustError(v.do("POST", "/v1/apps/alice/jobs/dbs/jobs/docs", "alice", doc(4*max)), 413, "too_large")
	v.mustError(v.do("GET", docPath("alice/jobs", "jobs", "over"), "alice", ""), 404, "not_found")
}

func TestIDsRoundTrip(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	ids := []string{"a/b", "a/b/../c", "ünïcødé ✓ 文档", "100% sure?", "space and #hash&amp=1", ".", "..", "with%2Fescaped", "emoji 🚀"}
	for _, id := range ids {
		w := v.put("alice", "jobs", id, `{"k":"v"}`)
		var doc map[string]any
		v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", id), "alice", ""), 200, &doc)
		if doc["_id"] != id || doc["_rev"] != w.Rev {
			t.Errorf("id %q came back as %v", id, doc)
		}
		var h struct{ History []struct{ ID string } }
		v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", id)+"/history", "alice", ""), 200, &h)
		if len(h.History) != 1 || h.History[0].ID != id {
			t.Errorf("history of %q = %+v", id, h)
		}
	}
	var page struct{ Docs []map[string]any }
	v.mustJSON(v.do("GET", "/v1/apps/alice/jobs/dbs/jobs/docs", "alice", ""), 200, &page)
	seen := map[string]bool{}
	for _, d := range page.Docs {
		seen[d["_id"].(string)] = true
	}
	for _, id := range ids {
		if !seen[id] {
			t.Errorf("scan lacks %q", id)
		}
	}
	// Deleting by an escaped id hits the same document.
	v.mustJSON(v.do("DELETE", docPath("alice/jobs", "jobs", "a/b"), "alice", ""), 200, nil)
	v.mustError(v.do("GET", docPath("alice/jobs", "jobs", "a/b"), "alice", ""), 404, "not_found")
	v.mustJSON(v.do("GET", docPath("alice/jobs", "jobs", "a/b/../c"), "alice", ""), 200, nil)
}

func TestClientPathHeader(t *testing.T) {
	t.Parallel()
	v := newEnv(t)
	p := docPath("alice/jobs", "jobs", "p1")
	v.mustJSON(v.do("PUT", p, "alice", `{"n":1}`, "X-Handoff-Path", "cli"), 200, nil)
	v.mustJSON(v.do("PUT", p, "alice", `{"n":2}`, "X-Handoff-Path", "import"), 200, nil)
	// A client cannot pass itself off as a backend handler.
	v.mustJSON(v.do("PUT", p, "alice", `{"n":3}`, "X-Handoff-Path", "onChange"), 200, nil)
	v.mustJSON(v.do("PUT", p, "alice", `{"n":4}`), 200, nil)
	var h struct {
		History []struct {
			Path   string
			Writer map[string]string
		}
	}
	v.mustJSON(v.do("GET", p+"/history", "alice", ""), 200, &h)
	want := []string{"cli", "import", "http", "http"}
	for i, e := range h.History {
		if e.Path != want[i] || e.Writer["handler"] != "" {
			b, _ := json.Marshal(h)
			t.Fatalf("paths = %s, want %v", b, want)
		}
	}
}
