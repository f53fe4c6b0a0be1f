// Command handoff is the server and the command-line client of handoff:
// `handoff serve` runs the server, every other command talks to one over
// its HTTP API. See docs/architecture.md, "The CLI contract" for the contract scripts rely on: JSON on
// stdout, `error: <code>: <message>` on stderr, and stable exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/handoff-run/handoff/internal/compilechild"
)

// gcPercent trades memory for CPU: the server's garbage is short-lived
// (documents in flight, JS call frames), so collecting it less often
// than Go's default saves CPU. Not as rarely as 400, though: each page
// the heap grows by is a page fault when first touched (about 20 µs on a
// virtual machine). On `handoff bench jobs`, SQLite or PostgreSQL, 200
// spent no more CPU per job than 400 with a third fewer faults and a
// third less memory. GOGC, when set, wins.
const gcPercent = 200

func main() {
	// A deploy's code is compiled in a child process of this program
	// first (serve); in that child, this compiles and exits.
	compilechild.Serve()
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(gcPercent)
	}
	// Ctrl-C and SIGTERM cancel the command's context: serve shuts down
	// gracefully, a follow or an import stops where it is.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
