package storetest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

// storeTests check the store.Store contract without the engine.
var storeTests = []test{
	{"Users", testStoreUsers},
	{"Tokens", testStoreTokens},
	{"Apps", testStoreApps},
	{"Members", testStoreMembers},
	{"RemoveUser", testStoreRemoveUser},
	{"GetMissing", testStoreGetMissing},
	{"CommitAndGet", testStoreCommitAndGet},
	{"CommitHeadMovedWritesNothing", testStoreHeadMoved},
	{"Tombstones", testStoreTombstones},
	{"HistoryLedger", testStoreHistory},
	{"SequencePerApp", testStoreSequence},
	{"Changes", testStoreChanges},
	{"Databases", testStoreDatabases},
	{"Scan", testStoreScan},
	{"QueryValues", testStoreQueryValues},
	{"QueryScope", testStoreQueryScope},
	{"QueryPagination", testStoreQueryPagination},
	{"ConcurrentCommits", testStoreConcurrentCommits},
	{"ConcurrentCommitsOneHead", testStoreConcurrentOneHead},
	{"Channels", testStoreChannels},
	{"Grants", testStoreGrants},
	{"GrantsChanged", testStoreGrantsChanged},
	{"CodeVersions", testStoreCode},
	{"CodeFiles", testStoreCodeFiles},
	{"Reopen", testStoreReopen},
}

func testStoreGetMissing(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	if d := e.get(app, "jobs", "nope"); d != nil {
		t.Fatalf("Get(missing) = %+v, want nil", d)
	}
	if h := e.history(app, "jobs", "nope"); len(h) != 0 {
		t.Fatalf("History(missing) = %+v, want none", h)
	}
	if c := e.changes(app, "", 0, 10); len(c) != 0 {
		t.Fatalf("Changes of a new app = %+v, want none", c)
	}
}

func testStoreCommitAndGet(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	t1 := e.tick()
	w := e.write(app, "jobs", "j1", "", "1-a", `{"status":"pending","n":1,"tags":["x","y"],"o":{"k":null}}`)
	w.Writer = store.Writer{User: "alice", Device: "laptop"}
	w.Path = "cli"
	if seq := e.commit(w); seq != 1 {
		t.Fatalf("first commit got seq %d, want 1", seq)
	}
	d := e.get(app, "jobs", "j1")
	if d == nil || d.ID != "j1" || d.DB != "jobs" || d.Rev != "1-a" || d.Deleted || d.Seq != 1 || !d.Time.Equal(t1) {
		t.Fatalf("Get = %+v; want j1 at 1-a, seq 1, time %v", d, t1)
	}
	wantJSON(t, d.Body, `{"status":"pending","n":1,"tags":["x","y"],"o":{"k":null}}`, "body")

	t2 := e.tick()
	if seq := e.commit(e.write(app, "jobs", "j1", "1-a", "2-b", `{"status":"running"}`)); seq != 2 {
		t.Fatalf("second commit got seq %d, want 2", seq)
	}
	d = e.get(app, "jobs", "j1")
	if d.Rev != "2-b" || d.Seq != 2 || !d.Time.Equal(t2) {
		t.Fatalf("Get after update = %+v; want 2-b, seq 2, time %v", d, t2)
	}
	wantJSON(t, d.Body, `{"status":"running"}`, "body after update")
	if s := e.lastSeq(app); s != 2 {
		t.Fatalf("LastSeq = %d, want 2", s)
	}
	// The same id in another database is another document.
	if d := e.get(app, "other", "j1"); d != nil {
		t.Fatalf("Get(other/j1) = %+v, want nil", d)
	}
}

// snapshot is everything a refused commit must leave alone.
type snapshot struct {
	seq     int64
	heads   map[string]string
	history map[string]int
	changes int
	dbs     []string
}

func (e *env) snapshot(app int64, ids ...string) snapshot {
	e.t.Helper()
	s := snapshot{seq: e.lastSeq(app), heads: map[string]string{}, history: map[string]int{}}
	for _, id := range ids {
		if d := e.get(app, "jobs", id); d != nil {
			s.heads[id] = fmt.Sprintf("%s deleted=%v seq=%d body=%s", d.Rev, d.Deleted, d.Seq, d.Body)
		}
		s.history[id] = len(e.history(app, "jobs", id))
	}
	s.changes = len(e.changes(app, "", 0, 1000))
	dbs, err := e.st.Databases(e.ctx, app)
	if err != nil {
		e.t.Fatal(err)
	}
	s.dbs = dbs
	return s
}

