package jstest

import (
	"fmt"
	"os"
	"sync"
)

// tb is what the simulated app (internal/sim) reports to: a test's
// failure in the harness (the system never came to rest, say) stops the
// call that asked for it and becomes that JavaScript test's failure.
type tb struct {
	mu       sync.Mutex
	cleanups []func()
	dirs     []string
	logs     []string // the server's own warnings, shown with a failure
}

// fatal is what Fatalf panics with; guard recovers it.
type fatal struct{ msg string }

func (*tb) Helper() {}

func (t *tb) Fatal(args ...any) { panic(fatal{fmt.Sprint(args...)}) }

func (t *tb) Fatalf(format string, args ...any) { panic(fatal{fmt.Sprintf(format, args...)}) }

func (t *tb) Logf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.logs = append(t.logs, fmt.Sprintf(format, args...))
}

func (t *tb) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *tb) TempDir() string {
	d, err := os.MkdirTemp("", "handoff-test-")
	if err != nil {
		t.Fatalf("cannot make a temporary folder: %v", err)
	}
	t.mu.Lock()
	t.dirs = append(t.dirs, d)
	t.mu.Unlock()
	return d
}

// close runs the cleanups last-in first-out, as testing does, then
// removes the temporary folders: nothing is left behind.
func (t *tb) close() {
	t.mu.Lock()
	cs, ds := t.cleanups, t.dirs
	t.cleanups, t.dirs = nil, nil
	t.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		func() {
			defer func() { _ = recover() }()
			cs[i]()
		}()
	}
	for _, d := range ds {
		_ = os.RemoveAll(d)
	}
}

// guard turns a Fatalf inside f into an error.
func guard[T any](f func() (T, error)) (v T, err error) {
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(fatal)
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("%s", f.msg)
		}
	}()
	return f()
}
