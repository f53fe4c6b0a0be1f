package engine

import (
	"context"
	"encoding/json"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
)

// handlerCtx is the ctx of a running handler. Its actor carries the
// handler's name, which only the server sets: that is what
// ctx.requireBackend checks in access.js.
type handlerCtx struct {
	e     *Engine
	app   *appState
	actor Actor
}

var _ appcode.HandlerContext = (*handlerCtx)(nil)

func (h *handlerCtx) App() (string, string) { return h.app.Owner, h.app.Name }

// HeapLimit is the app's own memory limit for a handler run (appcode.HeapLimiter).
func (h *handlerCtx) HeapLimit() int64 { return h.app.heapLimit() }

func (h *handlerCtx) Put(ctx context.Context, db, id string, doc json.RawMessage, o appcode.PutOptions) (appcode.WriteResult, error) {
	return h.e.Put(ctx, h.actor, h.app.ref(), db, id, doc, o)
}

func (h *handlerCtx) Get(ctx context.Context, db, id string) (json.RawMessage, error) {
	doc, err := h.e.Get(ctx, h.actor, h.app.ref(), db, id)
	if errs.Is(err, errs.NotFound) {
		return nil, nil
	}
	return doc, err
}

func (h *handlerCtx) Delete(ctx context.Context, db, id, ifRev string) (appcode.WriteResult, error) {
	return h.e.Delete(ctx, h.actor, h.app.ref(), db, id, ifRev)
}

func (h *handlerCtx) Query(ctx context.Context, db, field string, key json.RawMessage, limit int, after string) (appcode.Page, error) {
	return h.e.Query(ctx, h.actor, h.app.ref(), db, field, key, limit, after)
}

func (h *handlerCtx) Log(level, message string, fields json.RawMessage) {
	h.e.appLog(h.app, string(h.actor.Handler), level, message, fields)
}

func (h *handlerCtx) Secret(name string) (string, bool) {
	v, ok := h.e.appSecrets(h.app)[name]
	return v, ok
}
