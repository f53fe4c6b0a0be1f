package storetest

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/auth"
	"github.com/handoff-run/handoff/engine"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
)

// engineTests check the engine's semantics on top of the store.
var engineTests = []test{
	{"PutGetDelete", testEnginePutGetDelete},
	{"IfRev", testEngineIfRev},
	{"IfAbsent", testEngineIfAbsent},
	{"TombstonesAndResurrection", testEngineTombstones},
	{"Ledger", testEngineLedger},
	{"SequencePerApp", testEngineSequence},
	{"QueryValues", testEngineQueryValues},
	{"QueryScope", testEngineQueryScope},
	{"QueryPagination", testEngineQueryPagination},
	{"QueryRanges", testEngineQueryRanges},
	{"QueryRangeText", testEngineQueryRangeText},
	{"QueryRangeInput", testEngineQueryRangeInput},
	{"ScanPagination", testEngineScanPagination},
	{"QueryPaginationUnderConcurrentWrites", testEngineQueryPaginationConcurrent},
	{"Changes", testEngineChanges},
	{"RacingIfRev", testEngineRacingIfRev},
	{"ConcurrentPutsWithoutIfRev", testEngineConcurrentPuts},
	{"DeepDocuments", testEngineDeepDocuments},
	{"DocumentValues", testEngineDocumentValues},
	{"NamesNoStoreHolds", testEngineNamesNoStoreHolds},
	{"Identity", testEngineIdentity},
	{"Reopen", testEngineReopen},
}

func testEnginePutGetDelete(t *testing.T, e *env) {
	e.fixture()
	r := e.put(alice, appJobs, "jobs", "j1", `{"status":"pending","n":1}`, appcode.PutOptions{})
	if r.ID != "j1" || gen(t, r.Rev) != 1 || r.Seq != 1 || r.Existing {
		t.Fatalf("first put = %+v", r)
	}
	got := e.doc(appJobs, "jobs", "j1")
	want := map[string]any{"_id": "j1", "_rev": r.Rev, "status": "pending", "n": json.Number("1")}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Get = %v, want %v", got, want)
	}

	// A put replaces the whole body; a _rev in the body is ignored.
	r2 := e.put(alice, appJobs, "jobs", "j1", `{"_rev":"99-ignored","_id":"j1","status":"running"}`, appcode.PutOptions{})
	if gen(t, r2.Rev) != 2 || r2.Rev == r.Rev || r2.Seq != 2 {
		t.Fatalf("second put = %+v", r2)
	}
	got = e.doc(appJobs, "jobs", "j1")
	if fmt.Sprint(got) != fmt.Sprint(map[string]any{"_id": "j1", "_rev": r2.Rev, "status": "running"}) {
		t.Fatalf("Get after replace = %v", got)
	}

	// Ids: from the request, from the body, or minted in time order.
	if r := e.put(alice, appJobs, "jobs", "", `{"_id":"from-body","x":1}`, appcode.PutOptions{}); r.ID != "from-body" {
		t.Fatalf("put with the body's _id got id %q", r.ID)
	}
	e.doc(appJobs, "jobs", "from-body")
	m1 := e.put(alice, appJobs, "jobs", "", `{"x":1}`, appcode.PutOptions{})
	e.tick()
	m2 := e.put(alice, appJobs, "jobs", "", `{"x":2}`, appcode.PutOptions{})
	if m1.ID == "" || m2.ID == "" || m1.ID >= m2.ID {
		t.Fatalf("minted ids %q, %q are not time-ordered", m1.ID, m2.ID)
	}
	if d := e.doc(appJobs, "jobs", m2.ID); d["x"] != json.Number("2") {
		t.Fatalf("minted doc = %v", d)
	}

	d := e.del(alice, appJobs, "jobs", "j1", "")
	if d.ID != "j1" || gen(t, d.Rev) != 3 || d.Seq == 0 {
		t.Fatalf("Delete = %+v", d)
	}
	_, err := e.eng.Get(e.ctx, alice, appJobs, "jobs", "j1")
	wantCode(t, err, errs.NotFound, "Get after delete")
	seq := e.seqOf(appJobs)
	_, err = e.eng.Delete(e.ctx, alice, appJobs, "jobs", "j1", "")
	wantCode(t, err, errs.NotFound, "Delete of a deleted doc")
	_, err = e.eng.Delete(e.ctx, alice, appJobs, "jobs", "never", "")
	wantCode(t, err, errs.NotFound, "Delete of a missing doc")
	_, err = e.eng.Get(e.ctx, alice, appJobs, "jobs", "never")
	wantCode(t, err, errs.NotFound, "Get of a missing doc")
	_, err = e.eng.History(e.ctx, alice, appJobs, "jobs", "never")
	wantCode(t, err, errs.NotFound, "History of a missing doc")
	if e.seqOf(appJobs) != seq {
		t.Fatal("a refused delete moved the sequence")
	}
}

