package backend_test

import (
	"context"
	"strings"
	"testing"
)

// TestSparseArraysExportBounded hands the host arrays whose length was set
// to four billion, in each place the host reads a value the handler made.
// goja's own export would ask Go for 64 GB at once for each, and the
// process would die; each must fail the run, or be read within bounds.
func TestSparseArraysExportBounded(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for name, c := range map[string]struct{ body, want string }{
		"thrown":              {`throw huge()`, "null,null"},
		"rejected":            {`await Promise.reject(huge())`, "null,null"},
		"in an object thrown": {`throw { why: "x", list: huge() }`, `{"list":[null,`},
		"ifAbsent":            {`await ctx.db.put({ _id: "a" }, { ifAbsent: huge() })`, "ifAbsent must be true or false"},
		"put":                 {`await ctx.db.put({ _id: "a", list: huge() })`, ""},
		"stringify":           {`JSON.stringify(huge())`, ""},
	} {
		t.Run(name, func(t *testing.T) {
			b := e.compile(`const huge = () => { const a = []; a.length = 4e9; return a };
export async function onChange(event, ctx) { ` + c.body + ` }`)
			err := b.OnChange(context.Background(), event("jobs", "a", []byte(`{"_id":"a"}`)), newFake())
			if err == nil {
				t.Fatal("the run succeeded")
			}
			t.Log(err)
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("the run failed with %v; want %q in it", err, c.want)
			}
		})
	}
}

// TestTooManyHeaders: a response's headers are counted before they are
// read, so a long list fails with its count rather than a wrong shape.
func TestTooManyHeaders(t *testing.T) {
	t.Parallel()
	b := newEnv(t).compile(`
export async function fetch(request) {
  const n = request.path === "/many" ? 1001 : 900;
  return new Response("x", { headers: Array.from({ length: n }, (_, i) => ["x-h" + i, "v"]) });
}`)
	if r, err := serve(t, b, newFake(), "GET", "/apps/alice/jobs/api/some", nil, ""); err != nil || len(r.Header) < 900 {
		t.Fatalf("900 headers: %d headers, %v", len(r.Header), err)
	}
	_, err := serve(t, b, newFake(), "GET", "/apps/alice/jobs/api/many", nil, "")
	if err == nil || !strings.Contains(err.Error(), "headers; send at most 1000") {
		t.Fatalf("1001 headers: %v", err)
	}
}
