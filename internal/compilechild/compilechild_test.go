package compilechild

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
)

// TestMain lets the test binary be its own compile child.
func TestMain(m *testing.M) {
	Serve()
	os.Exit(m.Run())
}

func testChecker(t *testing.T, timeout time.Duration) *Checker {
	t.Helper()
	c, err := ForThisProgram(timeout)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestOrdinaryCodePasses(t *testing.T) {
	c := testChecker(t, 0)
	for _, src := range []string{
		"export default function (doc) { return { channels: [doc.kind] } }",
		"export function f( {", // a syntax error is the caller's compile to report
	} {
		if err := c.Check(t.Context(), "access.js", src); err != nil {
			t.Errorf("%q: %v", src, err)
		}
	}
}

// TestDeepNestingEndsOnlyTheChild: a million brackets overflow esbuild's
// stack, which is fatal to the process that compiles. Compiled in this
// process, the test binary would die.
func TestDeepNestingEndsOnlyTheChild(t *testing.T) {
	c := testChecker(t, time.Minute)
	for _, src := range []string{
		"export const a = " + strings.Repeat("[", 1e6),
		"export const a = " + strings.Repeat("x => ", 2e5) + "1",
		// Fine at Go's 1 GB, but that gigabyte would be the server's too.
		"export const a = " + strings.Repeat("[", 1e5) + strings.Repeat("]", 1e5),
	} {
		err := c.Check(t.Context(), "backend.js", src)
		if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "backend.js nests too deeply") {
			t.Fatalf("got %v, want invalid: nests too deeply", err)
		}
	}
}

// TestSlowCompileIsStopped: esbuild takes minutes over a chain of
// 100,000 commas; the child is stopped at the timeout.
func TestSlowCompileIsStopped(t *testing.T) {
	c := testChecker(t, time.Second)
	src := "let b = 1; export const a = (b" + strings.Repeat(",b", 1e5) + ")"
	start := time.Now()
	err := c.Check(t.Context(), "access.js", src)
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "took more than 1s to compile") {
		t.Fatalf("got %v, want invalid: took more than 1s", err)
	}
	t.Logf("refused after %v", time.Since(start))
}

// TestAnotherProgramIsNoChild: a program at the executable's path that
// exits 0 without the child's answer (the server's binary replaced) does
// not pass for a compile that came back.
func TestAnotherProgramIsNoChild(t *testing.T) {
	exe, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true(1) here:", err)
	}
	err = New(exe, 0).Check(t.Context(), "access.js", "export default function () {}")
	if !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("got %v, want unavailable: did not answer", err)
	}
}

// TestASourceThatPassedStartsNoChild: the same file and source checked
// again start no child (a redeploy of unchanged code); anything else does.
func TestASourceThatPassedStartsNoChild(t *testing.T) {
	c := testChecker(t, 0)
	src := "export default function (doc) { return { channels: [doc.kind] } }"
	if err := c.Check(t.Context(), "access.js", src); err != nil {
		t.Fatal(err)
	}
	c.exe = "/nonexistent/handoff" // any child started now fails to start
	if err := c.Check(t.Context(), "access.js", src); err != nil {
		t.Fatalf("the same source again: %v; want no child", err)
	}
	for _, other := range [][2]string{{"backend.js", src}, {"access.js", src + " "}} {
		if err := c.Check(t.Context(), other[0], other[1]); !errs.Is(err, errs.Unavailable) {
			t.Fatalf("%s: got %v; want a child started (and failing to start)", other[0], err)
		}
	}
}
