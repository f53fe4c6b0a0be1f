package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
)

// rangeCases query queryCorpus by range and prefix: numbers before
// strings, numbers by value, strings by bytes, ties by id.
var rangeCases = []struct {
	field    string
	from, to string // JSON; "" leaves the end open
	prefix   *string
	want     []string
}{
	{"v", `0`, `2`, nil, []string{"z1", "n1", "n2", "s3"}},
	{"v", `1`, ``, nil, []string{"n1", "n2", "s3", "n3", "n5", "q4", "q3", "q1", "u1", "q2", "ne1"}},
	{"v", ``, `0`, nil, []string{"n4"}},
	{"v", `-3.5`, `0.5`, nil, []string{"n4", "z1"}},
	{"v", `1e2`, `1001`, nil, []string{"n5"}},
	{"v", ``, `"1"`, nil, []string{"n4", "z1", "n1", "n2", "s3", "n3", "n5", "q4", "q3"}},
	{"v", `"0"`, `"true"`, nil, []string{"q3", "q1", "u1"}},
	{"v", `5`, `1`, nil, nil},
	{"v", `"z"`, `1`, nil, nil},
	{"v", ``, ``, ptr(""), []string{"q4", "q3", "q1", "u1", "q2", "ne1"}},
	{"v", ``, ``, ptr("t"), []string{"q2"}},
	{"v", ``, ``, ptr("it's \""), []string{"u1"}},
	{"v", ``, ``, ptr("1"), []string{"q1"}},
	{"status", ``, ``, ptr("pend"), []string{"s1", "s3", "s5"}},
	{"status", ``, ``, ptr("P"), []string{"s4"}},
	{"status", `"a"`, ``, nil, []string{"s1", "s3", "s5", "s2"}},
	{"a.b", ``, ``, ptr("x"), []string{"ne2"}},
	{"a.b", `0`, `"a"`, nil, []string{"ne3"}},
	{"w", `0`, ``, nil, []string{"ms"}},
	{"nothing", `0`, ``, nil, nil},
}

func ptr(s string) *string { return &s }

func raw(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}

func (c rangeSel) String() string {
	s := engine.Selector(c)
	if s.Prefix != nil {
		return fmt.Sprintf("%s prefix %q", s.Field, *s.Prefix)
	}
	return fmt.Sprintf("%s in [%s, %s)", s.Field, s.From, s.To)
}

type rangeSel engine.Selector

// selectAll pages through a selector with the given limit and returns
// the ids, checking each page's size.
func (e *env) selectAll(app, db string, s engine.Selector, limit int) []string {
	e.t.Helper()
	var ids []string
	cursor := ""
	for pages := 0; ; pages++ {
		p, err := e.eng.Select(e.ctx, alice, app, db, s, limit, cursor)
		if err != nil {
			e.t.Fatalf("%v page %d: %v", rangeSel(s), pages, err)
		}
		if len(p.Docs) > limit || (p.Next != "" && len(p.Docs) != limit) || (len(p.Docs) == 0 && pages > 0) {
			e.t.Fatalf("%v page %d has %d docs with limit %d and next %q", rangeSel(s), pages, len(p.Docs), limit, p.Next)
		}
		ids = append(ids, pageIDs(e.t, p)...)
		if cursor = p.Next; cursor == "" {
			return ids
		}
		if pages > 1000 {
			e.t.Fatal("pagination does not end")
		}
	}
}

func testEngineQueryRanges(t *testing.T, e *env) {
	e.fixture()
	e.putAll(appJobs, "jobs", queryCorpus)
	for _, c := range rangeCases {
		s := engine.Selector{Field: c.field, From: raw(c.from), To: raw(c.to), Prefix: c.prefix}
		for _, limit := range []int{1000, 2, 1} {
			wantIDs(t, e.selectAll(appJobs, "jobs", s, limit), c.want, fmt.Sprintf("%v, limit %d", rangeSel(s), limit))
		}
	}
}

