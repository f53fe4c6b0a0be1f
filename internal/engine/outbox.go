package engine

import (
	"fmt"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// MaxEventDepth is the loop guard: a write made by an onChange run whose
// event was already this deep gets no event of its own, so a handler that
// keeps writing back to its own database cannot run forever.
const MaxEventDepth = 4

// eventFor decides the outbox event of a write: one for every committed
// write of an app whose backend has onChange and whose config.onChange
// filter the write passes, none past the loop guard. A delete is
// filtered on the body it removes (head's), the oldDoc its handler sees.
// guarded reports a write the guard held back; it is counted and logged
// once the write commits (loopGuarded), not on each try of the write.
func (e *Engine) eventFor(a Actor, app *appState, w *store.Write, head *store.Doc) (ev *store.EventSpec, guarded bool) {
	be := app.backend()
	if be == nil || !be.Has(appcode.OnChange) {
		return nil, false
	}
	cfg := be.Config()
	body := w.Body
	if w.Deleted && head != nil {
		body = head.Body
	}
	if !changeWanted(cfg.OnChange.DBs, cfg.OnChange.When, w.DB, body) {
		return nil, false
	}
	if a.Depth > MaxEventDepth {
		return nil, true
	}
	return &store.EventSpec{Depth: a.Depth, Origin: a.Origin, NextAt: w.Time}, false
}

// loopGuarded counts and logs a committed write whose onChange the loop
// guard held back.
func (e *Engine) loopGuarded(a Actor, app *appState, w *store.Write) {
	e.loopMu.Lock()
	if e.loopStopped == nil {
		e.loopStopped = map[int64]int64{}
	}
	e.loopStopped[app.ID]++
	e.loopMu.Unlock()
	e.appLog(app, "server", "warn", fmt.Sprintf("loop guard: the write of %s/%s made by onChange at depth %d fires no onChange (limit %d)", w.DB, w.ID, a.Depth, MaxEventDepth), nil)
}
