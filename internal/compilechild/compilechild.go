// Package compilechild compiles a deploy's JavaScript in a child process
// before the server compiles it itself.
//
// esbuild and goja parse and compile by recursion, one Go call per level
// of nesting, with no limit: a file of a million brackets overflows the
// Go stack, which ends the process rather than failing the call, and a
// chain of 100,000 commas keeps esbuild busy for minutes. Neither can be
// stopped from outside. A child process can: it runs the same compiler on
// the same source, and only if it comes back does the server compile the
// code for real, which then behaves exactly as it did in the child.
package compilechild

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// envVar marks the process as a child: Serve compiles and exits.
const envVar = "HANDOFF_COMPILE_CHILD"

// DefaultTimeout bounds one child's compile. A large bundle compiles in
// about a second; what takes longer grows with the square of some
// expression's length.
const DefaultTimeout = 10 * time.Second

// maxChildren bounds the children at once, so that concurrent deploys
// cannot fork the machine to a halt; later ones wait.
const maxChildren = 2

// childStack is the child's stack limit, far below Go's 1 GB: what the
// child survives, the server compiles again, and code nested deep enough
// to take a gigabyte of stack would cost the server that gigabyte.
const childStack = 128 << 20

// ack is what a child writes once its compile came back: an exit status
// of 0 alone could come from another program at the executable's path.
const ack = "handoff compile child: done\n"

// job is what the parent sends the child on its stdin.
type job struct {
	File   string `json:"file"`
	Source string `json:"source"`
}

// Serve makes this process a compile child when the parent asked for one:
// it compiles the file on stdin and exits 0, whatever the compiler said.
// The parent compiles again to get the result, so the child need only
// come back. A program that offers Checker must call Serve first thing in
// main (a test binary, in TestMain). It returns when the process is not a
// child.
func Serve() {
	if os.Getenv(envVar) != "1" {
		return
	}
	debug.SetMaxStack(childStack)
	var j job
	if err := json.NewDecoder(os.Stdin).Decode(&j); err != nil {
		fmt.Fprintln(os.Stderr, "compile child: reading the job:", err)
		os.Exit(2)
	}
	_, _ = jsvm.Compile(j.File, j.Source)
	fmt.Print(ack)
	os.Exit(0)
}

// Checker runs compile children of one executable.
type Checker struct {
	exe     string
	timeout time.Duration
	slots   chan struct{}

	// passed remembers the sources a child compiled and came back from,
	// by hash: a redeploy of the same code (an unchanged file of a
	// folder, the same bundle in another app) starts no child.
	mu     sync.Mutex
	passed map[[sha256.Size]byte]bool
}

// maxPassed bounds the remembered sources; past it they are forgotten
// all at once, which costs only children started again.
const maxPassed = 1024

// New returns a Checker that runs exe (this program, which calls Serve)
// as its child, for at most timeout each (DefaultTimeout if zero).
func New(exe string, timeout time.Duration) *Checker {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Checker{exe: exe, timeout: timeout, slots: make(chan struct{}, maxChildren), passed: map[[sha256.Size]byte]bool{}}
}

// ForThisProgram is New for the running executable.
func ForThisProgram(timeout time.Duration) (*Checker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding this program to compile deploys in a child: %w", err)
	}
	return New(exe, timeout), nil
}

// Check compiles source, named file, in a child and reports whether that
// ended the child or outlasted the timeout, as an invalid error that says
// what to change. A compile error is not reported: the caller's own
// compile reports it, and that compile is now known to come back.
func (c *Checker) Check(ctx context.Context, file, source string) error {
	key := sha256.Sum256([]byte(file + "\x00" + source))
	c.mu.Lock()
	seen := c.passed[key]
	c.mu.Unlock()
	if seen {
		return nil
	}
	err := c.check(ctx, file, source)
	if err == nil {
		c.mu.Lock()
		if len(c.passed) >= maxPassed {
			clear(c.passed)
		}
		c.passed[key] = true
		c.mu.Unlock()
	}
	return err
}

func (c *Checker) check(ctx context.Context, file, source string) error {
	select {
	case c.slots <- struct{}{}:
	case <-ctx.Done():
		return errs.New(errs.Unavailable, "the deploy was cancelled while it waited to compile %s: %v", file, ctx.Err())
	}
	defer func() { <-c.slots }()

	in, err := json.Marshal(job{File: file, Source: source})
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cmd := exec.CommandContext(cctx, c.exe)
	// Nothing of the server's environment: its tokens and database URLs
	// are no business of a compile.
	cmd.Env = []string{envVar + "=1"}
	cmd.Stdin = bytes.NewReader(in)
	var stdout, stderr head
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = time.Second
	err = cmd.Run()
	switch {
	case err == nil && stdout.String() == ack:
		return nil
	case err == nil:
		return errs.New(errs.Unavailable, "the program at %s did not answer as handoff's compile child; if the server's executable was replaced, restart the server", c.exe)
	case cctx.Err() != nil && ctx.Err() == nil:
		return errs.New(errs.Invalid, "%s took more than %v to compile, and was stopped; an expression thousands of operators long (a chain of + or commas) compiles in time that grows with the square of its length, so split it into smaller ones", file, c.timeout)
	case ctx.Err() != nil:
		return errs.New(errs.Unavailable, "the deploy was cancelled while %s compiled: %v", file, ctx.Err())
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return errs.New(errs.Unavailable, "could not start the compiler's child process to check %s: %v; retry the deploy, and if it keeps failing check that the server's executable is still in place", file, err)
	}
	if strings.Contains(stderr.String(), "stack overflow") || strings.Contains(stderr.String(), "stack exceeds") {
		return errs.New(errs.Invalid, "%s nests too deeply to compile: the compiler ran out of stack; nest brackets, functions and operators less deeply (tens of levels, not hundreds of thousands), or split long chains of operators", file)
	}
	return errs.New(errs.Invalid, "compiling %s ended the compiler (%s, %s); make the file smaller or simpler", file, exit.String(), firstLine(stderr.String()))
}

// head keeps the first 4 KiB written to it: a fatal error's first lines
// say what happened, and its goroutine dump can run to megabytes.
type head struct{ b []byte }

func (h *head) Write(p []byte) (int, error) {
	if room := 4096 - len(h.b); room > 0 {
		h.b = append(h.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (h *head) String() string { return string(h.b) }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if s == "" {
		return "it exited without a word"
	}
	return s
}
