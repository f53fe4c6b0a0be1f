package engine

import (
	"fmt"

	"github.com/handoff-run/handoff/store"
)

// MaxEventDepth is the loop guard: a write made by an onChange run whose
// event was already this deep gets no event of its own, so a handler that
// keeps writing back to its own database cannot run forever.
const MaxEventDepth = 4

// eventFor decides the outbox event of a write: one for every committed
// write of an app whose backend has onChange, none past the loop guard.
func (e *Engine) eventFor(a Actor, app *appState, w *store.Write) *store.EventSpec {
	be := app.backend()
	if be == nil || !be.Has("onChange") {
		return nil
	}
	if a.Depth > MaxEventDepth {
		e.loopStopped.Add(1)
		e.appLog(app, "server", "warn", fmt.Sprintf("loop guard: the write of %s/%s made by onChange at depth %d fires no onChange (limit %d)", w.DB, w.ID, a.Depth, MaxEventDepth), nil)
		return nil
	}
	return &store.EventSpec{Depth: a.Depth, NextAt: w.Time}
}