func testStoreHeadMoved(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	e.commit(e.write(app, "jobs", "x", "", "1-a", `{"v":1}`))
	e.commit(e.write(app, "jobs", "x", "1-a", "2-b", `{"v":2}`))
	e.commit(e.write(app, "jobs", "gone", "", "1-g", `{"v":1}`))
	e.commit(e.write(app, "jobs", "gone", "1-g", "2-g", ""))
	before := e.snapshot(app, "x", "y", "gone")

	refused := []struct {
		name string
		w    *store.Write
	}{
		{"stale base", e.write(app, "jobs", "x", "1-a", "2-z", `{"v":"stale"}`)},
		{"unknown base", e.write(app, "jobs", "x", "7-q", "8-z", `{"v":"unknown"}`)},
		{"no base on an existing doc", e.write(app, "jobs", "x", "", "1-z", `{"v":"blind"}`)},
		{"a base on a missing doc", e.write(app, "jobs", "y", "1-a", "2-z", `{"v":"ghost"}`)},
		{"a base on a missing doc in a new database", e.write(app, "newdb", "y", "1-a", "2-z", `{"v":"ghost"}`)},
		{"a tombstone over a stale base", e.write(app, "jobs", "x", "1-a", "2-d", "")},
		{"no base on a tombstone", e.write(app, "jobs", "gone", "", "1-z", `{"v":"blind"}`)},
		{"the tombstone's previous rev", e.write(app, "jobs", "gone", "1-g", "2-z", `{"v":"old"}`)},
	}
	for _, r := range refused {
		seq, err := e.st.Commit(e.ctx, r.w)
		if !errors.Is(err, store.ErrHeadMoved) {
			t.Fatalf("Commit with %s: seq %d, err %v; want ErrHeadMoved", r.name, seq, err)
		}
	}
	after := e.snapshot(app, "x", "y", "gone")
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("refused commits changed the store:\nbefore %+v\nafter  %+v", before, after)
	}
	// The sequence has no gap: the next good commit takes the next number.
	if seq := e.commit(e.write(app, "jobs", "x", "2-b", "3-c", `{"v":3}`)); seq != before.seq+1 {
		t.Fatalf("commit after refusals got seq %d, want %d", seq, before.seq+1)
	}
	// A tombstone is a head: the write that resurrects it names its rev.
	if seq := e.commit(e.write(app, "jobs", "gone", "2-g", "3-g", `{"v":"back"}`)); seq != before.seq+2 {
		t.Fatalf("resurrecting commit got seq %d, want %d", seq, before.seq+2)
	}
}

func testStoreTombstones(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	e.commit(e.write(app, "jobs", "x", "", "1-a", `{"status":"pending"}`))
	e.commit(e.write(app, "jobs", "keep", "", "1-k", `{"status":"pending"}`))
	t2 := e.tick()
	seq := e.commit(e.write(app, "jobs", "x", "1-a", "2-d", ""))
	d := e.get(app, "jobs", "x")
	if d == nil || !d.Deleted || d.Rev != "2-d" || d.Seq != seq || !d.Time.Equal(t2) || len(d.Body) != 0 {
		t.Fatalf("Get(tombstone) = %+v; want deleted at 2-d, seq %d, no body", d, seq)
	}
	q := store.Query{AppID: app, DB: "jobs", Field: "status", Key: []byte(`"pending"`), Limit: 100}
	wantIDs(t, docIDs(e.query(q)), []string{"keep"}, "Query excludes the tombstone")
	scan, err := e.st.Scan(e.ctx, app, "jobs", "", 100)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, docIDs(scan), []string{"keep"}, "Scan excludes the tombstone")
	h := e.history(app, "jobs", "x")
	if len(h) != 2 || h[0].Rev != "1-a" || h[0].Deleted || h[1].Rev != "2-d" || !h[1].Deleted || len(h[1].Body) != 0 {
		t.Fatalf("History keeps the tombstone: %+v", h)
	}
	wantJSON(t, h[0].Body, `{"status":"pending"}`, "history keeps the deleted body")
	c := e.changes(app, "jobs", seq-1, 10)
	if len(c) != 1 || c[0].ID != "x" || !c[0].Deleted || c[0].Seq != seq {
		t.Fatalf("Changes show the deletion: %+v", c)
	}

	// Resurrection: a new revision over the tombstone.
	seq = e.commit(e.write(app, "jobs", "x", "2-d", "3-r", `{"status":"pending","again":true}`))
	d = e.get(app, "jobs", "x")
	if d.Deleted || d.Rev != "3-r" || d.Seq != seq {
		t.Fatalf("Get(resurrected) = %+v", d)
	}
	wantIDs(t, docIDs(e.query(q)), []string{"keep", "x"}, "Query finds the resurrected doc")
	if h := e.history(app, "jobs", "x"); len(h) != 3 || h[2].Rev != "3-r" {
		t.Fatalf("History after resurrection: %+v", h)
	}
}

