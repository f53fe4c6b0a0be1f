package main

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
	"github.com/handoff-run/handoff/store/sqlite"
)

// TestMigrateCopiesDocumentsWrittenBeforeTheValueRules: an embedded store
// may hold documents with numbers past float64, \u0000 or lone
// surrogates, and log lines with NUL, from before such values were
// refused. The migration copies them all, reads them back unchanged,
// lists the documents that field queries will not find, and goes on.
func TestMigrateCopiesDocumentsWrittenBeforeTheValueRules(t *testing.T) {
	t.Parallel()
	pg := freshPostgres(t, 4)
	data := t.TempDir()
	ctx := context.Background()
	lite, err := sqlite.Open(data)
	if err != nil {
		t.Fatal(err)
	}
	e := engine.New(lite, engine.Options{})
	admin := engine.Actor{User: engine.AdminUser, Admin: true}
	if _, err := e.Bootstrap(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateApp(ctx, admin, "admin/old", false); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Put(ctx, admin, "admin/old", "jobs", "fine", []byte(`{"status":"done"}`), appcode.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	app, err := lite.App(ctx, engine.AdminUser, "old")
	if err != nil {
		t.Fatal(err)
	}
	// What older servers stored without a word.
	bad := map[string]string{
		"huge":  `{"status":"done","n":1e999999}`,
		"long":  `{"status":"done","n":` + strings.Repeat("9", 20000) + `}`,
		"nul":   `{"status":"done","s":"a\u0000b"}`,
		"lone":  `{"status":"done","\ud800":1}`,
		"small": `{"status":"done","n":1e-400}`,
	}
	now := time.Now()
	for id, body := range bad {
		if _, err := lite.Commit(ctx, &store.Write{AppID: app.ID, DB: "jobs", ID: id, Rev: "1-" + id, Body: []byte(body), Path: "http", Time: now}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lite.AppendLogs(ctx, []store.LogLine{{AppID: app.ID, Time: now, Level: "info", Source: "onChange", Message: "a\x00b \xff"}}); err != nil {
		t.Fatal(err)
	}
	if err := lite.Close(); err != nil {
		t.Fatal(err)
	}

	r := handoff(t, "", "", "", "migrate", "--from", data, "--to", pg)
	if r.code != 0 {
		t.Fatalf("migrate: %s", r)
	}
	var counts map[string]migrateCounts
	if err := json.Unmarshal([]byte(r.stdout), &counts); err != nil || !reflect.DeepEqual(counts["from"], counts["to"]) {
		t.Fatalf("migrate printed %q: %v", r.stdout, err)
	}
	if !strings.Contains(r.stderr, "5 documents hold values") {
		t.Errorf("migrate did not report the documents: %s", r.stderr)
	}
	for id := range bad {
		if !strings.Contains(r.stderr, "admin/old jobs "+id+": invalid: document ") {
			t.Errorf("migrate did not name %s: %s", id, r.stderr)
		}
	}
	if strings.Contains(r.stderr, "jobs fine") {
		t.Errorf("migrate named a fine document: %s", r.stderr)
	}

	st, err := postgres.Open(ctx, pg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for id, body := range bad {
		d, err := st.Get(ctx, app.ID, "jobs", id)
		if err != nil || d == nil || string(d.Body) != body {
			t.Errorf("Get(%s) on PostgreSQL = %+v, %v", id, d, err)
		}
	}
	docs, err := st.Query(ctx, store.Query{AppID: app.ID, DB: "jobs", Field: "status", Key: []byte(`"done"`), Limit: 10})
	if err != nil || len(docs) != 1 || docs[0].ID != "fine" {
		t.Errorf("Query(status = done) on PostgreSQL = %+v, %v; want the one document it can index", docs, err)
	}
	if ts, err := st.Transitions(ctx, app.ID, "jobs", "status"); err != nil || len(ts) != 1 || ts[0].Count != 6 {
		t.Errorf("Transitions on PostgreSQL = %+v, %v", ts, err)
	}
	lines, err := st.Logs(ctx, app.ID, 0, 10)
	if err != nil || len(lines) != 1 || lines[0].Message != "a\uFFFDb \uFFFD" {
		t.Errorf("Logs on PostgreSQL = %+v, %v", lines, err)
	}
}
