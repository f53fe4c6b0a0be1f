package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/handoff-run/handoff/store"
)

// TestTransitionsOverValuesJSONRefuses: a ledger holding \u0000 or half a
// surrogate pair (written before documents were checked for them) still
// answers transitions for every field, and the count in Go that does it
// agrees with the SQL one on a clean ledger.
func TestTransitionsOverValuesJSONRefuses(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	type head struct {
		rev string
		seq int64
	}
	heads := map[string]head{}
	write := func(id, body string) {
		t.Helper()
		h := heads[id]
		w := &store.Write{AppID: app, DB: "jobs", ID: id, BaseRev: h.rev, PrevSeq: h.seq, Rev: h.rev + "1-" + id, Path: "http", Time: t0, Body: []byte(body)}
		seq, err := st.Commit(ctx, w)
		if err != nil {
			t.Fatal(err)
		}
		heads[id] = head{w.Rev, seq}
	}
	write("a", `{"status":"pending","o":{"s":"x"}}`)
	write("a", `{"status":"running","o":{"s":"y"},"n":[1, 2]}`)
	write("b", `{"status":"pending"}`)
	write("b", `{"status":"running","o":1}`)
	write("b", `{"status":"done","o":{"s":"a","s":"b"}}`)
	for _, f := range []string{"status", "o.s", "n", "missing"} {
		sql, err := st.Transitions(ctx, app, "jobs", f)
		if err != nil {
			t.Fatal(err)
		}
		inGo, err := st.transitionsInGo(ctx, app, "jobs", f)
		if err != nil || !slices.Equal(inGo, sql) {
			t.Fatalf("%s: in Go %v, %v\nin SQL %v", f, inGo, err, sql)
		}
	}

	write("c", `{"note":"a\u0000b"}`)
	write("c", `{"note":"\ud800","status":"pending"}`)
	for f, want := range map[string][]string{
		"status":  {` -> "pending" x2`, ` -> null x1`, `"pending" -> "running" x2`, `"running" -> "done" x1`, `null -> "pending" x1`},
		"note":    {` -> "a\u0000b" x1`, ` -> null x2`, `"a\u0000b" -> "\ud800" x1`, `null -> null x3`},
		"missing": {` -> null x3`, `null -> null x4`},
	} {
		ts, err := st.Transitions(ctx, app, "jobs", f)
		if err != nil {
			t.Fatalf("Transitions(%s): %v", f, err)
		}
		var got []string
		for _, tr := range ts {
			got = append(got, fmt.Sprintf("%s -> %s x%d", tr.From, tr.To, tr.Count))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("Transitions(%s) = %q\nwant %q", f, got, want)
		}
	}
}
