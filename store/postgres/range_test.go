package postgres

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/store"
)

// TestRangeQueryUsesRangeIndex: a range or prefix query searches the
// field's range index by its bounds and reads it in order (at most an
// incremental sort of ties on a long string's first characters), with
// the generic plan a prepared statement ends up with.
func TestRangeQueryUsesRangeIndex(t *testing.T) {
	t.Parallel()
	dbURL := freshDB(t)
	st := openAt(t, dbURL)
	defer func() { st.Close() }()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	commitMany(t, st, app, 2000, func(i int) string {
		return fmt.Sprintf(`{"name":"n%04d","n":%d,"lease":{"owner":"w%d"},"pad":"%s"}`, i, i%70, i%30, strings.Repeat("x", 3000*(i%2)))
	})
	raw := func(s string) []byte {
		if s == "" {
			return nil
		}
		return []byte(s)
	}
	cases := []struct{ field, from, to, afterKey string }{
		{"n", `3`, `9`, ""},
		{"n", `3`, ``, `4`},
		{"n", ``, `"z"`, ``},
		{"name", `"n01"`, `"n02"`, `"n015"`},
		{"name", ``, ``, ``},
		{"lease.owner", `"w1"`, `"w2"`, ``},
		{"pad", `""`, ``, ``},
	}
	if _, err := st.pool.Exec(ctx, `ANALYZE docs`); err != nil {
		t.Fatal(err)
	}
	sorted := regexp.MustCompile(`(?m)^\s*(->\s*)?Sort\s+\(`)
	for _, c := range cases {
		q := store.Query{AppID: app, DB: "jobs", Field: c.field, Range: &store.Range{From: raw(c.from), To: raw(c.to)}, AfterKey: raw(c.afterKey), Limit: 7}
		if c.afterKey != "" {
			q.After = "d1000"
		}
		if _, err := st.Query(ctx, q); err != nil {
			t.Fatal(err)
		}
		if _, err := st.pool.Exec(ctx, `ANALYZE docs`); err != nil {
			t.Fatal(err)
		}
		plan := explainRange(t, st, q)
		idx := rangeIndexName(c.field)
		if !strings.Contains(plan, "Index Scan using "+idx) || strings.Contains(plan, "Seq Scan") || sorted.MatchString(plan) {
			t.Fatalf("range %+v does not read index %s in order:\n%s", c, idx, plan)
		}
	}
}

// explainRange returns the generic plan of a range query.
func explainRange(t *testing.T, st *Store, q store.Query) string {
	t.Helper()
	x, err := rangeExprsOf(q.Field)
	if err != nil {
		t.Fatal(err)
	}
	sq, args, err := rangeSQL(x, q)
	if err != nil {
		t.Fatal(err)
	}
	lits := make([]string, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case string:
			lits[i] = quoteLiteral(v)
		case *int:
			lits[i] = fmt.Sprint(*v)
		default:
			lits[i] = fmt.Sprint(v)
		}
	}
	return explainGeneric(t, st, `AS `+sq, strings.Join(lits, ", "))
}
