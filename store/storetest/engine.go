package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
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

// testEngineSequence: each app's seqs grow with its writes; a refusal or a
// no-op takes none, so a write right after another of the same app takes
// the next seq (the store contract, testStoreSequence).
func testEngineSequence(t *testing.T, e *env) {
	e.fixture()
	last := map[string]int64{}
	var prev string // the app of the last write
	check := func(app string, r appcode.WriteResult) {
		t.Helper()
		if r.Seq <= last[app] {
			t.Fatalf("write to %s got seq %d, not above the app's last %d", app, r.Seq, last[app])
		}
		if prev == app && r.Seq != last[app]+1 {
			t.Fatalf("write to %s got seq %d right after seq %d of the same app", app, r.Seq, last[app])
		}
		last[app], prev = r.Seq, app
	}
	r := e.put(alice, appJobs, "jobs", "a", `{}`, appcode.PutOptions{})
	check(appJobs, r)
	check(appJobs, e.put(alice, appJobs, "logs", "a", `{}`, appcode.PutOptions{}))
	check(appOther, e.put(alice, appOther, "jobs", "a", `{}`, appcode.PutOptions{}))
	x := e.put(alice, appJobs, "jobs", "x", `{}`, appcode.PutOptions{})
	check(appJobs, x)
	// Refusals and no-ops take no number.
	if _, err := e.eng.Put(e.ctx, alice, appJobs, "jobs", "a", []byte(`{}`), appcode.PutOptions{IfRev: "9-x"}); err == nil {
		t.Fatal("stale ifRev succeeded")
	}
	e.put(alice, appJobs, "jobs", "a", `{"x":1}`, appcode.PutOptions{IfAbsent: true})
	check(appJobs, e.put(alice, appJobs, "jobs", "a", `{"x":1}`, appcode.PutOptions{IfRev: r.Rev}))
	check(appJobs, e.del(alice, appJobs, "jobs", "a", ""))
	check(appOther, e.put(alice, appOther, "jobs", "b", `{}`, appcode.PutOptions{}))
	check(appJobs, e.put(alice, appJobs, "jobs", "a", `{}`, appcode.PutOptions{}))
	for app, s := range last {
		if got := e.seqOf(app); got != s {
			t.Fatalf("LastSeq(%s) = %d, want %d", app, got, s)
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
	o := e.put(alice, appOther, "jobs", "o", `{"status":"pending"}`, appcode.PutOptions{})
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
	if r3.Seq <= seq || gen(t, r3.Rev) != 3 {
		t.Fatalf("first write after reopen = %+v; want a seq above %d, at generation 3", r3, seq)
	}
	if r := e.put(alice, appJobs, "jobs", "z", `{"status":"pending"}`, appcode.PutOptions{IfAbsent: true}); r.Existing || gen(t, r.Rev) != 3 {
		t.Fatalf("resurrection after reopen = %+v", r)
	}
	wantIDs(t, e.queryIDs(appJobs, "jobs", "status", `"pending"`), []string{"x", "y", "z"}, "Query after reopen and writes")
	if r := e.put(alice, appOther, "jobs", "o2", `{}`, appcode.PutOptions{}); r.Seq <= o.Seq {
		t.Fatalf("other app's seq after reopen = %d, want one above its last, %d", r.Seq, o.Seq)
	}
}
