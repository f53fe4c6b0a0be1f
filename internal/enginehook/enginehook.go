// Package enginehook gives the project's own tools the engine under a
// handoff.Instance. The public package keeps the engine out of its API,
// so that programs embedding handoff depend on a small surface that the
// engine can change under; the bench still needs the engine's admin reads
// (the outbox, the ledger) to check a run.
package enginehook

import "github.com/handoff-run/handoff/internal/engine"

// Engine returns the engine of a *handoff.Instance. Package handoff sets
// it; it takes any because this package cannot import that one.
var Engine func(instance any) *engine.Engine
