package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/sqlite"
)

// bothStores runs fn against a fresh PostgreSQL store and a fresh SQLite
// store, so behaviour the conformance suite does not cover is checked to
// be the same.
func bothStores(t *testing.T, fn func(t *testing.T, st store.Store)) {
	t.Run("postgres", func(t *testing.T) {
		st := openAt(t, freshDB(t))
		defer st.Close()
		fn(t, st)
	})
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		fn(t, st)
	})
}

// settled waits for settlements the embedded store applies after they
// return: a commit queued behind them is durable only after them.
func settled(t *testing.T, st store.Store, app int64) {
	t.Helper()
	if _, err := st.Commit(context.Background(), &store.Write{AppID: app, DB: "flush", ID: fmt.Sprint(time.Now().UnixNano()),
		Rev: "1-a", Body: []byte(`{}`), Path: "http", Time: t0}); err != nil {
		t.Fatal(err)
	}
}

// TestEvents checks the outbox on both stores: claims in seq order, due
// times, leases, settlements, dead events and replays, the old revision,
// ticks.
func TestEvents(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		app := newApp(t, st, "jobs")
		other := newApp(t, st, "other")
		if apps, err := st.EventApps(ctx); err != nil || len(apps) != 0 {
			t.Fatalf("EventApps of a new store = %v, %v", apps, err)
		}
		if _, ok, err := st.NextEventDue(ctx, app); err != nil || ok {
			t.Fatalf("NextEventDue without events = %v, %v", ok, err)
		}
		s1 := putEvent(t, st, app, "a", t0)
		s2 := putEvent(t, st, app, "b", t0.Add(time.Second))
		s3 := putEvent(t, st, app, "c", t0.Add(-time.Second))
		// An update: its event carries the revision it replaced.
		w := &store.Write{AppID: app, DB: "jobs", ID: "a", BaseRev: "1-a", PrevSeq: s1, Rev: "2-b",
			Body: []byte(`{"n":2}`), Path: "http", Time: t0, Event: &store.EventSpec{Depth: 2, NextAt: t0}}
		s4, err := st.Commit(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		putEvent(t, st, other, "x", t0)
		// Without an event spec, no event.
		if _, err := st.Commit(ctx, &store.Write{AppID: app, DB: "jobs", ID: "quiet", Rev: "1-a", Body: []byte(`{}`), Path: "http", Time: t0}); err != nil {
			t.Fatal(err)
		}
		apps, err := st.EventApps(ctx)
		slices.Sort(apps)
		if err != nil || !slices.Equal(apps, []int64{app, other}) {
			t.Fatalf("EventApps = %v, %v", apps, err)
		}
		if at, ok, err := st.NextEventDue(ctx, app); err != nil || !ok || !at.Equal(t0.Add(-time.Second)) {
			t.Fatalf("NextEventDue = %v, %v, %v", at, ok, err)
		}
		// Exclusive, so a's two events come together.
		evs, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0, Limit: 10, Lease: time.Minute, Exclusive: true})
		if err != nil || !slices.Equal(seqsOf(evs), []int64{s1, s3, s4}) {
			t.Fatalf("claim at t0 = %v, %v; want %v (b is not due)", seqsOf(evs), err, []int64{s1, s3, s4})
		}
		if ev := evs[0]; ev.AppID != app || ev.Rev.ID != "a" || ev.Rev.Rev != "1-a" || ev.Old != nil || string(ev.Rev.Body) != `{"n":1}` ||
			ev.Rev.Writer != (store.Writer{}) || ev.Rev.Path != "http" || !ev.Rev.Time.Equal(t0) || !ev.NextAt.Equal(t0) {
			t.Fatalf("event of a new document = %+v", ev)
		}
		if ev := evs[2]; ev.Depth != 2 || ev.Old == nil || ev.Old.Rev != "1-a" || ev.Old.Seq != s1 || string(ev.Old.Body) != `{"n":1}` || string(ev.Rev.Body) != `{"n":2}` {
			t.Fatalf("event of an update = %+v, old %+v", ev, ev.Old)
		}
		if evs, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0.Add(2 * time.Second), Limit: 10, Lease: time.Minute}); err != nil || !slices.Equal(seqsOf(evs), []int64{s2}) {
			t.Fatalf("second claim = %v, %v; want only %d, the others are leased", seqsOf(evs), err, s2)
		}
		// Settle: ack s1, retry s3 later, kill s4.
		if err := st.SettleEvent(ctx, app, s1, store.Settlement{Ack: true}); err != nil {
			t.Fatal(err)
		}
		if err := st.SettleEvent(ctx, app, s3, store.Settlement{Attempts: 1, NextAt: t0.Add(10 * time.Second), LastError: "boom"}); err != nil {
			t.Fatal(err)
		}
		if err := st.SettleEvent(ctx, app, s4, store.Settlement{Dead: true, Attempts: 5, NextAt: t0, LastError: "dead\x00end"}); err != nil {
			t.Fatal(err)
		}
		settled(t, st, app)
		if evs, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0.Add(9 * time.Second), Limit: 10, Lease: time.Minute}); err != nil || len(evs) != 0 {
			t.Fatalf("claim before the retry = %v, %v", seqsOf(evs), err)
		}
		evs, err = st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0.Add(10 * time.Second), Limit: 10, Lease: time.Minute})
		if err != nil || !slices.Equal(seqsOf(evs), []int64{s3}) || evs[0].Attempts != 1 || evs[0].LastError != "boom" {
			t.Fatalf("claim of the retry = %+v, %v", evs, err)
		}
		dead, err := st.ListEvents(ctx, app, true, 0, 10)
		if err != nil || !slices.Equal(seqsOf(dead), []int64{s4}) || dead[0].Attempts != 5 || !dead[0].Dead || !strings.HasPrefix(dead[0].LastError, "dead") {
			t.Fatalf("dead events = %+v, %v", dead, err)
		}
		live, err := st.ListEvents(ctx, app, false, 0, 10)
		if err != nil || !slices.Equal(seqsOf(live), []int64{s2, s3}) {
			t.Fatalf("live events = %v, %v", seqsOf(live), err)
		}
		if live, err := st.ListEvents(ctx, app, false, s2, 10); err != nil || !slices.Equal(seqsOf(live), []int64{s3}) {
			t.Fatalf("live events after %d = %v, %v", s2, seqsOf(live), err)
		}
		if err := st.ReplayEvent(ctx, app, s3, t0); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("ReplayEvent of a live event: %v, want ErrNotFound", err)
		}
		if err := st.ReplayEvent(ctx, app, s4, t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		evs, err = st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0.Add(time.Hour), Limit: 10, Lease: time.Minute})
		if err != nil || len(evs) != 3 || evs[2].Seq != s4 || evs[2].Attempts != 0 || evs[2].Dead || evs[2].LastError != "" {
			t.Fatalf("claim after replay and the leases' end = %+v, %v", evs, err)
		}
		for _, ev := range evs {
			if err := st.SettleEvent(ctx, app, ev.Seq, store.Settlement{Ack: true}); err != nil {
				t.Fatal(err)
			}
		}
		settled(t, st, app)
		if apps, err := st.EventApps(ctx); err != nil || !slices.Equal(apps, []int64{other}) {
			t.Fatalf("EventApps after every ack = %v, %v", apps, err)
		}

		// Ticks.
		if tk, err := st.LastTick(ctx, app); err != nil || tk != nil {
			t.Fatalf("LastTick before any = %+v, %v", tk, err)
		}
		for i := range 2 {
			want := store.Tick{Planned: t0.Add(time.Duration(i) * time.Minute), Started: t0.Add(time.Duration(i)*time.Minute + time.Millisecond),
				Duration: 1500 * time.Microsecond, Error: fmt.Sprint("e", i)}
			if err := st.SaveTick(ctx, app, want); err != nil {
				t.Fatal(err)
			}
			got, err := st.LastTick(ctx, app)
			if err != nil || got == nil || !got.Planned.Equal(want.Planned) || !got.Started.Equal(want.Started) || got.Duration != want.Duration || got.Error != want.Error {
				t.Fatalf("LastTick = %+v, %v; want %+v", got, err, want)
			}
		}
	})
}

