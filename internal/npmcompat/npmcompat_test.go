package npmcompat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/apptest"
	"github.com/handoff-run/handoff/internal/jstest"
)

// packages are the checks under testdata/, each with the npm spec it
// installs. Majors are pinned so a new major's changed output is a
// deliberate update here, not a failure out of nowhere.
var packages = []struct{ name, spec string }{
	{"zod", "zod@4"},
	{"ajv", "ajv@8"},
	{"lodash", "lodash@4"},
	{"immer", "immer@10"},
	{"date-fns", "date-fns@4"},
	{"uuid", "uuid@11"},
	{"yaml", "yaml@2"},
	{"yaml-big", "yaml@2"},
	{"marked", "marked@15"},
	{"validator", "validator@13"},
	{"dayjs", "dayjs@1"},
}

func TestMain(m *testing.M) {
	// date-fns and dayjs format in local time, and the runtime's Date
	// takes the process's zone: pin it, and give node the same (UTC).
	time.Local = time.UTC
	os.Exit(m.Run())
}

// answer is what one side gave for a package: run()'s JSON, or why
// there is none.
type answer struct {
	Result string `json:"result"`
	Error  string `json:"error"`
}

func (a answer) String() string {
	if a.Error != "" {
		return "error: " + a.Error
	}
	return a.Result
}

func TestPackagesGiveNodesAnswers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test installs packages with npm")
	}
	dir := install(t)
	want := nodeAnswers(t, dir)
	for _, p := range packages {
		// backend.js imports one check at a time, so a package that
		// fails to bundle or load fails only its own case.
		t.Run(p.name, func(t *testing.T) {
			node := want[p.name]
			got := handoffAnswer(t, dir, p.name, node.Result)
			switch {
			case node.Error != "":
				t.Errorf("node itself failed, so the check is wrong: %s\nhandoff gave:\n%s", node.Error, got)
			case got.Error != "":
				t.Errorf("%s failed in handoff:\n%s\nnode gave:\n%s", p.name, got.Error, node.Result)
			case got.Result != node.Result:
				t.Errorf("%s differs from node%s\nnode:    %s\nhandoff: %s", p.name, firstDiff(node.Result, got.Result), node.Result, got.Result)
			}
		})
	}
}

// install makes the app folder: every package installed in one npm run
// (--prefer-offline: a second run is served from npm's cache), and the
// checks copied under checks/<package>/.
func install(t *testing.T) string {
	t.Helper()
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skip("npm not found: install Node.js 20 with npm to run this test")
	}
	dir := t.TempDir()
	// "type": "module" so node loads the checks as the ES modules they are.
	files := map[string]string{"package.json": `{"private": true, "type": "module"}`}
	for _, p := range packages {
		src, err := os.ReadFile(filepath.Join("testdata", p.name, "check.js"))
		if err != nil {
			t.Fatal(err)
		}
		files["checks/"+p.name+"/check.js"] = string(src)
	}
	apptest.Write(t, dir, files)

	args := []string{"install", "--no-audit", "--no-fund", "--prefer-offline", "--prefix", dir}
	for _, p := range packages {
		args = append(args, p.spec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "npm_config_update_notifier=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Skipf("npm install failed (%v); this test needs the npm registry reachable, or a warm npm cache:\n%s", err, out)
	}
	return dir
}

// nodeScript imports each check and prints {package: answer}; a check
// that throws is an answer too.
const nodeScript = `
const out = {};
for (const p of JSON.parse(process.argv[1])) {
  try {
    const m = await import("./checks/" + p + "/check.js");
    out[p] = { result: JSON.stringify(m.run()) };
  } catch (e) {
    out[p] = { error: String((e && e.stack) || e) };
  }
}
console.log(JSON.stringify(out));
`