func testEngineIfRev(t *testing.T, e *env) {
	e.fixture()
	r1 := e.put(alice, appJobs, "jobs", "j1", `{"status":"pending"}`, appcode.PutOptions{})
	r2 := e.put(alice, appJobs, "jobs", "j1", `{"status":"running"}`, appcode.PutOptions{IfRev: r1.Rev})
	if gen(t, r2.Rev) != 2 {
		t.Fatalf("put with ifRev = %+v", r2)
	}
	seq := e.seqOf(appJobs)
	refuse := func(what string, err error) {
		t.Helper()
		wantCode(t, err, errs.Conflict, what)
		if e.seqOf(appJobs) != seq {
			t.Fatalf("%s: the refused write moved the sequence", what)
		}
	}
	_, err := e.eng.Put(e.ctx, alice, appJobs, "jobs", "j1", []byte(`{"status":"stale"}`), appcode.PutOptions{IfRev: r1.Rev})
	refuse("put with a stale ifRev", err)
	_, err = e.eng.Put(e.ctx, alice, appJobs, "jobs", "j1", []byte(`{"status":"made up"}`), appcode.PutOptions{IfRev: "2-0000"})
	refuse("put with a made-up ifRev", err)
	if d := e.doc(appJobs, "jobs", "j1"); d["_rev"] != r2.Rev || d["status"] != "running" {
		t.Fatalf("conflicts changed the doc: %v", d)
	}
	_, err = e.eng.Put(e.ctx, alice, appJobs, "jobs", "missing", []byte(`{}`), appcode.PutOptions{IfRev: r1.Rev})
	refuse("put with ifRev on a missing doc", err)
	_, err = e.eng.Get(e.ctx, alice, appJobs, "jobs", "missing")
	wantCode(t, err, errs.NotFound, "the missing doc stays missing")
	_, err = e.eng.Put(e.ctx, alice, appJobs, "otherdb", "j1", []byte(`{}`), appcode.PutOptions{IfRev: r2.Rev})
	refuse("put with ifRev of the same id in another database", err)
	_, err = e.eng.Delete(e.ctx, alice, appJobs, "jobs", "j1", r1.Rev)
	refuse("delete with a stale ifRev", err)

	d := e.del(alice, appJobs, "jobs", "j1", r2.Rev)
	seq = e.seqOf(appJobs)
	_, err = e.eng.Put(e.ctx, alice, appJobs, "jobs", "j1", []byte(`{}`), appcode.PutOptions{IfRev: d.Rev})
	refuse("put with ifRev = the tombstone's rev", err)
	_, err = e.eng.Put(e.ctx, alice, appJobs, "jobs", "j1", []byte(`{}`), appcode.PutOptions{IfRev: r2.Rev})
	refuse("put with ifRev = the rev before the delete", err)
	_, err = e.eng.Delete(e.ctx, alice, appJobs, "jobs", "j1", d.Rev)
	refuse("delete of a tombstone with its rev", err)
	if h := e.hist(appJobs, "jobs", "j1"); len(h) != 3 {
		t.Fatalf("history has %d entries after conflicts, want 3", len(h))
	}
}

func testEngineIfAbsent(t *testing.T, e *env) {
	e.fixture()
	abs := appcode.PutOptions{IfAbsent: true}
	r1 := e.put(alice, appJobs, "jobs", "ing-1", `{"v":1}`, abs)
	if r1.Existing || gen(t, r1.Rev) != 1 || r1.Seq != 1 {
		t.Fatalf("first ifAbsent put = %+v", r1)
	}
	seq := e.seqOf(appJobs)
	again := e.put(alice, appJobs, "jobs", "ing-1", `{"v":2}`, abs)
	if !again.Existing || again.Rev != r1.Rev || again.ID != "ing-1" {
		t.Fatalf("re-put with ifAbsent = %+v; want the existing rev %s", again, r1.Rev)
	}
	if d := e.doc(appJobs, "jobs", "ing-1"); d["v"] != json.Number("1") || d["_rev"] != r1.Rev {
		t.Fatalf("ifAbsent re-put changed the doc: %v", d)
	}
	if e.seqOf(appJobs) != seq || len(e.hist(appJobs, "jobs", "ing-1")) != 1 {
		t.Fatal("an ifAbsent no-op wrote a revision")
	}
	// The same id in another database is absent.
	if r := e.put(alice, appJobs, "other", "ing-1", `{}`, abs); r.Existing {
		t.Fatalf("ifAbsent in another database = %+v", r)
	}
	// After a delete, ifAbsent creates again, and the generation counts on.
	e.del(alice, appJobs, "jobs", "ing-1", "")
	r3 := e.put(alice, appJobs, "jobs", "ing-1", `{"v":3}`, abs)
	if r3.Existing || gen(t, r3.Rev) != 3 {
		t.Fatalf("ifAbsent after delete = %+v; want a new revision at generation 3", r3)
	}
	if d := e.doc(appJobs, "jobs", "ing-1"); d["v"] != json.Number("3") {
		t.Fatalf("ifAbsent after delete: %v", d)
	}
	// Without an id it is refused: a minted id is new every time, so a
	// re-run would create again instead of being the promised no-op.
	seq = e.seqOf(appJobs)
	if _, err := e.eng.Put(e.ctx, alice, appJobs, "jobs", "", []byte(`{}`), abs); !errs.Is(err, errs.Invalid) {
		t.Fatalf("ifAbsent without an id: %v, want invalid", err)
	}
	if e.seqOf(appJobs) != seq {
		t.Fatal("a refused ifAbsent write wrote a revision")
	}
	// ifRev and ifAbsent together are refused on every path (API, CLI,
	// handlers): the write could only be a no-op or a conflict.
	both := appcode.PutOptions{IfAbsent: true, IfRev: r3.Rev}
	if _, err := e.eng.Put(e.ctx, alice, appJobs, "jobs", "ing-1", []byte(`{"v":4}`), both); !errs.Is(err, errs.Invalid) {
		t.Fatalf("ifRev with ifAbsent: %v, want invalid", err)
	}
}