// TestLogs: lines come back in order, free text that a text column cannot
// hold is kept readable.
func TestLogs(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		app := newApp(t, st, "jobs")
		var lines []store.LogLine
		for i := range 5 {
			lines = append(lines, store.LogLine{AppID: app, Time: t0.Add(time.Duration(i)), Level: "info", Source: "onChange",
				Message: fmt.Sprint("line ", i), Fields: []byte(fmt.Sprintf(`{"i":%d}`, i))})
		}
		lines[4].Fields = nil
		lines[3].Message = "nul\x00 and \xff"
		if err := st.AppendLogs(ctx, lines); err != nil {
			t.Fatal(err)
		}
		settled(t, st, app)
		got, err := st.Logs(ctx, app, 0, 100)
		if err != nil || len(got) != 5 {
			t.Fatalf("Logs = %+v, %v", got, err)
		}
		for i, l := range got {
			if !l.Time.Equal(lines[i].Time) || l.Source != "onChange" || string(l.Fields) != string(lines[i].Fields) || (i != 3 && l.Message != lines[i].Message) {
				t.Fatalf("line %d = %+v, want %+v", i, l, lines[i])
			}
		}
		if !strings.HasPrefix(got[3].Message, "nul") {
			t.Fatalf("line with a NUL = %q", got[3].Message)
		}
		if more, err := st.Logs(ctx, app, got[1].ID, 2); err != nil || len(more) != 2 || more[0].ID != got[2].ID {
			t.Fatalf("Logs after %d = %+v, %v", got[1].ID, more, err)
		}
	})
}

