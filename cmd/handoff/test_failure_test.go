package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/internal/apptest"
)

// TestTestCommandShowsAFailedTestsHandlerErrors: a sweep that throws
// fails its test only through an assertion; `handoff test` shows the
// throw, where it is in backend.js, and the app's log under the failure,
// and nothing more for a passing test.
func TestTestCommandShowsAFailedTestsHandlerErrors(t *testing.T) {
	t.Parallel()
	dir := apptest.Folder(t, map[string]string{
		"access.js": `export default function () { return { channels: ["all"], grant: { public: ["all"] } } }`,
		"backend.js": `export const config = { scheduled: { interval: "5s" } };
export async function scheduled(ev, ctx) {
  const docs = await ctx.db.query({ db: "jobs", field: "status", key: "pending" });
  for (const d of docs) {
    ctx.log("info", "expiring", { id: d._id });
    await ctx.db.put({ ...d, status: "expired" }, { db: "jobs", ifrev: d._rev });
  }
}`,
		"test/sweep.test.js": `test("expires", async (t) => {
  await t.db("jobs").put({ _id: "a", status: "pending" });
  await t.advance("6s");
  t.expect(await t.db("jobs").get("a")).toMatch({ status: "expired" });
});
test("passes", async (t) => { t.expect(1).toBe(1); });
`,
	})
	out, errOut, code := runIn(t, nil, "", "test", dir)
	if code != 1 {
		t.Fatalf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	failure, rest, _ := strings.Cut(out, "ok    test/sweep.test.js › passes")
	for _, want := range []string{
		`to match {"status":"expired"}`,
		"the app's handlers threw 1 time, first at backend.js:6:21:",
		`+5s     scheduled: backend.js:6:21: Error: ctx.db.put: unknown option "ifrev"; the options are db, id, ifRev, ifAbsent`,
		"the app's log (2 lines):",
		`info  scheduled: expiring {"id":"a"}`,
	} {
		if !strings.Contains(failure, want) {
			t.Errorf("the failure lacks %q:\n%s", want, out)
		}
	}
	// The passing test's line is followed by the summary's blank line.
	if lines := strings.SplitN(rest, "\n", 3); len(lines) < 3 || lines[1] != "" {
		t.Errorf("a passing test printed more than its line:\n%s", out)
	}

	out, _, _ = runIn(t, nil, "", "test", dir, "--json", "--run", "expires")
	var line struct {
		HandlerErrors []struct{ Handler, At string }
		Logs          []string
	}
	first, _, _ := strings.Cut(out, "\n")
	if err := json.Unmarshal([]byte(first), &line); err != nil || len(line.HandlerErrors) != 1 || line.HandlerErrors[0].At != "backend.js:6:21" || len(line.Logs) != 2 {
		t.Errorf("--json: %+v (%v)\n%s", line, err, out)
	}
}
