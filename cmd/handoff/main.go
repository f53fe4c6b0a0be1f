// Command handoff is the server and the command-line client of handoff:
// `handoff serve` runs the server, every other command talks to one over
// its HTTP API. See DESIGN §6 for the contract scripts rely on: JSON on
// stdout, `error: <code>: <message>` on stderr, and stable exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// Ctrl-C and SIGTERM cancel the command's context: serve shuts down
	// gracefully, a follow or an import stops where it is.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	stop()
	os.Exit(code)
}