func nodeAnswers(t *testing.T, dir string) map[string]answer {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node not found: install Node.js 20 to run this test")
	}
	names := make([]string, len(packages))
	for i, p := range packages {
		names[i] = p.name
	}
	list, _ := json.Marshal(names)
	cmd := exec.Command(node, "--input-type=module", "-e", nodeScript, string(list))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "TZ=UTC")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v\n%s", err, stderr.Bytes())
	}
	var answers map[string]answer
	if err := json.Unmarshal(out, &answers); err != nil {
		t.Fatalf("node printed %q: %v", out, err)
	}
	return answers
}

const access = `export default function () { return { channels: ["all"], grant: { public: ["all"] } } }`

// backend runs the check when a document asks for it and writes the
// answer, or the error, back on the document.
const backend = `import { run } from "./checks/%s/check.js";

export const config = { onChange: { maxAttempts: 1 } };

export async function onChange(event, ctx) {
  if (event.deleted || event.doc.status !== "run") return;
  let out;
  try {
    out = { status: "done", result: JSON.stringify(run()) };
  } catch (e) {
    out = { status: "threw", error: String((e && e.stack) || e) };
  }
  await ctx.db.put({ ...event.doc, ...out }, { ifRev: event.doc._rev });
}
`

// testFile puts the document, lets onChange run, prints the document for
// the Go side and checks it against node's answer.
const testFile = `const name = %q;
const want = %q;

test(name, async (t) => {
  const db = t.owner.db("checks");
  await db.put({ _id: name, status: "run" });
  await t.settle();
  const doc = await db.get(name);
  console.log(JSON.stringify(doc));
  t.expect(doc.status).toBe("done");
  t.expect(doc.result).toBe(want);
});
`

// handoffAnswer deploys an app whose backend runs the one check, through
// the folder's bundler, and returns what onChange wrote. The test file
// holds node's answer too, so `handoff test` on the folder checks it.
func handoffAnswer(t *testing.T, dir, name, want string) answer {
	t.Helper()
	apptest.Write(t, dir, map[string]string{
		"access.js":          access,
		"backend.js":         fmt.Sprintf(backend, name),
		"test/check.test.js": fmt.Sprintf(testFile, name, want),
	})
	rep, err := jstest.Run(context.Background(), jstest.Options{Dir: dir, Timeout: 30 * time.Second})
	if err != nil {
		return answer{Error: err.Error()}
	}
	if len(rep.Results) != 1 {
		return answer{Error: fmt.Sprintf("%d results, want 1: %+v", len(rep.Results), rep.Results)}
	}
	r := rep.Results[0]
	var doc struct {
		Status string `json:"status"`
		answer
	}
	if len(r.Console) == 0 || json.Unmarshal([]byte(r.Console[0]), &doc) != nil {
		var out bytes.Buffer
		jstest.WriteResult(&out, r)
		return answer{Error: out.String()}
	}
	if doc.Status != "done" && doc.Error == "" {
		doc.Error = "onChange did not finish: the document is " + r.Console[0]
	}
	return doc.answer
}

// TestPackagesBesideABusyHeap: the heavy checks pass 10 of 10 while the
// process holds 300 MiB live for others and a neighbour keeps making
// garbage: a call's memory limit counts what the call holds, and the same
// call used to be stopped at 64 MiB 2 times in 10 beside such a heap.
func TestPackagesBesideABusyHeap(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test installs packages with npm")
	}
	dir := install(t)
	want := nodeAnswers(t, dir)
	apptest.BusyHeap(t)
	for _, name := range []string{"yaml-big", "zod"} {
		for i := range 10 {
			if got := handoffAnswer(t, dir, name, want[name].Result); got.Error != "" || got.Result != want[name].Result {
				t.Fatalf("%s, run %d of 10 beside 300 MiB: %s", name, i+1, got)
			}
		}
	}
}

// firstDiff says where two answers part, for a long JSON string.
func firstDiff(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-40)
	return fmt.Sprintf(" at byte %d:\n  node:    …%s\n  handoff: …%s", i, a[lo:min(len(a), i+40)], b[lo:min(len(b), i+40)])
}
