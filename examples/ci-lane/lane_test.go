// Package cilane_test runs examples/ci-lane for real: the handoff binary
// serves, two copies of lane.sh work the queue at once with device
// credentials made by `handoff device add`, and the ledger must show each
// build taken once and finished once.
package cilane_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/testenv"
)

const app = "alice/ci"

var binary string // the handoff binary under test

func TestMain(m *testing.M) {
	var err error
	if binary, err = testenv.Binary(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// lab is a running server and the people and runners of the lane.
type lab struct {
	t      *testing.T
	url    string
	home   string // HOME and XDG_CONFIG_HOME: no stray config file
	tokens map[string]string
	device map[string]string // runner name → HANDOFF_DEVICE
}

var listenRE = regexp.MustCompile(`msg="handoff listening" url=(http://\S+)`)

// baseEnv is the environment without HANDOFF_ settings, so a developer's
// own cannot leak in.
func (l *lab) baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HANDOFF_") && !strings.HasPrefix(kv, "HOME=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	return append(env, "HOME="+l.home, "XDG_CONFIG_HOME="+l.home, "HANDOFF_SERVER="+l.url)
}

func newLab(t *testing.T) *lab {
	t.Helper()
	l := &lab{t: t, home: t.TempDir(), tokens: map[string]string{"admin": "admin-token-for-the-lane-test"}, device: map[string]string{}}
	cmd := exec.Command(binary, "serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0")
	cmd.Env = append(l.baseEnv(), "HANDOFF_ADMIN_TOKEN="+l.tokens["admin"])
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var logs bytes.Buffer
	found := make(chan string, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			if m := listenRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		cmd.Wait()
		if t.Failed() {
			mu.Lock()
			t.Logf("server log:\n%s", logs.String())
			mu.Unlock()
		}
	})
	select {
	case l.url = <-found:
	case <-done:
		t.Fatal("handoff serve exited before listening")
	case <-time.After(30 * time.Second):
		t.Fatal("handoff serve did not start within 30s")
	}

	// alice owns the lane; builder is the CI user, with one device per runner.
	for _, u := range []string{"alice", "builder"} {
		var out struct{ Token string }
		l.json(l.ok(l.as("admin", "user", "add", u)), &out)
		l.tokens[u] = out.Token
	}
	l.ok(l.as("alice", "app", "create", app))
	l.ok(l.as("alice", "deploy", "--app", app, "."))
	// The access deadline is a CPU budget, not the subject here: beside
	// a loaded suite one small call can take past the default 100ms.
	l.ok(l.as("alice", "app", "set", "--app", app, "--access-timeout", "10s"))
	l.ok(l.as("alice", "app", "member", "add", "--app", app, "builder", "--role", "builder"))
	for _, runner := range []string{"runner-1", "runner-2"} {
		var out struct {
			Device string `json:"device"`
			Value  string `json:"HANDOFF_DEVICE"`
		}
		l.json(l.ok(l.as("builder", "device", "add", runner, "--app", app)), &out)
		if out.Device != runner || out.Value == "" {
			t.Fatalf("device add printed %+v", out)
		}
		l.device[runner] = out.Value
	}
	return l
}

// result is a finished command.
type result struct {
	args           []string
	stdout, stderr string
	code           int
}

