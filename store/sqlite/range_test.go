package sqlite

import (
	"fmt"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/store"
)

// TestRangeQueryUsesFieldIndex: a range or prefix query walks the same
// expression index as the equality query, in (value, id) order, with no
// sort and no scan of the table, from its start and from a page's end.
func TestRangeQueryUsesFieldIndex(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir())
	app := newApp(t, st)
	var ws []*store.Write
	for i := range 200 {
		ws = append(ws, put(app, "jobs", fmt.Sprintf("d%03d", i), fmt.Sprintf(`{"name":"n%03d","n":%d}`, i, i%17)))
	}
	commitAll(t, st, ws)
	rec := recordReads(t, st)
	cases := []struct {
		field    string
		from, to string
		afterKey string
	}{
		{"n", `3`, `9`, ""},
		{"n", `3`, "", `4`},
		{"n", "", `"z"`, ""},
		{"name", `"n01"`, `"n02"`, `"n015"`},
		{"name", "", "", ""},
	}
	raw := func(s string) []byte {
		if s == "" {
			return nil
		}
		return []byte(s)
	}
	for _, c := range cases {
		q := store.Query{AppID: app, DB: "jobs", Field: c.field, Range: &store.Range{From: raw(c.from), To: raw(c.to)}, AfterKey: raw(c.afterKey), Limit: 7}
		if c.afterKey != "" {
			q.After = "d100"
		}
		plan := queryPlan(t, st, rec, q)
		// A lower bound on the value, so that the walk skips the
		// documents without the field.
		if !strings.Contains(plan, "USING INDEX "+indexName(c.field)+" (app_id=? AND db=? AND <expr>>") {
			t.Errorf("range %+v does not search the field's index: %s", c, plan)
		}
		if strings.Contains(plan, "TEMP B-TREE") || strings.Contains(plan, "SCAN") {
			t.Errorf("range %+v scans or sorts: %s", c, plan)
		}
	}
}
