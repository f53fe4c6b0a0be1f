package sim

import (
	"context"

	"github.com/handoff-run/handoff/internal/appcode"
)

// compiler is the app's JavaScript with the harness's hooks. It counts
// access.js calls as work in progress, like store calls: a decision is
// CPU work in the middle of a write, between the read of the head and the
// commit, and nothing else moves while it runs. And it records every
// handler run (backend.go).
type compiler struct {
	appcode.Compiler
	st   *Store
	seen func(appcode.AccessInput, error)
	rec  *recorder
}

func (c compiler) CompileAccess(filename, source string) (appcode.AccessFunc, error) {
	f, err := c.Compiler.CompileAccess(filename, source)
	if err != nil {
		return nil, err
	}
	return accessFunc{AccessFunc: f, st: c.st, seen: c.seen}, nil
}

func (c compiler) CompileBackend(filename, source string) (appcode.Backend, error) {
	b, err := c.Compiler.CompileBackend(filename, source)
	if err != nil {
		return nil, err
	}
	return &recBackend{Backend: b, r: c.rec}, nil
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
