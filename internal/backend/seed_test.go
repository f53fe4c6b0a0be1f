package backend_test

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appdir"
	"github.com/handoff-run/handoff/internal/apptest"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// The seed document's backend.js is the compatibility target: it must run
// unchanged. It is read from the shared seed at test time (never copied
// into the repository), and the test is skipped where the seed is absent.

const seedPath = "../../../shared/seed/doc-status-state-machines.txt"

// seedBackend extracts the sample backend.js from the seed document: from
// the line that starts it (behind a "js" fence marker) up to the prose
// that follows it.
func seedBackend(t *testing.T) string {
	t.Helper()
	path := seedPath
	if p := os.Getenv("HANDOFF_SEED"); p != "" {
		path = p
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Skipf("seed document not available: %v", err)
	}
	var out []string
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case !in && strings.HasPrefix(line, "jsexport const config"):
			in = true
			line = strings.TrimPrefix(line, "js")
		case in && strings.HasPrefix(line, "resize stands for your work."):
			return strings.Join(out, "\n")
		}
		if in {
			out = append(out, line)
		}
	}
	t.Skip("the seed document has no backend.js sample")
	return ""
}

// resizeStandIn is the user's work that the sample calls: async, returns
// a string, idempotent per key.
func resizeStandIn(vm *jsvm.VM) error {
	_, err := vm.RunString(`globalThis.resize = async (input, key) => "resized " + input + " as " + key`)
	return err
}

func TestSeedBackendRunsUnchanged(t *testing.T) {
	src := seedBackend(t)
	e := newEnvWith(t, resizeStandIn)
	runSeedJobs(t, e, e.compile(src))
}

// TestSeedBackendWithItsHelperInAModule: the sample's work function sits
// in a module beside backend.js, which imports it; the folder is read and
// bundled as `handoff deploy` reads it, and the sample itself is
// unchanged below its one import line. No global stand-in is installed:
// the helper can only come from the module.
func TestSeedBackendWithItsHelperInAModule(t *testing.T) {
	src := seedBackend(t)
	dir := apptest.Folder(t, map[string]string{
		"backend.js": "import { resize } from \"./resize.js\";\n" + src,
		"resize.js": `// The slow step of a job. Its result depends only on the input and
// the key, so a second run of the same attempt repeats it exactly.
export async function resize(input, key) {
  return "resized " + input + " as " + key;
}
`,
	})
	code, err := appdir.Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(code.Uses, []string{"backend.js", "resize.js"}) {
		t.Fatalf("uses %q", code.Uses)
	}
	e := newEnv(t)
	runSeedJobs(t, e, e.compile(code.Backend))
}

// runSeedJobs plays the sample's life of a job: a claim and a finish, a
// stale redelivery, and a sweep of expired leases.
func runSeedJobs(t *testing.T, e *env, b appcode.Backend) {
	t.Helper()
	if cfg := b.Config(); cfg.Scheduled.Interval != 30*time.Second || !b.Has("onChange") || !b.Has("scheduled") {
		t.Fatalf("config %+v, handlers onChange=%v scheduled=%v", cfg, b.Has("onChange"), b.Has("scheduled"))
	}
	ctx := context.Background()
	hc := newFake()
	pending := hc.seed("jobs", map[string]any{"_id": "j1", "type": "job", "status": "pending", "input": "cat.png", "attempts": 0})
	ev := appcode.ChangeEvent{DB: "jobs", DocID: "j1", Doc: pending, Seq: 1, Attempt: 1}

	// The event of a pending job claims it and finishes it.
	if err := b.OnChange(ctx, ev, hc); err != nil {
		t.Fatal(err)
	}
	j1 := hc.mustDoc(t, "jobs", "j1")
	if j1["status"] != "done" || j1["attempts"] != 1.0 || j1["output"] != "resized cat.png as j1:1" ||
		j1["leaseUntil"] != float64(start.UnixMilli()+30_000) || j1["claimId"] == "" || j1["_rev"] != "3-r" {
		t.Fatalf("after onChange: %v", j1)
	}

	// A redelivery of the same event loses the claim (its _rev is stale),
	// logs why and acks.
	if err := b.OnChange(ctx, ev, hc); err != nil {
		t.Fatal(err)
	}
	if hc.mustDoc(t, "jobs", "j1")["_rev"] != "3-r" {
		t.Fatal("a stale event moved the job")
	}
	lines := hc.lines()
	if len(lines) != 1 || lines[0].Level != "info" || lines[0].Message != "claim lost" ||
		lines[0].Fields != `{"id":"j1","reason":"someone else moved this job first"}` {
		t.Fatalf("log: %q", lines)
	}

	// The sweep puts expired leases back to pending, or fails them after
	// the last attempt, and leaves live leases alone.
	e.clock.Advance(time.Minute)
	now := e.clock.Now().UnixMilli()
	hc.seed("jobs", map[string]any{"_id": "j2", "type": "job", "status": "running", "attempts": 1, "leaseUntil": now - 1})
	hc.seed("jobs", map[string]any{"_id": "j3", "type": "job", "status": "running", "attempts": 3, "leaseUntil": now - 1})
	hc.seed("jobs", map[string]any{"_id": "j4", "type": "job", "status": "running", "attempts": 1, "leaseUntil": now + 10_000})
	if err := b.Scheduled(ctx, appcode.TickEvent{ScheduledTime: now}, hc); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"j2": "pending", "j3": "failed", "j4": "running", "j1": "done"} {
		if got := hc.mustDoc(t, "jobs", id)["status"]; got != want {
			t.Errorf("%s: status %v, want %s", id, got, want)
		}
	}
	if l := hc.lines(); len(l) != 2 || l[1].Level != "debug" || l[1].Message != "sweep" {
		t.Fatalf("log: %q", l)
	}
}
