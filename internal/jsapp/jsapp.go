// Package jsapp compiles an app's JavaScript, access.js and backend.js,
// for the engine: the one entry point of app code on a server. Package
// access runs the transition table and package backend the handlers, each
// on pools of JavaScript runtimes (package jsvm).
package jsapp

import (
	"github.com/handoff-run/handoff/internal/access"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/backend"
)

// Options configure both halves; zero values pick their defaults.
type Options struct {
	Access  access.Options
	Backend backend.Options
}

// Compiler is an appcode.Compiler for JavaScript.
type Compiler struct {
	access  *access.Runtime
	backend *backend.Compiler
}

var _ appcode.Compiler = (*Compiler)(nil)

// New returns a Compiler.
func New(o Options) *Compiler {
	return &Compiler{access: access.New(o.Access), backend: backend.New(o.Backend)}
}

// CompileAccess compiles access.js into a pool of runtimes.
func (c *Compiler) CompileAccess(filename, source string) (appcode.AccessFunc, error) {
	return c.access.CompileAccess(filename, source)
}

// CompileBackend compiles backend.js and checks its config.
func (c *Compiler) CompileBackend(filename, source string) (appcode.Backend, error) {
	return c.backend.CompileBackend(filename, source)
}
