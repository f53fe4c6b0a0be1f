package sim

import (
	"context"

	"github.com/handoff-run/handoff/internal/appcode"
)

// accessRuntime counts access.js calls as work in progress, like store
// calls: a decision is CPU work in the middle of a write, between the
// read of the head and the commit, and nothing else moves while it runs.
type accessRuntime struct {
	appcode.Runtime
	st   *Store
	seen func(appcode.AccessInput, error)
}

func (r accessRuntime) CompileAccess(filename, source string) (appcode.AccessFunc, error) {
	f, err := r.Runtime.CompileAccess(filename, source)
	if err != nil {
		return nil, err
	}
	return accessFunc{AccessFunc: f, st: r.st, seen: r.seen}, nil
}

type accessFunc struct {
	appcode.AccessFunc
	st   *Store
	seen func(appcode.AccessInput, error)
}

func (f accessFunc) Check(ctx context.Context, in appcode.AccessInput) (appcode.AccessDecision, error) {
	defer f.st.enter()()
	d, err := f.AccessFunc.Check(ctx, in)
	if f.seen != nil {
		f.seen(in, err)
	}
	return d, err
}