// TestBodiesExact: reads return the body text exactly as committed, even
// where jsonb would change it (key order, spacing, number forms, \u0000),
// and field queries still find it.
func TestBodiesExact(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		app := newApp(t, st, "jobs")
		bodies := map[string]string{
			"order": `{"zz":1,"a":{"y":[1,2.50],"b":true},"m":"x"}`,
			"nums":  `{"v":1.0,"w":1e3,"big":123456789012345678901234567890}`,
			"nul":   `{"s":"a\u0000b","lone":"\ud800","pair":"\ud83d\ude00"}`,
			"html":  `{"h":"<a href=\"x\">&amp;</a>","u":"ü\u2028"}`,
		}
		for id, body := range bodies {
			if _, err := st.Commit(ctx, &store.Write{AppID: app, DB: "jobs", ID: id, Rev: "1-a", Body: []byte(body), Path: "http", Time: t0}); err != nil {
				t.Fatalf("commit %s: %v", id, err)
			}
		}
		for id, body := range bodies {
			d, err := st.Get(ctx, app, "jobs", id)
			if err != nil || string(d.Body) != body {
				t.Fatalf("Get(%s) = %s, %v; want %s", id, d.Body, err, body)
			}
			h, err := st.History(ctx, app, "jobs", id)
			if err != nil || string(h[0].Body) != body {
				t.Fatalf("History(%s) = %s, %v", id, h[0].Body, err)
			}
		}
		for _, c := range []struct{ field, key, want string }{
			{"m", `"x"`, "order"}, {"a.b", `true`, "order"}, {"a.y", `[1,2.50]`, "order"}, {"v", `1`, "nums"}, {"w", `1000`, "nums"},
			{"big", `123456789012345678901234567890`, "nums"}, {"s", `"a\u0000b"`, "nul"}, {"pair", `"😀"`, "nul"},
			{"h", `"<a href=\"x\">&amp;</a>"`, "html"},
		} {
			docs, err := st.Query(ctx, store.Query{AppID: app, DB: "jobs", Field: c.field, Key: []byte(c.key), Limit: 10})
			if err != nil || len(docs) != 1 || docs[0].ID != c.want || string(docs[0].Body) != bodies[c.want] {
				t.Fatalf("Query(%s = %s) = %+v, %v; want %s", c.field, c.key, docs, err, c.want)
			}
		}
	})
}