func testStoreHistory(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	type rev struct {
		w    *store.Write
		seq  int64
		time time.Time
	}
	var revs []rev
	add := func(w *store.Write, writer store.Writer, path string) {
		w.Time = e.tick()
		w.Writer, w.Path = writer, path
		revs = append(revs, rev{w: w, seq: e.commit(w), time: w.Time})
	}
	add(e.write(app, "jobs", "x", "", "1-a", `{"status":"pending"}`), store.Writer{User: "alice", Device: "laptop"}, "cli")
	e.commit(e.write(app, "jobs", "noise", "", "1-n", `{}`))
	e.commit(e.write(app, "logs", "x", "", "1-l", `{}`))
	e.commit(e.write(other, "jobs", "x", "", "1-o", `{}`))
	add(e.write(app, "jobs", "x", "1-a", "2-b", `{"status":"running","lease":{"until":30}}`), store.Writer{Handler: "onChange"}, "onChange")
	add(e.write(app, "jobs", "x", "2-b", "3-c", ""), store.Writer{User: "bob"}, "http")
	add(e.write(app, "jobs", "x", "3-c", "4-d", `{"status":"pending"}`), store.Writer{User: "carol", Device: "ci", Handler: "fetch"}, "fetch")

	h := e.history(app, "jobs", "x")
	if len(h) != len(revs) {
		t.Fatalf("History has %d entries, want %d: %+v", len(h), len(revs), h)
	}
	for i, r := range revs {
		got := h[i]
		if got.ID != "x" || got.DB != "jobs" || got.Rev != r.w.Rev || got.Deleted != r.w.Deleted || got.Seq != r.seq ||
			!got.Time.Equal(r.time) || got.Writer != r.w.Writer || got.Path != r.w.Path {
			t.Fatalf("History[%d] = %+v\nwant rev %s deleted %v seq %d time %v writer %+v path %s",
				i, got, r.w.Rev, r.w.Deleted, r.seq, r.time, r.w.Writer, r.w.Path)
		}
		if r.w.Deleted {
			if len(got.Body) != 0 {
				t.Fatalf("History[%d] is a tombstone with a body %s", i, got.Body)
			}
		} else {
			wantJSON(t, got.Body, string(r.w.Body), fmt.Sprintf("History[%d] body", i))
		}
	}
}