func testEngineTombstones(t *testing.T, e *env) {
	e.fixture()
	var revs []string
	r := e.put(alice, appJobs, "jobs", "t1", `{"status":"pending"}`, appcode.PutOptions{})
	revs = append(revs, r.Rev)
	e.put(alice, appJobs, "jobs", "other", `{"status":"pending"}`, appcode.PutOptions{})
	d := e.del(alice, appJobs, "jobs", "t1", r.Rev)
	revs = append(revs, d.Rev)
	_, err := e.eng.Get(e.ctx, alice, appJobs, "jobs", "t1")
	wantCode(t, err, errs.NotFound, "Get of a tombstone")
	p, err := e.eng.Query(e.ctx, alice, appJobs, "jobs", "status", json.RawMessage(`"pending"`), 0, "")
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, pageIDs(t, p), []string{"other"}, "Query without the tombstone")
	p, err = e.eng.Scan(e.ctx, alice, appJobs, "jobs", 0, "")
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, pageIDs(t, p), []string{"other"}, "Scan without the tombstone")
	h := e.hist(appJobs, "jobs", "t1")
	if len(h) != 2 || !h[1].Deleted || h[1].Rev != d.Rev {
		t.Fatalf("History keeps the tombstone: %+v", h)
	}
	tomb := decodeObject(t, h[1].Doc)
	if tomb["_deleted"] != true || tomb["_id"] != "t1" || tomb["_rev"] != d.Rev {
		t.Fatalf("tombstone in history = %v", tomb)
	}
	c, err := e.eng.Changes(e.ctx, alice, appJobs, "jobs", d.Seq-1, 0)
	if err != nil || len(c.Changes) != 1 || !c.Changes[0].Deleted || c.Changes[0].ID != "t1" {
		t.Fatalf("Changes show the delete: %+v, %v", c, err)
	}

	// Resurrect, change, delete, resurrect: the generation keeps counting.
	r = e.put(alice, appJobs, "jobs", "t1", `{"status":"pending","life":2}`, appcode.PutOptions{})
	revs = append(revs, r.Rev)
	r = e.put(alice, appJobs, "jobs", "t1", `{"status":"running","life":2}`, appcode.PutOptions{IfRev: r.Rev})
	revs = append(revs, r.Rev)
	revs = append(revs, e.del(alice, appJobs, "jobs", "t1", "").Rev)
	r = e.put(alice, appJobs, "jobs", "t1", `{"life":3}`, appcode.PutOptions{})
	revs = append(revs, r.Rev)
	if got := e.doc(appJobs, "jobs", "t1"); got["life"] != json.Number("3") || got["status"] != nil {
		t.Fatalf("resurrected doc = %v", got)
	}
	h = e.hist(appJobs, "jobs", "t1")
	if len(h) != len(revs) {
		t.Fatalf("History has %d entries, want %d", len(h), len(revs))
	}
	for i, en := range h {
		if en.Rev != revs[i] || gen(t, en.Rev) != i+1 || en.Deleted != (i == 1 || i == 4) {
			t.Fatalf("History[%d] = rev %s deleted %v; want rev %s at generation %d", i, en.Rev, en.Deleted, revs[i], i+1)
		}
	}
}

