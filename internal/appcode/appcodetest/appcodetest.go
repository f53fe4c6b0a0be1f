// Package appcodetest has stand-ins for an app's compiled code, for tests
// of the engine's machinery without the JavaScript VM: a backend whose
// handlers are Go funcs, compiled from any backend.js source.
package appcodetest

import (
	"context"
	"errors"

	"github.com/handoff-run/handoff/internal/appcode"
)

// Backend is a backend.js stand-in: each handler is a func field, and one
// left nil is one the "module" does not export.
type Backend struct {
	Cfg       appcode.BackendConfig
	OnChange  func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error
	Scheduled func(ctx context.Context, ev appcode.TickEvent, hc appcode.HandlerContext) error
	Fetch     func(ctx context.Context, req appcode.FetchRequest, hc appcode.HandlerContext) (appcode.FetchResponse, error)
}

// Compiler compiles every backend.js into its B, and access.js with
// Access, when set: without it, access.js is refused.
type Compiler struct {
	B      *Backend
	Access func(filename, source string) (appcode.AccessFunc, error)
}

func (c Compiler) CompileBackend(string, string) (appcode.Backend, error) { return c.B.Code(), nil }

func (c Compiler) CompileAccess(filename, source string) (appcode.AccessFunc, error) {
	if c.Access == nil {
		return nil, errors.New("no access.js in these tests")
	}
	return c.Access(filename, source)
}

// Code adapts a *Backend to appcode.Backend.
func (b *Backend) Code() appcode.Backend { return code{b} }

// code has the interface's method names, which the func fields take.
type code struct{ b *Backend }

func (c code) Config() appcode.BackendConfig { return c.b.Cfg }

func (c code) Has(h appcode.Handler) bool {
	switch h {
	case appcode.OnChange:
		return c.b.OnChange != nil
	case appcode.Scheduled:
		return c.b.Scheduled != nil
	case appcode.Fetch:
		return c.b.Fetch != nil
	}
	return false
}

func (c code) OnChange(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
	return c.b.OnChange(ctx, ev, hc)
}

func (c code) Scheduled(ctx context.Context, ev appcode.TickEvent, hc appcode.HandlerContext) error {
	return c.b.Scheduled(ctx, ev, hc)
}

func (c code) Fetch(ctx context.Context, req appcode.FetchRequest, hc appcode.HandlerContext) (appcode.FetchResponse, error) {
	if c.b.Fetch == nil {
		return appcode.FetchResponse{}, errors.New("no fetch handler")
	}
	return c.b.Fetch(ctx, req, hc)
}

func (code) Close() {}