// testStoreSequence: each commit of an app takes a seq above every one the
// app took before. Seqs need not be dense per app (a store may number
// every app's commits from one sequence), but a refused or unfinished
// write takes none: a commit right after another of the same app takes
// the next seq.
func testStoreSequence(t *testing.T, e *env) {
	a := e.app("alice", "a")
	b := e.app("alice", "b")
	steps := []struct {
		app int64
		db  string
	}{{a, "jobs"}, {a, "logs"}, {b, "jobs"}, {a, "jobs"}, {b, "x"}, {b, "jobs"}, {a, "jobs"}}
	last := map[int64]int64{}
	var prev int64
	for i, s := range steps {
		id := fmt.Sprintf("d%d", i)
		if i == 5 {
			// Refused: the head moved (d5 is new, so no base rev matches).
			if _, err := e.st.Commit(e.ctx, e.write(s.app, s.db, id, "1-x", "2-b", `{}`)); !errors.Is(err, store.ErrHeadMoved) {
				t.Fatalf("a write against a head that moved: %v, want ErrHeadMoved", err)
			}
		}
		seq := e.commit(e.write(s.app, s.db, id, "", "1-a", `{}`))
		if seq <= last[s.app] {
			t.Fatalf("commit %d to app %d got seq %d, not above the app's last %d", i, s.app, seq, last[s.app])
		}
		if i > 0 && steps[i-1].app == s.app && seq != prev+1 {
			t.Fatalf("commit %d to app %d got seq %d right after seq %d of the same app", i, s.app, seq, prev)
		}
		last[s.app], prev = seq, seq
		if d := e.get(s.app, s.db, id); d.Seq != seq {
			t.Fatalf("head of %s has seq %d, want %d", id, d.Seq, seq)
		}
	}
	if e.lastSeq(a) != last[a] || e.lastSeq(b) != last[b] {
		t.Fatalf("LastSeq = %d, %d; want %d, %d", e.lastSeq(a), e.lastSeq(b), last[a], last[b])
	}
}

func testStoreChanges(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	type rec struct {
		db, id, rev string
		deleted     bool
	}
	var all []rec
	var allSeqs []int64 // the seqs Commit returned, in order
	heads := map[string]string{}
	for i := range 12 {
		db := []string{"jobs", "logs", "jobs"}[i%3]
		id := fmt.Sprintf("d%d", i%4)
		key := db + "/" + id
		rev := fmt.Sprintf("%d-r%d", i+1, i)
		body := fmt.Sprintf(`{"i":%d}`, i)
		if i == 9 {
			body = "" // a deletion is a change too
		}
		w := e.write(app, db, id, heads[key], rev, body)
		w.Writer = store.Writer{User: "alice", Device: fmt.Sprint("dev", i)}
		allSeqs = append(allSeqs, e.commit(w))
		heads[key] = rev
		all = append(all, rec{db, id, rev, body == ""})
		e.commit(e.write(other, db, id, heads["other"+key], rev, `{}`))
		heads["other"+key] = rev
	}
	check := func(got []store.Revision, want []rec, wantSeqs []int64, what string) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d changes, want %d: %+v", what, len(got), len(want), got)
		}
		for i := range want {
			g := got[i]
			if g.DB != want[i].db || g.ID != want[i].id || g.Rev != want[i].rev || g.Deleted != want[i].deleted || g.Seq != wantSeqs[i] {
				t.Fatalf("%s: change %d = %+v, want %+v at seq %d", what, i, g, want[i], wantSeqs[i])
			}
		}
	}
	full := e.changes(app, "", 0, 100)
	check(full, all, allSeqs, "Changes(all)")
	for i, c := range full {
		if c.Writer.Device != fmt.Sprint("dev", i) || c.Path != "http" {
			t.Fatalf("change %d lost its writer or path: %+v", i, c)
		}
		if !c.Deleted {
			wantJSON(t, c.Body, fmt.Sprintf(`{"i":%d}`, i), "change body")
		}
	}
	var jobs []rec
	var jobSeqs []int64
	for i, r := range all {
		if r.db == "jobs" {
			jobs = append(jobs, r)
			jobSeqs = append(jobSeqs, allSeqs[i])
		}
	}
	check(e.changes(app, "jobs", 0, 100), jobs, jobSeqs, "Changes(jobs)")
	check(e.changes(app, "", 0, 5), all[:5], allSeqs[:5], "Changes(limit 5)")
	check(e.changes(app, "", allSeqs[4], 100), all[5:], allSeqs[5:], "Changes(since the 5th)")
	check(e.changes(app, "", allSeqs[4]-1, 100), all[4:], allSeqs[4:], "Changes(between the 4th and 5th)")
	check(e.changes(app, "", allSeqs[11], 100), nil, nil, "Changes(since last)")
	check(e.changes(app, "nodb", 0, 100), nil, nil, "Changes(unknown db)")

	// Resuming from the last seq of each page gives every change once.
	for _, db := range []string{"", "jobs"} {
		var got []store.Revision
		since := int64(0)
		for page := 0; ; page++ {
			c := e.changes(app, db, since, 3)
			if len(c) > 3 {
				t.Fatalf("Changes(limit 3) returned %d", len(c))
			}
			if len(c) == 0 {
				break
			}
			got = append(got, c...)
			since = c[len(c)-1].Seq
			if page > 20 {
				t.Fatal("Changes paging does not end")
			}
		}
		if db == "" {
			check(got, all, allSeqs, "Changes paged by 3")
		} else {
			check(got, jobs, jobSeqs, "Changes(jobs) paged by 3")
		}
	}
}