func testEngineLedger(t *testing.T, e *env) {
	e.fixture()
	type step struct {
		actor   engine.Actor
		deleted bool
		body    string
		path    string
	}
	steps := []step{
		{engine.Actor{User: "alice", Device: "laptop", Path: "cli"}, false, `{"status":"pending"}`, "cli"},
		{engine.Actor{User: "alice", Handler: appcode.OnChange, Path: "http"}, false, `{"status":"running"}`, "onChange"},
		{engine.Actor{User: "admin", Admin: true}, false, `{"status":"done"}`, "http"},
		{engine.Actor{User: "alice", Device: "ci-7", Path: "import"}, true, "", "import"},
		{engine.Actor{User: "alice", Handler: appcode.Scheduled}, false, `{"status":"pending","attempts":1}`, "scheduled"},
	}
	var results []appcode.WriteResult
	var times []string
	for _, s := range steps {
		now := e.tick()
		times = append(times, now.UTC().String())
		var r appcode.WriteResult
		if s.deleted {
			r = e.del(s.actor, appJobs, "jobs", "led", "")
		} else {
			r = e.put(s.actor, appJobs, "jobs", "led", s.body, appcode.PutOptions{})
		}
		results = append(results, r)
	}
	h := e.hist(appJobs, "jobs", "led")
	if len(h) != len(steps) {
		t.Fatalf("History has %d entries, want %d", len(h), len(steps))
	}
	for i, s := range steps {
		en := h[i]
		w := en.Writer
		if en.ID != "led" || en.DB != "jobs" || en.Rev != results[i].Rev || en.Seq != results[i].Seq || en.Deleted != s.deleted ||
			w.User != s.actor.User || w.Device != s.actor.Device || w.Handler != string(s.actor.Handler) ||
			en.Path != s.path || en.Time.UTC().String() != times[i] {
			t.Fatalf("History[%d] = %+v\nwant rev %s seq %d writer %+v path %s time %s",
				i, en, results[i].Rev, results[i].Seq, s.actor, s.path, times[i])
		}
		doc := decodeObject(t, en.Doc)
		if doc["_id"] != "led" || doc["_rev"] != en.Rev {
			t.Fatalf("History[%d].Doc = %v", i, doc)
		}
		if !s.deleted {
			want := decodeObject(t, []byte(s.body))
			want["_id"], want["_rev"] = "led", en.Rev
			if fmt.Sprint(doc) != fmt.Sprint(want) {
				t.Fatalf("History[%d].Doc = %v, want %v", i, doc, want)
			}
		}
	}
	// A client cannot pose as a handler through the path label.
	if engine.ClientPath("onChange") != "http" || engine.ClientPath("cli") != "cli" {
		t.Fatal("ClientPath lets a client choose a handler's path")
	}
}

func testEngineSequence(t *testing.T, e *env) {
	e.fixture()
	want := map[string]int64{}
	check := func(app string, r appcode.WriteResult) {
		t.Helper()
		want[app]++
		if r.Seq != want[app] {
			t.Fatalf("write to %s got seq %d, want %d", app, r.Seq, want[app])
		}
	}
	r := e.put(alice, appJobs, "jobs", "a", `{}`, appcode.PutOptions{})
	check(appJobs, r)
	check(appJobs, e.put(alice, appJobs, "logs", "a", `{}`, appcode.PutOptions{}))
	check(appOther, e.put(alice, appOther, "jobs", "a", `{}`, appcode.PutOptions{}))
	// Refusals and no-ops take no number.
	if _, err := e.eng.Put(e.ctx, alice, appJobs, "jobs", "a", []byte(`{}`), appcode.PutOptions{IfRev: "9-x"}); err == nil {
		t.Fatal("stale ifRev succeeded")
	}
	e.put(alice, appJobs, "jobs", "a", `{"x":1}`, appcode.PutOptions{IfAbsent: true})
	check(appJobs, e.put(alice, appJobs, "jobs", "a", `{"x":1}`, appcode.PutOptions{IfRev: r.Rev}))
	check(appJobs, e.del(alice, appJobs, "jobs", "a", ""))
	check(appOther, e.put(alice, appOther, "jobs", "b", `{}`, appcode.PutOptions{}))
	check(appJobs, e.put(alice, appJobs, "jobs", "a", `{}`, appcode.PutOptions{}))
	for app, s := range want {
		if got := e.seqOf(app); got != s {
			t.Fatalf("LastSeq(%s) = %d, want %d", app, got, s)
		}
	}
}

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
	for i := range 14 {
		db := []string{"jobs", "logs"}[i%2]
		id := fmt.Sprint("d", i%5)
		if i == 11 {
			e.del(alice, appJobs, db, id, "")
		} else {
			e.put(alice, appJobs, db, id, fmt.Sprintf(`{"i":%d}`, i), appcode.PutOptions{})
		}
		all = append(all, rec{db, id})
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
	if len(c.Changes) != len(all) || c.Last != int64(len(all)) {
		t.Fatalf("Changes(all) has %d entries, last %d; want %d", len(c.Changes), c.Last, len(all))
	}
	for i, ch := range c.Changes {
		if ch.Seq != int64(i+1) || ch.DB != all[i].db || ch.ID != all[i].id || ch.Deleted != (i == 11) || ch.Writer.User != "alice" {
			t.Fatalf("change %d = %+v, want %+v at seq %d", i, ch, all[i], i+1)
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
		if ch.DB != "jobs" || ch.Seq != int64(2*i+1) {
			t.Fatalf("Changes(jobs)[%d] = %+v", i, ch)
		}
	}
	if c := changes("", 0, 4); len(c.Changes) != 4 || c.Last != 4 {
		t.Fatalf("Changes(limit 4) = %d entries, last %d", len(c.Changes), c.Last)
	}
	if c := changes("", 4, 0); len(c.Changes) != 10 || c.Changes[0].Seq != 5 || c.Last != 14 {
		t.Fatalf("Changes(since 4) = %d entries, last %d", len(c.Changes), c.Last)
	}
	if c := changes("", 14, 0); len(c.Changes) != 0 || c.Last != 14 {
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
				want = append(want, int64(i+1))
			}
		}
		if !slices.Equal(seqs, want) {
			t.Fatalf("Changes(%q) resumed by 3 gave seqs %v, want %v", db, seqs, want)
		}
	}
}

