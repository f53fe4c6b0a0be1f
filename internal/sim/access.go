package sim

import (
	"context"

	"github.com/handoff-run/handoff/internal/appcode"
)

// compiler is the app's JavaScript with the harness's hooks: it shows
// every access.js decision to Options.OnAccess, and records every handler
// run (backend.go).
type compiler struct {
	appcode.Compiler
	seen func(appcode.AccessInput, error)
	rec  *recorder
}

func (c compiler) CompileAccess(filename, source string) (appcode.AccessFunc, error) {
	f, err := c.Compiler.CompileAccess(filename, source)
	if err != nil {
		return nil, err
	}
	if c.seen == nil {
		return f, nil
	}
	return accessFunc{AccessFunc: f, seen: c.seen}, nil
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
	seen func(appcode.AccessInput, error)
}

func (f accessFunc) Check(ctx context.Context, in appcode.AccessInput) (appcode.AccessDecision, error) {
	d, err := f.AccessFunc.Check(ctx, in)
	f.seen(in, err)
	return d, err
}