// testStoreConcurrentCommits commits 64 documents at once: every commit
// succeeds and the sequence numbers are exactly 1..64.
func testStoreConcurrentCommits(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	const n = 64
	seqs := make([]int64, n)
	parallel(t, n, n, func(i int) error {
		s, err := e.st.Commit(e.ctx, e.write(app, "jobs", fmt.Sprintf("d%02d", i), "", "1-a", fmt.Sprintf(`{"i":%d}`, i)))
		seqs[i] = s
		return err
	})
	sorted := slices.Sorted(slices.Values(seqs))
	for i, s := range sorted {
		if s != int64(i+1) {
			t.Fatalf("sequences of 64 concurrent commits are %v, want 1..64", sorted)
		}
	}
	if e.lastSeq(app) != n {
		t.Fatalf("LastSeq = %d, want %d", e.lastSeq(app), n)
	}
	c := e.changes(app, "", 0, 1000)
	if len(c) != n {
		t.Fatalf("Changes has %d entries, want %d", len(c), n)
	}
	for i, r := range c {
		id := fmt.Sprintf("d%02d", slices.Index(seqs, r.Seq))
		if r.Seq != int64(i+1) || r.ID != id {
			t.Fatalf("change %d = seq %d id %s, want seq %d id %s", i, r.Seq, r.ID, i+1, id)
		}
	}
}

// testStoreConcurrentOneHead commits 32 writes on the same base at once,
// several rounds: exactly one wins each round, the others get
// ErrHeadMoved, and nothing of the losers is written.
func testStoreConcurrentOneHead(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	const n, rounds = 32, 4
	base := ""
	var winners []string
	for round := range rounds {
		results := make([]error, n)
		start := make(chan struct{})
		done := make(chan struct{})
		for i := range n {
			go func() {
				defer func() { done <- struct{}{} }()
				<-start
				_, results[i] = e.st.Commit(e.ctx, e.write(app, "jobs", "hot", base,
					fmt.Sprintf("%d-w%d", round+1, i), fmt.Sprintf(`{"round":%d,"writer":%d}`, round, i)))
			}()
		}
		close(start)
		for range n {
			<-done
		}
		win := -1
		for i, err := range results {
			switch {
			case err == nil && win >= 0:
				t.Fatalf("round %d: writers %d and %d both committed on base %q", round, win, i, base)
			case err == nil:
				win = i
			case !errors.Is(err, store.ErrHeadMoved):
				t.Fatalf("round %d: writer %d: %v, want ErrHeadMoved", round, i, err)
			}
		}
		if win < 0 {
			t.Fatalf("round %d: no writer committed", round)
		}
		base = fmt.Sprintf("%d-w%d", round+1, win)
		winners = append(winners, base)
	}
	var got []string
	for _, r := range e.history(app, "jobs", "hot") {
		got = append(got, r.Rev)
	}
	wantIDs(t, got, winners, "History of the contended doc")
	if e.lastSeq(app) != rounds {
		t.Fatalf("LastSeq = %d, want %d (one per winner)", e.lastSeq(app), rounds)
	}
}