func testEngineIdentity(t *testing.T, e *env) {
	tok, err := e.eng.Bootstrap(e.ctx, "")
	if err != nil || !strings.HasPrefix(tok, "hnd_") {
		t.Fatalf("Bootstrap = %q, %v", tok, err)
	}
	if again, err := e.eng.Bootstrap(e.ctx, ""); err != nil || again != "" {
		t.Fatalf("second Bootstrap = %q, %v; want no new token", again, err)
	}
	if fixed, err := e.eng.Bootstrap(e.ctx, "hnd_fixed"); err != nil || fixed != "hnd_fixed" {
		t.Fatalf("Bootstrap with a token = %q, %v", fixed, err)
	}
	// A token given for an existing admin replaces the admin's others:
	// that is how a leaked admin token is revoked.
	if a, err := e.eng.Authenticate(e.ctx, "hnd_fixed"); err != nil || a.User != engine.AdminUser || !a.Admin {
		t.Fatalf("Authenticate(admin token) = %+v, %v", a, err)
	}
	_, err = e.eng.Authenticate(e.ctx, tok)
	wantCode(t, err, errs.Unauthorized, "Authenticate(the replaced admin token)")
	if a, err := e.eng.Authenticate(e.ctx, ""); err != nil || a.User != "" || a.Admin {
		t.Fatalf("Authenticate(\"\") = %+v, %v; want anonymous", a, err)
	}
	_, err = e.eng.Authenticate(e.ctx, "hnd_bogus")
	wantCode(t, err, errs.Unauthorized, "Authenticate(bogus)")

	aliceTok, err := e.eng.AddUser(e.ctx, admin, "alice")
	if err != nil || aliceTok == "" || aliceTok == tok {
		t.Fatalf("AddUser(alice) = %q, %v", aliceTok, err)
	}
	if a, err := e.eng.Authenticate(e.ctx, aliceTok); err != nil || a.User != "alice" || a.Admin {
		t.Fatalf("Authenticate(alice) = %+v, %v", a, err)
	}
	_, err = e.eng.AddUser(e.ctx, admin, "alice")
	wantCode(t, err, errs.Exists, "AddUser(alice) again")
	_, err = e.eng.AddUser(e.ctx, alice, "mallory")
	wantCode(t, err, errs.Forbidden, "AddUser by a non-admin")
	_, err = e.eng.AddUser(e.ctx, engine.Actor{}, "mallory")
	wantCode(t, err, errs.Unauthorized, "AddUser by anonymous")
	_, err = e.eng.AddUser(e.ctx, admin, "Bad Name")
	wantCode(t, err, errs.Invalid, "AddUser(bad name)")
	if _, err := e.eng.AddUser(e.ctx, admin, "bob"); err != nil {
		t.Fatal(err)
	}

	info, err := e.eng.CreateApp(e.ctx, alice, appJobs, true)
	if err != nil || info.App != appJobs || info.Owner != "alice" || !info.Public {
		t.Fatalf("CreateApp = %+v, %v", info, err)
	}
	_, err = e.eng.CreateApp(e.ctx, alice, appJobs, false)
	wantCode(t, err, errs.Exists, "CreateApp again")
	if _, err := e.eng.CreateApp(e.ctx, admin, "bob/stuff", false); err != nil {
		t.Fatalf("admin CreateApp for bob: %v", err)
	}
	apps := func(a engine.Actor) string {
		t.Helper()
		list, err := e.eng.Apps(e.ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, ai := range list {
			s = append(s, ai.App+fmt.Sprint(ai.Roles))
		}
		return strings.Join(s, " ")
	}
	if got := apps(alice); got != "alice/jobs[owner]" {
		t.Fatalf("Apps(alice) = %s", got)
	}
	if got := apps(admin); got != "alice/jobs[] bob/stuff[]" {
		t.Fatalf("Apps(admin) = %s", got)
	}
	for range 2 { // adding a member twice is a no-op
		if err := e.eng.AddMember(e.ctx, alice, appJobs, "bob", "viewer"); err != nil {
			t.Fatalf("AddMember: %v", err)
		}
	}
	if err := e.eng.AddMember(e.ctx, admin, appJobs, "bob", "editor"); err != nil {
		t.Fatalf("AddMember by admin: %v", err)
	}
	if got := apps(bob); got != "alice/jobs[editor viewer] bob/stuff[owner]" {
		t.Fatalf("Apps(bob) = %s", got)
	}
	ms, err := e.eng.Members(e.ctx, bob, appJobs)
	if err != nil || fmt.Sprint(ms) != "[{bob [editor viewer]}]" {
		t.Fatalf("Members = %v, %v", ms, err)
	}
	err = e.eng.AddMember(e.ctx, alice, appJobs, "ghost", "viewer")
	wantCode(t, err, errs.NotFound, "AddMember(unknown user)")
	err = e.eng.AddMember(e.ctx, bob, appJobs, "bob", "owner")
	wantCode(t, err, errs.Forbidden, "AddMember by a member")
	err = e.eng.AddMember(e.ctx, alice, appJobs, "bob", "bad role")
	wantCode(t, err, errs.Invalid, "AddMember(bad role)")
	err = e.eng.AddMember(e.ctx, alice, "alice/nope", "bob", "viewer")
	wantCode(t, err, errs.NotFound, "AddMember(unknown app)")
}

func testEngineReopen(t *testing.T, e *env) {
	tok := e.fixture()
	if err := e.eng.AddMember(e.ctx, alice, appJobs, "bob", "viewer"); err != nil {
		t.Fatal(err)
	}
	r1 := e.put(engine.Actor{User: "alice", Device: "d1", Path: "cli"}, appJobs, "jobs", "x", `{"status":"pending"}`, appcode.PutOptions{})
	r2 := e.put(alice, appJobs, "jobs", "x", `{"status":"running"}`, appcode.PutOptions{IfRev: r1.Rev})
	e.put(alice, appJobs, "jobs", "y", `{"status":"pending"}`, appcode.PutOptions{})
	e.put(alice, appJobs, "jobs", "z", `{"status":"pending"}`, appcode.PutOptions{})
	e.del(alice, appJobs, "jobs", "z", "")
	e.put(alice, appOther, "jobs", "o", `{"status":"pending"}`, appcode.PutOptions{})
	wantIDs(t, e.queryIDs(appJobs, "jobs", "status", `"pending"`), []string{"y"}, "Query before reopen")
	state := func() string {
		t.Helper()
		h, err := e.eng.History(e.ctx, alice, appJobs, "jobs", "x")
		if err != nil {
			t.Fatal(err)
		}
		hz, err := e.eng.History(e.ctx, alice, appJobs, "jobs", "z")
		if err != nil {
			t.Fatal(err)
		}
		c, err := e.eng.Changes(e.ctx, alice, appJobs, "", 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		dbs, err := e.eng.Databases(e.ctx, alice, appJobs)
		if err != nil {
			t.Fatal(err)
		}
		apps, err := e.eng.Apps(e.ctx, admin)
		if err != nil {
			t.Fatal(err)
		}
		ms, err := e.eng.Members(e.ctx, alice, appJobs)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal([]any{e.doc(appJobs, "jobs", "x"), h, hz, c, dbs, apps, ms})
		return string(b)
	}
	before := state()
	seq := e.seqOf(appJobs)

	e.reopen()

	if after := state(); after != before {
		t.Fatalf("state changed across a reopen:\nbefore %s\nafter  %s", before, after)
	}
	for tk, user := range map[string]string{tok: "admin"} {
		if a, err := e.eng.Authenticate(e.ctx, tk); err != nil || a.User != user {
			t.Fatalf("Authenticate after reopen = %+v, %v", a, err)
		}
	}
	if _, err := e.eng.Get(e.ctx, bob, appJobs, "jobs", "x"); err != nil {
		t.Fatalf("a viewer reads after reopen: %v", err)
	}
	_, err := e.eng.AddUser(e.ctx, admin, "alice")
	wantCode(t, err, errs.Exists, "AddUser(alice) after reopen")
	_, err = e.eng.CreateApp(e.ctx, alice, appJobs, false)
	wantCode(t, err, errs.Exists, "CreateApp after reopen")
	wantIDs(t, e.queryIDs(appJobs, "jobs", "status", `"pending"`), []string{"y"}, "Query after reopen")

	_, err = e.eng.Put(e.ctx, alice, appJobs, "jobs", "x", []byte(`{}`), appcode.PutOptions{IfRev: r1.Rev})
	wantCode(t, err, errs.Conflict, "stale ifRev after reopen")
	r3 := e.put(alice, appJobs, "jobs", "x", `{"status":"pending"}`, appcode.PutOptions{IfRev: r2.Rev})
	if r3.Seq != seq+1 || gen(t, r3.Rev) != 3 {
		t.Fatalf("first write after reopen = %+v; want seq %d at generation 3", r3, seq+1)
	}
	if r := e.put(alice, appJobs, "jobs", "z", `{"status":"pending"}`, appcode.PutOptions{IfAbsent: true}); r.Existing || gen(t, r.Rev) != 3 {
		t.Fatalf("resurrection after reopen = %+v", r)
	}
	wantIDs(t, e.queryIDs(appJobs, "jobs", "status", `"pending"`), []string{"x", "y", "z"}, "Query after reopen and writes")
	if r := e.put(alice, appOther, "jobs", "o2", `{}`, appcode.PutOptions{}); r.Seq != 2 {
		t.Fatalf("other app's seq after reopen = %d, want 2", r.Seq)
	}
}

// testEngineDeepDocuments: a document the engine accepts must not break
// the store. Deeply nested JSON is either refused as invalid, or stored;
// and then every query, on a field indexed before or after, still works.
func testEngineDeepDocuments(t *testing.T, e *env) {
	e.fixture()
	e.put(alice, appJobs, "jobs", "plain", `{"status":"pending","kind":"a"}`, appcode.PutOptions{})
	putDeep := func(depth int) {
		t.Helper()
		id := fmt.Sprint("deep-", depth)
		body := `{"status":"pending","kind":"deep","nest":` + strings.Repeat(`[`, depth) + strings.Repeat(`]`, depth) + `}`
		_, err := e.eng.Put(e.ctx, alice, appJobs, "jobs", id, []byte(body), appcode.PutOptions{})
		if err != nil && errs.CodeOf(err) != errs.Invalid {
			t.Fatalf("Put of a doc nested %d deep: %v; want success or invalid", depth, err)
		}
		if err == nil {
			if d := e.doc(appJobs, "jobs", id); d["kind"] != "deep" {
				t.Fatalf("Get(%s) = %v", id, d)
			}
		}
	}
	// Before any field index exists.
	for _, depth := range []int{100, 1000, 5000} {
		putDeep(depth)
	}
	ids := e.queryIDs(appJobs, "jobs", "kind", `"a"`)
	wantIDs(t, ids, []string{"plain"}, "Query on a field first queried after deep docs")
	// Once a field index exists.
	for _, depth := range []int{999, 1001} {
		putDeep(depth)
	}
	e.put(alice, appJobs, "jobs", "after", `{"status":"pending","kind":"a"}`, appcode.PutOptions{})
	wantIDs(t, e.queryIDs(appJobs, "jobs", "kind", `"a"`), []string{"after", "plain"}, "Query after more writes")
}

// testEngineDocumentValues: numbers that do not fit a float64 and strings
// with NUL or half a surrogate pair are refused at the door, naming where,
// the same on every store; the values at the edge of the rules are kept
// exactly and found by queries.
func testEngineDocumentValues(t *testing.T, e *env) {
	e.fixture()
	for body, want := range map[string]string{
		`{"n":1e999999}`:   `document value at .n (byte 5): 1e999999 is out of the range of a 64-bit float`,
		`{"a":[1,-1e400]}`: `document value at .a[1] (byte 8): -1e400 is out of the range`,
		`{"n":` + strings.Repeat("9", 200000) + `}`: `is 200000 characters long; the limit is 400`,
		`{"n":1e-400}`:                 `1e-400 is too small for a 64-bit float`,
		`{"n":0e-99999}`:               `0e-99999 has an exponent beyond ±9999`,
		`{"a":{"b":["x","a\u0000b"]}}`: `document value at .a.b[1] (byte 15): it holds \u0000 (NUL)`,
		`{"s":"\ud800"}`:               `document value at .s (byte 5): it holds \ud800, half of a UTF-16 surrogate pair`,
		`{"s":"x\udc00"}`:              `it holds \udc00, half`,
		`{"s":"\ud800\u0041"}`:         `it holds \ud800, half`,
		`{"a\u0000":1}`:                `document key at ["a\u0000"] (byte 1): it holds \u0000`,
		`{"in":{"x y":{"\udfff":1}}}`:  `document key at .in["x y"]["\udfff"] (byte 14)`,
		` {"n":1e999}`:                 `(byte 6)`,
	} {
		_, err := e.eng.Put(e.ctx, alice, appJobs, "jobs", "bad", []byte(body), appcode.PutOptions{})
		wantCode(t, err, errs.Invalid, "Put of "+body[:min(len(body), 40)])
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Put(%.40s) = %v\nwant a message with %q", body, err, want)
		}
	}
	if _, err := e.eng.Get(e.ctx, alice, appJobs, "jobs", "bad"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("a refused document was stored: %v", err)
	}

	good := map[string]string{
		"tiny":  `{"n":5e-324}`,
		"huge":  `{"n":-1.7976931348623157e308}`,
		"zero":  `{"n":-0.0e-9999}`,
		"long":  `{"n":1.` + strings.Repeat("0", engine.MaxNumberChars-2) + `}`,
		"pair":  `{"s":"\ud83d\ude00","t":"\\u0000","u":"\uffff\ufffd"}`,
		"pkey":  `{"\ud83d\ude00":"smile"}`,
		"plain": `{"s":"NUL is \\u0000, written out"}`,
	}
	for id, body := range good {
		e.put(alice, appJobs, "jobs", id, body, appcode.PutOptions{})
		raw, err := e.eng.Get(e.ctx, alice, appJobs, "jobs", id)
		if err != nil {
			t.Fatal(err)
		}
		want := decodeObject(t, []byte(body))
		got := decodeObject(t, raw)
		delete(got, "_id")
		delete(got, "_rev")
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Get(%s) = %s, want %s", id, raw, body)
		}
	}
	wantIDs(t, e.queryIDs(appJobs, "jobs", "n", `5e-324`), []string{"tiny"}, "Query(n = 5e-324)")
	wantIDs(t, e.queryIDs(appJobs, "jobs", "n", `-1.7976931348623157e308`), []string{"huge"}, "Query(n = -max)")
	wantIDs(t, e.queryIDs(appJobs, "jobs", "s", `"😀"`), []string{"pair"}, "Query(s = a surrogate pair)")

	for key, want := range map[string]string{
		`1e999`:            `query key: 1e999 is out of the range of a 64-bit float`,
		`"a\u0000"`:        `query key: it holds \u0000 (NUL)`,
		`{"a":["\ud800"]}`: `query key at .a[0]: it holds \ud800`,
		strings.Repeat("[", 200) + strings.Repeat("]", 200): `query key nests 200 levels deep`,
	} {
		_, err := e.eng.Query(e.ctx, alice, appJobs, "jobs", "n", json.RawMessage(key), 0, "")
		wantCode(t, err, errs.Invalid, "Query with key "+key)
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Query(%s) = %v\nwant a message with %q", key, err, want)
		}
	}
}

