package jsvm

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/dop251/goja"
)

// newTestPool compiles src as filename and builds a pool, failing the
// test on any error. The pool is closed when the test ends. Unless the
// test sets one, the deadline is 10s rather than 100ms: calls that must
// succeed should not fail because a shared CI machine descheduled the
// test for a while. Tests of the deadline set it per call.
func newTestPool(t testing.TB, filename, src string, opts Options) *Pool {
	t.Helper()
	if opts.Deadline == 0 {
		opts.Deadline = 10 * time.Second
	}
	prog, err := Compile(filename, src)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	p, err := NewPool(prog, opts)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	t.Cleanup(p.Close)
	return p
}

// jsonArgs builds call arguments from JSON texts ("null" for null).
func jsonArgs(docs ...string) func(vm *VM) ([]goja.Value, error) {
	return func(vm *VM) ([]goja.Value, error) {
		args := make([]goja.Value, len(docs))
		for i, d := range docs {
			v, err := vm.ParseJSON([]byte(d))
			if err != nil {
				return nil, err
			}
			args[i] = v
		}
		return args, nil
	}
}

// callJSON calls export with JSON arguments and returns the result as JSON.
func callJSON(t testing.TB, p *Pool, export string, docs ...string) (string, error) {
	t.Helper()
	var out string
	err := p.Call(context.Background(), export, jsonArgs(docs...), func(vm *VM, v goja.Value) error {
		b, err := vm.ToJSON(v)
		out = string(b)
		return err
	})
	return out, err
}

// mustJSON calls export and fails the test on error.
func mustJSON(t testing.TB, p *Pool, export string, docs ...string) string {
	t.Helper()
	out, err := callJSON(t, p, export, docs...)
	if err != nil {
		t.Fatalf("%s: %v", export, err)
	}
	return out
}

// sameJSON reports whether two JSON texts hold equal values.
func sameJSON(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

type jsonRawMessage = json.RawMessage

// callWithin calls export with no arguments and a deadline of d.
func callWithin(p *Pool, export string, d time.Duration) error {
	return p.Do(context.Background(), Call{Export: export, Deadline: d})
}

// borrow takes a runtime from p as a call would, making it if none is
// idle (a pool makes one up front).
func borrow(t testing.TB, p *Pool) *VM {
	t.Helper()
	vm, err := p.get(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	return vm
}