func testStoreReopen(t *testing.T, e *env) {
	created := e.clk.Now()
	if err := e.st.CreateUser(e.ctx, store.User{Name: "root", Admin: true, Created: created}); err != nil {
		t.Fatal(err)
	}
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	if err := e.st.AddToken(e.ctx, "alice", hash("tok")); err != nil {
		t.Fatal(err)
	}
	if err := e.st.AddMember(e.ctx, app, "bob", "editor"); err != nil {
		t.Fatal(err)
	}
	e.commit(e.write(app, "jobs", "x", "", "1-a", `{"status":"pending","n":1}`))
	e.commit(e.write(app, "jobs", "x", "1-a", "2-b", `{"status":"running","n":2}`))
	e.commit(e.write(app, "jobs", "y", "", "1-a", `{"status":"pending"}`))
	e.commit(e.write(app, "jobs", "z", "", "1-a", `{"status":"pending"}`))
	e.commit(e.write(app, "jobs", "z", "1-a", "2-d", ""))
	e.commit(e.write(app, "logs", "l", "", "1-a", `{"status":"pending"}`))
	otherSeq := e.commit(e.write(other, "jobs", "x", "", "1-a", `{"status":"pending"}`))
	q := store.Query{AppID: app, DB: "jobs", Field: "status", Key: []byte(`"pending"`), Limit: 100}
	wantIDs(t, docIDs(e.query(q)), []string{"y"}, "Query before reopen")
	before := fmt.Sprintf("%+v|%+v|%+v|%+v", e.get(app, "jobs", "x"), e.history(app, "jobs", "x"), e.changes(app, "", 0, 100), e.get(app, "jobs", "z"))
	seq := e.lastSeq(app)

	e.reopen()

	after := fmt.Sprintf("%+v|%+v|%+v|%+v", e.get(app, "jobs", "x"), e.history(app, "jobs", "x"), e.changes(app, "", 0, 100), e.get(app, "jobs", "z"))
	if before != after {
		t.Fatalf("documents changed across a reopen:\nbefore %s\nafter  %s", before, after)
	}
	if s := e.lastSeq(app); s != seq {
		t.Fatalf("LastSeq after reopen = %d, want %d", s, seq)
	}
	if u, err := e.st.User(e.ctx, "root"); err != nil || !u.Admin || !u.Created.Equal(created) {
		t.Fatalf("User(root) after reopen = %+v, %v", u, err)
	}
	if u, err := e.st.UserByToken(e.ctx, hash("tok")); err != nil || u.Name != "alice" {
		t.Fatalf("UserByToken after reopen = %+v, %v", u, err)
	}
	if a, err := e.st.App(e.ctx, "alice", "jobs"); err != nil || a.ID != app {
		t.Fatalf("App after reopen = %+v, %v", a, err)
	}
	if _, err := e.st.CreateApp(e.ctx, store.App{Owner: "alice", Name: "jobs", Created: created}); !errors.Is(err, store.ErrExists) {
		t.Fatalf("CreateApp(alice/jobs) after reopen: %v, want ErrExists", err)
	}
	if ms, err := e.st.Members(e.ctx, app); err != nil || len(ms) != 1 || ms[0] != (store.Member{User: "bob", Role: "editor"}) {
		t.Fatalf("Members after reopen = %+v, %v", ms, err)
	}
	if dbs, err := e.st.Databases(e.ctx, app); err != nil || !slices.Equal(dbs, []string{"jobs", "logs"}) {
		t.Fatalf("Databases after reopen = %q, %v", dbs, err)
	}
	wantIDs(t, docIDs(e.query(q)), []string{"y"}, "Query after reopen")

	// Writes go on where they stopped: the head check, the sequence and
	// the query index all continue.
	if _, err := e.st.Commit(e.ctx, e.write(app, "jobs", "x", "1-a", "2-z", `{}`)); !errors.Is(err, store.ErrHeadMoved) {
		t.Fatalf("stale commit after reopen: %v, want ErrHeadMoved", err)
	}
	s := e.commit(e.write(app, "jobs", "x", "2-b", "3-c", `{"status":"pending"}`))
	if s <= seq {
		t.Fatalf("first commit after reopen got seq %d, not above the last before it, %d", s, seq)
	}
	if s2 := e.commit(e.write(app, "jobs", "x", "3-c", "4-d", `{"status":"pending"}`)); s2 != s+1 {
		t.Fatalf("second commit after reopen got seq %d, want %d", s2, s+1)
	}
	if s := e.commit(e.write(other, "jobs", "x", "1-a", "2-b", `{}`)); s <= otherSeq {
		t.Fatalf("first commit of the other app after reopen got seq %d, not above its last before, %d", s, otherSeq)
	}
	wantIDs(t, docIDs(e.query(q)), []string{"x", "y"}, "Query after reopen and a write")
}