// testEngineQueryRangeText: strings order by code point (not by UTF-16
// units, not by a collation), also past the first characters.
func testEngineQueryRangeText(t *testing.T, e *env) {
	e.fixture()
	long := strings.Repeat("x", 300)
	e.putAll(appJobs, "t", map[string]string{
		"a": `{"s":"é"}`, "b": `{"s":"z"}`, "c": `{"s":"｡"}`, "d": `{"s":"😀"}`, "e": `{"s":"Z"}`,
		"l1": `{"s":"` + long + `b"}`, "l2": `{"s":"` + long + `a"}`, "l3": `{"s":"` + long + `"}`,
		"l4": `{"s":"` + long + `a"}`,
	})
	all := engine.Selector{Field: "s", Prefix: ptr("")}
	want := []string{"e", "l3", "l2", "l4", "l1", "b", "a", "c", "d"}
	for _, limit := range []int{100, 3, 1} {
		wantIDs(t, e.selectAll(appJobs, "t", all, limit), want, fmt.Sprintf("every string, limit %d", limit))
	}
	cases := []struct {
		s    engine.Selector
		want []string
	}{
		{engine.Selector{Field: "s", Prefix: ptr(long + "a")}, []string{"l2", "l4"}},
		{engine.Selector{Field: "s", Prefix: ptr(long)}, []string{"l3", "l2", "l4", "l1"}},
		{engine.Selector{Field: "s", From: raw(`"` + long + `a"`), To: raw(`"` + long + `b"`)}, []string{"l2", "l4"}},
		{engine.Selector{Field: "s", Prefix: ptr("😀")}, []string{"d"}},
		{engine.Selector{Field: "s", From: raw(`"z"`), To: raw(`"😀"`)}, []string{"b", "a", "c"}},
		{engine.Selector{Field: "s", From: raw(`"\uff61"`)}, []string{"c", "d"}},
	}
	for _, c := range cases {
		wantIDs(t, e.selectAll(appJobs, "t", c.s, 1), c.want, rangeSel(c.s).String())
	}
}

// testEngineQueryRangeInput: a selector that cannot mean anything is
// refused with invalid, never a store error.
func testEngineQueryRangeInput(t *testing.T, e *env) {
	e.fixture()
	e.putAll(appJobs, "jobs", queryCorpus)
	bad := []engine.Selector{
		{Field: "v", From: raw(`true`)},
		{Field: "v", To: raw(`null`)},
		{Field: "v", From: raw(`[1]`)},
		{Field: "v", From: raw(`{"a":1}`)},
		{Field: "v", From: raw(`nope`)},
		{Field: "v", Key: raw(`1`), From: raw(`1`)},
		{Field: "v", From: raw(`1`), Prefix: ptr("a")},
		{Field: "v"},
		{Field: "v", Prefix: ptr("a\x00")},
		{Field: "v", Prefix: ptr("\xff")},
		{Field: "bad field", From: raw(`1`)},
	}
	for _, s := range bad {
		_, err := e.eng.Select(e.ctx, alice, appJobs, "jobs", s, 0, "")
		wantCode(t, err, errs.Invalid, fmt.Sprintf("Select(%+v)", s))
	}
	// A cursor belongs to its kind of query.
	p, err := e.eng.Select(e.ctx, alice, appJobs, "jobs", engine.Selector{Field: "v", From: raw(`0`)}, 1, "")
	if err != nil || p.Next == "" {
		t.Fatalf("range page = %v, %v", p, err)
	}
	_, err = e.eng.Query(e.ctx, alice, appJobs, "jobs", "v", raw(`1`), 1, p.Next)
	wantCode(t, err, errs.Invalid, "equality query with a range cursor")
	q, err := e.eng.Query(e.ctx, alice, appJobs, "jobs", "v", raw(`1`), 1, "")
	if err != nil || q.Next == "" {
		t.Fatalf("query page = %v, %v", q, err)
	}
	_, err = e.eng.Select(e.ctx, alice, appJobs, "jobs", engine.Selector{Field: "v", From: raw(`0`)}, 1, q.Next)
	wantCode(t, err, errs.Invalid, "range query with an equality cursor")
}