// testEngineNamesNoStoreHolds: names, numbers and cursors that no user,
// device, secret, version or document can have are answered as not
// found or invalid, never looked up: PostgreSQL refuses NUL in text and
// numbers past its column types, which made them internal errors.
func testEngineNamesNoStoreHolds(t *testing.T, e *env) {
	e.fixture()
	for _, v := range []int{0, -1, math.MaxInt32 + 1, math.MaxInt64} {
		wantCode(t, e.eng.Rollback(e.ctx, alice, appJobs, v), errs.NotFound, fmt.Sprint("Rollback to version ", v))
	}
	_, err := e.eng.RotateToken(e.ctx, admin, "bob\x00")
	wantCode(t, err, errs.NotFound, "RotateToken of a name with NUL")
	wantCode(t, e.eng.AddMember(e.ctx, alice, appJobs, "bob\x00", "editor"), errs.Invalid, "AddMember of a name with NUL")
	wantCode(t, e.eng.RemoveMember(e.ctx, alice, appJobs, "bob\x00", ""), errs.NotFound, "RemoveMember of a name with NUL")
	wantCode(t, e.eng.RemoveMember(e.ctx, alice, appJobs, "bob", "\xff"), errs.NotFound, "RemoveMember of a role of invalid UTF-8")
	wantCode(t, e.eng.RevokeDevice(e.ctx, alice, "d\x00"), errs.NotFound, "RevokeDevice of a name with NUL")
	wantCode(t, e.eng.RemoveSecret(e.ctx, alice, appJobs, "s\x00"), errs.NotFound, "RemoveSecret of a name with NUL")
	for _, id := range []string{"a\x00", "\xff"} {
		cursor := base64.RawURLEncoding.EncodeToString([]byte("i:" + id))
		_, err := e.eng.Scan(e.ctx, alice, appJobs, "jobs", 0, cursor)
		wantCode(t, err, errs.Invalid, fmt.Sprintf("Scan after %q", id))
		_, err = e.eng.Query(e.ctx, alice, appJobs, "jobs", "status", json.RawMessage(`"x"`), 0, cursor)
		wantCode(t, err, errs.Invalid, fmt.Sprintf("Query after %q", id))
	}

	// Device tokens: a name no device has, and a nonce that the replay
	// check would store, from a device whose key really signed it.
	key, err := auth.NewDeviceKey("alice", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.AddDevice(e.ctx, alice, "laptop", key.Public(), ""); err != nil {
		t.Fatal(err)
	}
	sign := func(user, device, nonce string) string {
		sum := sha256.Sum256(nil)
		payload, _ := json.Marshal(map[string]any{"u": user, "d": device, "t": e.clk.Now().Unix(), "n": nonce,
			"m": "GET", "p": "/v1/whoami", "b": hex.EncodeToString(sum[:])})
		return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(key.Private, payload))
	}
	if a, err := e.eng.AuthenticateDevice(e.ctx, sign("alice", "laptop", "n1"), "GET", "/v1/whoami", nil); err != nil || a.User != "alice" {
		t.Fatalf("AuthenticateDevice of a good token = %+v, %v", a, err)
	}
	for _, c := range [][3]string{{"alice\x00", "laptop", "n2"}, {"alice", "lap\x00", "n3"}, {"alice", "laptop", "n\x00"}, {"alice", "laptop", "\xff"}} {
		_, err := e.eng.AuthenticateDevice(e.ctx, sign(c[0], c[1], c[2]), "GET", "/v1/whoami", nil)
		wantCode(t, err, errs.Unauthorized, fmt.Sprintf("AuthenticateDevice as %q", c))
	}
}