// run runs a command with extra environment.
func (l *lab) run(env []string, name string, args ...string) result {
	l.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(l.baseEnv(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		l.t.Fatalf("%s %v: %v", name, args, err)
	}
	return result{append([]string{name}, args...), out.String(), errb.String(), code}
}

// as runs the CLI with a user's token.
func (l *lab) as(user string, args ...string) result {
	l.t.Helper()
	return l.run([]string{"HANDOFF_TOKEN=" + l.tokens[user]}, binary, args...)
}

// asDevice runs the CLI with a runner's device credential.
func (l *lab) asDevice(runner string, args ...string) result {
	l.t.Helper()
	return l.run([]string{"HANDOFF_DEVICE=" + l.device[runner]}, binary, args...)
}

// lane runs lane.sh as a runner.
func (l *lab) lane(runner string, args ...string) result {
	l.t.Helper()
	return l.run([]string{"HANDOFF=" + binary, "HANDOFF_DEVICE=" + l.device[runner], "ALICE_TOKEN=" + l.tokens["alice"]},
		"sh", append([]string{"lane.sh", "--app", app}, args...)...)
}

func (l *lab) ok(r result) result {
	l.t.Helper()
	if r.code != 0 {
		l.t.Fatalf("%v: exit %d\nstdout: %s\nstderr: %s", r.args, r.code, r.stdout, r.stderr)
	}
	return r
}

func (l *lab) json(r result, out any) {
	l.t.Helper()
	if err := json.Unmarshal([]byte(r.stdout), out); err != nil {
		l.t.Fatalf("%v printed %q: %v", r.args, r.stdout, err)
	}
}

// queue puts pending builds as alice.
func (l *lab) queue(ids ...string) {
	l.t.Helper()
	for _, id := range ids {
		l.ok(l.as("alice", "db", "put", "--app", app, "--db", "builds", "--id", id,
			`{"status":"pending-build","repo":"acme/site","commit":"c-`+id+`"}`))
	}
}

type entry struct {
	Rev    string
	Doc    map[string]any
	Writer struct{ User, Device, Handler string }
}

// history is a build's ledger, oldest first.
func (l *lab) history(id string) []entry {
	l.t.Helper()
	var h []entry
	l.json(l.ok(l.as("alice", "db", "get", "--app", app, "--db", "builds", id, "--history")), &h)
	return h
}

// statuses lists the statuses a build went through.
func statuses(h []entry) []string {
	var out []string
	for _, e := range h {
		out = append(out, fmt.Sprint(e.Doc["status"]))
	}
	return out
}

// work is the build command of the tests: ids containing "fail" fail
// with exit 7.
const work = `case "$BUILD_ID" in *fail*) echo "failing $BUILD_ID" >&2; exit 7;; esac; echo "built $BUILD_ID from $BUILD_DOC" >&2`

func TestTwoRunnersBuildEachDocumentOnce(t *testing.T) {
	l := newLab(t)
	var ids []string
	for i := range 12 {
		id := fmt.Sprintf("b%02d", i)
		if i%4 == 3 {
			id += "-fail"
		}
		ids = append(ids, id)
	}
	l.queue(ids...)

	// Both runners work the same queue at the same moment.
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i, runner := range []string{"runner-1", "runner-2"} {
		wg.Go(func() { results[i] = l.lane(runner, "--", "sh", "-c", work) })
	}
	wg.Wait()

	t.Logf("runner-1:\n%s\nrunner-2:\n%s", results[0].stdout, results[1].stdout)
	took := map[string]int{}
	finished := map[string]int{}
	for _, r := range results {
		if r.code != 0 {
			t.Fatalf("a lane failed: exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
		}
		for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 0:
			case f[0] == "took":
				took[f[1]]++
			case f[0] == "built" || f[0] == "build-failed":
				finished[f[1]]++
			case f[0] == "lost":
				// The other runner had it: fine.
			default:
				t.Fatalf("unexpected lane output %q", line)
			}
		}
	}
	for _, id := range ids {
		if took[id] != 1 || finished[id] != 1 {
			t.Errorf("%s: taken %d times, finished %d times by the runners", id, took[id], finished[id])
		}
		h := l.history(id)
		want := []string{"pending-build", "building", "built"}
		wantCode := 0.0
		if strings.Contains(id, "fail") {
			want[2], wantCode = "build-failed", 7
		}
		if got := statuses(h); !slices.Equal(got, want) {
			t.Errorf("%s went through %v, want %v", id, got, want)
			continue
		}
		last := h[2]
		if last.Doc["exitCode"] != wantCode || last.Doc["commit"] != "c-"+id || last.Doc["repo"] != "acme/site" {
			t.Errorf("%s ended as %v", id, last.Doc)
		}
		// The moves were made by one runner's device, for the builder.
		if h[1].Writer.User != "builder" || h[1].Writer.Device == "" || h[2].Writer.Device != h[1].Writer.Device {
			t.Errorf("%s moved by %+v then %+v", id, h[1].Writer, h[2].Writer)
		}
	}
	// A second pass finds nothing left to do.
	if r := l.ok(l.lane("runner-1", "--", "sh", "-c", work)); strings.TrimSpace(r.stdout) != "" {
		t.Fatalf("second pass did %q", r.stdout)
	}
}

