package storetest

import (
	"fmt"
	"slices"
	"testing"

	"github.com/handoff-run/handoff/store"
)

func testStoreDatabases(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	if dbs, err := e.st.Databases(e.ctx, app); err != nil || len(dbs) != 0 {
		t.Fatalf("Databases of a new app = %q, %v", dbs, err)
	}
	for i, db := range []string{"zeta", "alpha", "alpha", "mid-1", "m_2"} {
		e.commit(e.write(app, db, fmt.Sprint("d", i), "", "1-a", `{}`))
	}
	e.commit(e.write(other, "bobs", "d", "", "1-a", `{}`))
	dbs, err := e.st.Databases(e.ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs(t, dbs, []string{"alpha", "m_2", "mid-1", "zeta"}, "Databases")
}

func testStoreScan(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	var ws []*store.Write
	var want []string
	for i := range 20 {
		id := fmt.Sprintf("d%02d", i)
		ws = append(ws, e.write(app, "jobs", id, "", "1-a", fmt.Sprintf(`{"i":%d}`, i)))
		if i != 5 {
			want = append(want, id)
		}
	}
	ws = append(ws, e.write(app, "other", "d00x", "", "1-a", `{}`))
	e.commitAll(ws)
	e.commit(e.write(app, "jobs", "d05", "1-a", "2-d", ""))
	scan := func(after string, limit int) []store.Doc {
		t.Helper()
		docs, err := e.st.Scan(e.ctx, app, "jobs", after, limit)
		if err != nil {
			t.Fatal(err)
		}
		return docs
	}
	all := scan("", 100)
	wantIDs(t, docIDs(all), want, "Scan")
	for _, d := range all {
		if d.Rev != "1-a" || d.DB != "jobs" || d.Deleted {
			t.Fatalf("Scan doc %+v", d)
		}
	}
	wantJSON(t, all[3].Body, `{"i":3}`, "Scan body")
	wantIDs(t, docIDs(scan("d10", 3)), []string{"d11", "d12", "d13"}, "Scan after d10 limit 3")
	wantIDs(t, docIDs(scan("d04", 2)), []string{"d06", "d07"}, "Scan over a tombstone")
	wantIDs(t, docIDs(scan("d19", 10)), nil, "Scan after the last")
	wantIDs(t, docIDs(scan("d1", 2)), []string{"d10", "d11"}, "Scan after a prefix")
}

// queryCorpus is a database of values that look alike but are not equal.
var queryCorpus = map[string]string{
	"s1":   `{"status":"pending"}`,
	"s2":   `{"status":"running"}`,
	"s3":   `{"status":"pending","v":1}`,
	"s4":   `{"status":"Pending"}`,
	"s5":   `{"status":"pending "}`,
	"n1":   `{"v":1}`,
	"n2":   `{"v":1.0}`,
	"n3":   `{"v":2}`,
	"n4":   `{"v":-3.5}`,
	"n5":   `{"v":1e3}`,
	"t1":   `{"v":true}`,
	"f1":   `{"v":false}`,
	"z1":   `{"v":0}`,
	"q1":   `{"v":"1"}`,
	"q2":   `{"v":"true"}`,
	"q3":   `{"v":"0"}`,
	"q4":   `{"v":""}`,
	"nl":   `{"v":null}`,
	"ms":   `{"w":1}`,
	"ob":   `{"v":{"x":1}}`,
	"ar":   `{"v":[1]}`,
	"u1":   `{"v":"it's \"quoted\" – ü \\ done"}`,
	"ne1":  `{"a":{"b":{"c":"deep"}},"v":"x"}`,
	"ne2":  `{"a":{"b":"x"}}`,
	"ne3":  `{"a":{"b":1}}`,
	"ne4":  `{"a":"x"}`,
	"dot":  `{"a.b":"x"}`,
	"dash": `{"my-field":"x","my_field":"y"}`,
}

var queryCases = []struct {
	field, key string
	want       []string
}{
	{"status", `"pending"`, []string{"s1", "s3"}},
	{"status", `"running"`, []string{"s2"}},
	{"status", `"nothing"`, nil},
	{"v", `1`, []string{"n1", "n2", "s3"}},
	{"v", `1.0`, []string{"n1", "n2", "s3"}},
	{"v", `2`, []string{"n3"}},
	{"v", `-3.5`, []string{"n4"}},
	{"v", `1000`, []string{"n5"}},
	{"v", `true`, []string{"t1"}},
	{"v", `false`, []string{"f1"}},
	{"v", `0`, []string{"z1"}},
	{"v", `"1"`, []string{"q1"}},
	{"v", `"true"`, []string{"q2"}},
	{"v", `"0"`, []string{"q3"}},
	{"v", `""`, []string{"q4"}},
	{"v", `null`, []string{"nl"}},
	{"v", `"x"`, []string{"ne1"}},
	{"v", `"it's \"quoted\" – ü \\ done"`, []string{"u1"}},
	{"a.b", `"x"`, []string{"ne2"}},
	{"a.b", `1`, []string{"ne3"}},
	{"a.b.c", `"deep"`, []string{"ne1"}},
	{"a", `"x"`, []string{"ne4"}},
	{"my-field", `"x"`, []string{"dash"}},
	{"my_field", `"y"`, []string{"dash"}},
	{"missing", `1`, nil},
}

func testStoreQueryValues(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	var ws []*store.Write
	for _, id := range sortedKeys(queryCorpus) {
		ws = append(ws, e.write(app, "jobs", id, "", "1-a", queryCorpus[id]))
	}
	e.commitAll(ws)
	for _, c := range queryCases {
		got := e.query(store.Query{AppID: app, DB: "jobs", Field: c.field, Key: []byte(c.key), Limit: 100})
		wantIDs(t, docIDs(got), c.want, fmt.Sprintf("Query(%s = %s)", c.field, c.key))
		for _, d := range got {
			if d.DB != "jobs" || d.Rev != "1-a" || d.Deleted || d.Seq == 0 {
				t.Fatalf("Query(%s = %s) returned %+v", c.field, c.key, d)
			}
			wantJSON(t, d.Body, queryCorpus[d.ID], "Query body")
		}
	}
}

func testStoreQueryScope(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	other := e.app("bob", "jobs")
	e.commitAll([]*store.Write{
		e.write(app, "jobs", "a1", "", "1-a", `{"status":"pending"}`),
		e.write(app, "jobs", "a2", "", "1-a", `{"status":"pending"}`),
		e.write(app, "jobs", "a3", "", "1-a", `{"status":"pending"}`),
		e.write(app, "other", "o1", "", "1-a", `{"status":"pending"}`),
		e.write(other, "jobs", "b1", "", "1-a", `{"status":"pending"}`),
	})
	e.commit(e.write(app, "jobs", "a2", "1-a", "2-d", ""))
	e.commit(e.write(app, "jobs", "a3", "1-a", "2-b", `{"status":"running"}`))
	q := func(db, key string) []string {
		return docIDs(e.query(store.Query{AppID: app, DB: db, Field: "status", Key: []byte(key), Limit: 100}))
	}
	wantIDs(t, q("jobs", `"pending"`), []string{"a1"}, "Query(pending) without deleted, updated, other db and other app")
	wantIDs(t, q("jobs", `"running"`), []string{"a3"}, "Query(running) sees the new head")
	wantIDs(t, q("other", `"pending"`), []string{"o1"}, "Query(other db)")
	wantIDs(t, q("nodb", `"pending"`), nil, "Query(unknown db)")
	e.commit(e.write(app, "jobs", "a2", "2-d", "3-r", `{"status":"pending"}`))
	wantIDs(t, q("jobs", `"pending"`), []string{"a1", "a2"}, "Query after resurrection")
}

func testStoreQueryPagination(t *testing.T, e *env) {
	app := e.app("alice", "jobs")
	var ws []*store.Write
	var want []string
	for i := range 300 {
		id := fmt.Sprintf("doc%04d", (i*7919)%300) // written out of id order
		status := "pending"
		if i%6 == 0 {
			status = "done"
		} else {
			want = append(want, id)
		}
		ws = append(ws, e.write(app, "jobs", id, "", "1-a", fmt.Sprintf(`{"status":%q}`, status)))
	}
	slices.Sort(want)
	e.commitAll(ws)
	var got []string
	after := ""
	for pages := 0; ; pages++ {
		docs := e.query(store.Query{AppID: app, DB: "jobs", Field: "status", Key: []byte(`"pending"`), After: after, Limit: 7})
		if len(docs) > 7 {
			t.Fatalf("page of %d docs with limit 7", len(docs))
		}
		got = append(got, docIDs(docs)...)
		if len(docs) < 7 {
			break
		}
		after = docs[len(docs)-1].ID
		if pages > 100 {
			t.Fatal("pagination does not end")
		}
	}
	if len(want) != 250 {
		t.Fatalf("test corpus has %d matching docs, want 250", len(want))
	}
	wantIDs(t, got, want, "paged Query")
}