// TestTransitions: the same counts on both stores, values as JSON text.
func TestTransitions(t *testing.T) {
	t.Parallel()
	// The comparison needs both stores: without PostgreSQL skip it whole.
	needPostgres(t)
	results := map[string][]string{}
	var mu sync.Mutex
	bothStores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		app := newApp(t, st, "jobs")
		heads := map[string]struct {
			rev string
			seq int64
		}{}
		write := func(id, body string) {
			h := heads[id]
			rev := fmt.Sprintf("%d-x", len(h.rev)+1)
			w := &store.Write{AppID: app, DB: "jobs", ID: id, BaseRev: h.rev, PrevSeq: h.seq, Rev: rev + h.rev, Path: "http", Time: t0}
			if body == "" {
				w.Deleted = true
			} else {
				w.Body = []byte(body)
			}
			seq, err := st.Commit(ctx, w)
			if err != nil {
				t.Fatal(err)
			}
			heads[id] = struct {
				rev string
				seq int64
			}{w.Rev, seq}
		}
		for i := range 3 {
			id := fmt.Sprint("j", i)
			write(id, `{"status":"pending","o":{"s":"a \"q\" ü"}}`)
			write(id, `{"status":"running","n":7,"o":{"s":"b"}}`)
			if i == 2 {
				write(id, "")
				write(id, `{"status":"pending"}`)
				continue
			}
			write(id, `{"status":"done","n":null}`)
		}
		for _, field := range []string{"status", "n", "o.s", "missing"} {
			ts, err := st.Transitions(ctx, app, "jobs", field)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, tr := range ts {
				out = append(out, fmt.Sprintf("%s: %s -> %s x%d", field, tr.From, tr.To, tr.Count))
			}
			slices.Sort(out)
			mu.Lock()
			results[t.Name()] = append(results[t.Name()], out...)
			mu.Unlock()
		}
	})
	pg, lite := results[t.Name()+"/postgres"], results[t.Name()+"/sqlite"]
	if len(pg) == 0 || !slices.Equal(pg, lite) {
		t.Fatalf("Transitions differ:\npostgres %q\nsqlite   %q", pg, lite)
	}
}

// TestQueryUsesFieldIndex: a field query searches the field's index by
// equality and reads it in id order (no sort), with the generic plan a
// prepared statement ends up with, and the index survives a reopen.
func TestQueryUsesFieldIndex(t *testing.T) {
	t.Parallel()
	dbURL := freshDB(t)
	st := openAt(t, dbURL)
	defer func() { st.Close() }()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	commitMany(t, st, app, 2000, func(i int) string {
		return fmt.Sprintf(`{"status":"s%d","n":%d,"ok":%v,"lease":{"owner":"w%d"},"pad":"%s"}`, i%50, i%70, i%2 == 0, i%30, strings.Repeat("x", 2000*(i%2)))
	})
	cases := []struct{ field, key string }{{"status", `"s1"`}, {"n", `3`}, {"n", `2.5`}, {"ok", `true`}, {"lease.owner", `"w1"`}, {"pad", `"x"`}}
	check := func(st *Store, when string) {
		t.Helper()
		for _, c := range cases {
			if _, err := st.Query(ctx, store.Query{AppID: app, DB: "jobs", Field: c.field, Key: []byte(c.key), Limit: 7}); err != nil {
				t.Fatal(err)
			}
			plan := explainQuery(t, st, c.field, app, c.key)
			idx := indexName(c.field)
			if !strings.Contains(plan, "Index Scan using "+idx) || strings.Contains(plan, "Sort") || strings.Contains(plan, "Seq Scan") {
				t.Fatalf("%s: Query(%s = %s) does not read index %s in order:\n%s", when, c.field, c.key, idx, plan)
			}
		}
	}
	if _, err := st.pool.Exec(ctx, `ANALYZE docs`); err != nil {
		t.Fatal(err)
	}
	check(st, "first use")
	st.Close()
	st = openAt(t, dbURL)
	for _, c := range cases {
		if _, ok := st.indexes.Load(indexName(c.field)); !ok {
			t.Errorf("after reopen the store does not know the index of %s", c.field)
		}
	}
	check(st, "after reopen")
	var n int
	if err := st.pool.QueryRow(ctx, `SELECT count(*) FROM pg_indexes WHERE tablename = 'docs' AND indexname LIKE 'docs\_field\_%'`).Scan(&n); err != nil || n != 5 {
		t.Fatalf("%d field indexes, %v; want one per field (5)", n, err)
	}
}

// explainQuery returns the generic plan of the field query.
func explainQuery(t *testing.T, st *Store, field string, app int64, key string) string {
	t.Helper()
	q, err := querySQL(field)
	if err != nil {
		t.Fatal(err)
	}
	return explainGeneric(t, st, `(int8, text, jsonb, text, int8) AS `+q, fmt.Sprintf(`%d, 'jobs', %s, '', 7`, app, quoteLiteral(key)))
}