func TestAStaleIfRevLosesCleanly(t *testing.T) {
	l := newLab(t)
	l.queue("s1", "requeued")

	// By hand: the first take at rev R wins, a second take at R is a
	// conflict (exit 3) and changes nothing.
	h := l.history("s1")
	rev := h[0].Rev
	building := `{"status":"building","repo":"acme/site","commit":"c-s1"}`
	l.ok(l.asDevice("runner-1", "db", "put", "--app", app, "--db", "builds", "--id", "s1", "--if-rev", rev, building))
	r := l.asDevice("runner-2", "db", "put", "--app", app, "--db", "builds", "--id", "s1", "--if-rev", rev, building)
	if r.code != 3 || !strings.HasPrefix(r.stderr, "error: conflict:") {
		t.Fatalf("stale take: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := statuses(l.history("s1")); !slices.Equal(got, []string{"pending-build", "building"}) {
		t.Fatalf("after the stale take: %v", got)
	}

	// Through the script: while "requeued" builds, its owner puts it back
	// in the queue. The lane's result write then carries a stale rev: it
	// loses, says so, and exits 0; the next pass builds it once.
	requeue := `if [ "$BUILD_ID" = requeued ]; then
  doc=$(HANDOFF_TOKEN=$ALICE_TOKEN "$HANDOFF" db get --app alice/ci --db builds requeued) || exit 9
  rev=$(printf '%s\n' "$doc" | sed -n 's/^{"_id":"[^"]*","_rev":"\([^"]*\)".*/\1/p')
  printf '%s\n' "$doc" | sed 's/"status":"building"/"status":"pending-build"/' |
    HANDOFF_TOKEN=$ALICE_TOKEN "$HANDOFF" db put --app alice/ci --db builds --id requeued --if-rev "$rev" - >&2 || exit 9
fi`
	r = l.ok(l.lane("runner-1", "--", "sh", "-c", requeue))
	if !strings.Contains(r.stdout, "lost requeued: it was moved while building") || strings.Contains(r.stdout, "built requeued") {
		t.Fatalf("lane output: %s\nstderr: %s", r.stdout, r.stderr)
	}
	if got := statuses(l.history("requeued")); !slices.Equal(got, []string{"pending-build", "building", "pending-build"}) {
		t.Fatalf("requeued went through %v", got)
	}
	r = l.ok(l.lane("runner-2"))
	if strings.TrimSpace(r.stdout) != "took requeued\nbuilt requeued" {
		t.Fatalf("second pass: %q", r.stdout)
	}
	got := statuses(l.history("requeued"))
	if !slices.Equal(got, []string{"pending-build", "building", "pending-build", "building", "built"}) {
		t.Fatalf("requeued went through %v", got)
	}
}

func TestOnlyABuilderDeviceMovesBuilds(t *testing.T) {
	l := newLab(t)
	l.queue("x1")
	rev := l.history("x1")[0].Rev
	building := `{"status":"building","repo":"acme/site","commit":"c-x1"}`
	for name, r := range map[string]result{
		"the builder's token": l.as("builder", "db", "put", "--app", app, "--db", "builds", "--id", "x1", "--if-rev", rev, building),
		"the owner":           l.as("alice", "db", "put", "--app", app, "--db", "builds", "--id", "x1", "--if-rev", rev, building),
	} {
		if r.code != 4 || !strings.Contains(r.stderr, "forbidden") {
			t.Errorf("%s: exit %d, stderr %q", name, r.code, r.stderr)
		}
	}
	// A device may not rewrite the build on its way through.
	r := l.asDevice("runner-1", "db", "put", "--app", app, "--db", "builds", "--id", "x1", "--if-rev", rev,
		`{"status":"building","repo":"evil/site","commit":"c-x1"}`)
	if r.code != 4 || !strings.Contains(r.stderr, "repo") {
		t.Fatalf("rewrite: exit %d, stderr %q", r.code, r.stderr)
	}
	// Without HANDOFF_DEVICE the lane refuses to start.
	r = l.run([]string{"HANDOFF=" + binary}, "sh", "lane.sh", "--app", app)
	if r.code != 2 || !strings.Contains(r.stderr, "HANDOFF_DEVICE") {
		t.Fatalf("no device: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := statuses(l.history("x1")); !slices.Equal(got, []string{"pending-build"}) {
		t.Fatalf("x1 went through %v", got)
	}
}
