package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// Binary returns the path of the handoff command built from this
// checkout, building it if need be. go.mod names cmd/handoff as a tool,
// and `go tool` keeps the binaries it links in the build cache: the
// packages whose tests run the command share one link, and a run with
// nothing changed links nothing (a link of it costs seconds of CPU).
// The binary is the cache's: run it, do not move or delete it.
func Binary() (string, error) {
	cmd := exec.Command("go", "tool", "-n", "handoff")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building handoff with `go tool -n handoff`: %w", err)
	}
	path := strings.TrimSpace(string(out))
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("building handoff: `go tool -n handoff` printed %q: %w", path, err)
	}
	return path, nil
}