// explainGeneric prepares "stmt" (its parameter types, AS, the query)
// and returns the generic plan of executing it with args (SQL literals).
func explainGeneric(t *testing.T, st *Store, stmt, args string) string {
	t.Helper()
	return plans(t, st, `SET LOCAL plan_cache_mode = force_generic_plan`, []planCase{{name: "fq", params: stmt, args: "(" + args + ")"}})[0]
}

// commitMany commits n documents d0000... with body(i), 16 at a time.
func commitMany(t *testing.T, st *Store, app int64, n int, body func(i int) string) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			w := &store.Write{AppID: app, DB: "jobs", ID: fmt.Sprintf("d%04d", i), Rev: "1-a", Body: []byte(body(i)), Path: "http", Time: t0}
			if _, err := st.Commit(context.Background(), w); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// TestMigrationsConcurrent: nodes starting at once on an empty database
// apply each migration once; a database newer than the code is refused.
func TestMigrationsConcurrent(t *testing.T) {
	t.Parallel()
	dbURL := emptyDB(t)
	var wg sync.WaitGroup
	stores := make([]*Store, 4)
	for i := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := Open(context.Background(), dbURL)
			if err != nil {
				t.Error(err)
				return
			}
			stores[i] = st
		}()
	}
	wg.Wait()
	for _, st := range stores {
		if st != nil {
			defer st.Close()
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	ctx := context.Background()
	var n, max int
	if err := stores[0].pool.QueryRow(ctx, `SELECT count(*), max(version) FROM schema_migrations`).Scan(&n, &max); err != nil || n != len(migrations) || max != len(migrations) {
		t.Fatalf("schema_migrations has %d rows up to %d, %v; want %d", n, max, err, len(migrations))
	}
	if _, err := stores[0].pool.Exec(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, len(migrations)+1); err != nil {
		t.Fatal(err)
	}
	if st, err := Open(ctx, dbURL); err == nil || !strings.Contains(err.Error(), "upgrade handoff") {
		if st != nil {
			st.Close()
		}
		t.Fatalf("Open of a newer schema: %v, want a refusal", err)
	}
}

// TestCommitAfterClose fails cleanly.
func TestCommitAfterClose(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	app := newApp(t, st, "jobs")
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := st.Commit(context.Background(), &store.Write{AppID: app, DB: "jobs", ID: "x", Rev: "1-a", Body: []byte(`{}`), Path: "http", Time: t0}); err == nil {
		t.Fatal("Commit after Close succeeded")
	}
}

func TestJSONBText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"a":"b"}`:                   `{"a":"b"}`,
		`{"a":"\u0000"}`:              `{"a":"\ufffd"}`,
		`{"a":"\\u0000"}`:             `{"a":"\\u0000"}`,
		`{"a":"\\\u0000"}`:            `{"a":"\\\ufffd"}`,
		`{"a":"\ud800"}`:              `{"a":"\ufffd"}`,
		`{"a":"\udc00\ud800x"}`:       `{"a":"\ufffd\ufffdx"}`,
		`{"a":"\ud83d\ude00\u00e9"}`:  `{"a":"\ud83d\ude00\u00e9"}`,
		`{"a":"\ud83d\u0041"}`:        `{"a":"\ufffd\u0041"}`,
		`{"\u0000":1,"b":"\u2028\n"}`: `{"\ufffd":1,"b":"\u2028\n"}`,
	} {
		if got := jsonbText([]byte(in)); got != want {
			t.Errorf("jsonbText(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestClaimOrder: a claim takes the lowest due seqs whether they are new
// or their lease ran out, and passes over those still leased, the same
// on both stores.
func TestClaimOrder(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, st store.Store) {
		ctx := context.Background()
		app := newApp(t, st, "jobs")
		var seqs []int64
		for i := range 6 {
			seqs = append(seqs, putEvent(t, st, app, fmt.Sprint("e", i), t0))
		}
		short, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0, Limit: 2, Lease: time.Second})
		if err != nil || !slices.Equal(seqsOf(short), seqs[:2]) {
			t.Fatalf("first claim = %v, %v; want %v", seqsOf(short), err, seqs[:2])
		}
		long, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0, Limit: 1, Lease: time.Hour})
		if err != nil || !slices.Equal(seqsOf(long), seqs[2:3]) {
			t.Fatalf("second claim = %v, %v; want %v", seqsOf(long), err, seqs[2:3])
		}
		later := t0.Add(2 * time.Second)
		got, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: later, Limit: 4, Lease: time.Hour})
		want := []int64{seqs[0], seqs[1], seqs[3], seqs[4]}
		if err != nil || !slices.Equal(seqsOf(got), want) {
			t.Fatalf("claim after the short leases ran out = %v, %v; want %v", seqsOf(got), err, want)
		}
	})
}

// TestClaimPlanUsesIndexes: with many events leased and many waiting, a
// claim reads its candidates from the two claim indexes, in the plan it
// runs with, and touches no other row than those it picks: no scan of
// the app's events or of its ledger.
func TestClaimPlanUsesIndexes(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	if _, err := st.pool.Exec(ctx, `INSERT INTO events (app_id, seq, depth, next_at, lease_until, lease_owner, db, doc_id)
		SELECT $1, i, 0, 0, CASE WHEN i <= 2000 THEN 9e18::int8 ELSE 0 END, CASE WHEN i <= 2000 THEN 'other' ELSE '' END, 'jobs', 'j' || i
		FROM generate_series(1, 5000) i`, app); err != nil {
		t.Fatal(err)
	}
	if _, err := st.pool.Exec(ctx, `INSERT INTO revisions (app_id, seq, db, id, rev, deleted, time, path, prev_seq)
		SELECT $1, i, 'jobs', 'j' || i, '1-a', false, 0, 'http', greatest(i - 100, 0) FROM generate_series(1, 5000) i`, app); err != nil {
		t.Fatal(err)
	}
	// As autovacuum would after such growth: the claim is planned for
	// the tables as their statistics describe them.
	if _, err := st.pool.Exec(ctx, `ANALYZE events, revisions`); err != nil {
		t.Fatal(err)
	}
	plan := plans(t, st, sqlClaimPlan, []planCase{{name: "claim", params: `(int8, int8, int8, int8, text, bool)`, sql: sqlClaim,
		args: fmt.Sprintf(`(%d, 1000, 10, 2000, 'me', true)`, app)}})[0]
	if !strings.Contains(plan, "using events_free") || !strings.Contains(plan, "using events_lease_end") ||
		!strings.Contains(plan, "using revisions_pkey") || !strings.Contains(plan, "using events_by_doc") ||
		strings.Contains(plan, "Seq Scan") || strings.Contains(plan, "Bitmap Heap Scan") {
		t.Errorf("the claim reads more than the claim indexes and the rows it picks:\n%s", plan)
	}
}

// TestClaimPassesOverHeldEvents: events other claims hold (locked, not
// yet leased) are passed over without waiting, and a claim still gets its
// limit from the events after them: a short claim means nothing else was
// free, even behind another node's claim of 100.
func TestClaimPassesOverHeldEvents(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	var seqs []int64
	for i := range 130 {
		seqs = append(seqs, putEvent(t, st, app, fmt.Sprint("e", i), t0))
	}
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM events WHERE app_id = $1 AND seq <= $2 FOR UPDATE`, app, seqs[99]); err != nil {
		t.Fatal(err)
	}
	got, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0, Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if want := seqs[100:110]; !slices.Equal(seqsOf(got), want) {
		t.Fatalf("claim behind 100 held events = %v, want %v", seqsOf(got), want)
	}
}

// TestExclusiveClaimLargeAppID: the claim lock's key folds any int8 app id
// into the lock's int4 space; an app id past 2^31 claims like any other.
func TestExclusiveClaimLargeAppID(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	for _, id := range []int64{1<<31 + 5, 1<<62 + 7} {
		if evs, err := st.ClaimEvents(context.Background(), store.Claim{AppID: id, Now: time.Now(), Limit: 10, Lease: time.Minute, Exclusive: true}); err != nil || len(evs) != 0 {
			t.Fatalf("exclusive ClaimEvents(app %d) = %v, %v", id, evs, err)
		}
	}
}
