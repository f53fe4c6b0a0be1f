package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
)

// Mover moves an app from its database to another, on a server that
// spreads apps over several (internal/placement).
type Mover interface {
	// Move moves the app to database to and returns the one it was in.
	Move(ctx context.Context, a store.App, to int) (from int, err error)
}

// moveApp moves an app to another database: its owner or the admin.
func (s *Server) moveApp(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	var req struct {
		To *int `json:"to"`
	}
	const example = `{"to":1}`
	if err := decodeBody(w, r, smallBodyBytes, &req, example); err != nil {
		return err
	}
	if req.To == nil {
		return errs.New(errs.Invalid, "which database? send %s (databases are numbered from 0 in the order of the server's --postgres URLs)", example)
	}
	app, err := s.e.AdminApp(r.Context(), a, appRef(r))
	if err != nil {
		return err
	}
	if s.mover == nil {
		return errs.New(errs.Invalid, "this server keeps every app in one database; start its nodes with several --postgres URLs to spread apps over them")
	}
	// A client that leaves does not cut the move short.
	from, err := s.mover.Move(context.WithoutCancel(r.Context()), app, *req.To)
	var ee *errs.Error
	if errors.As(err, &ee) {
		return err
	}
	if err != nil {
		// The owner or the admin asked: they get the failure itself.
		return errs.New(errs.Unavailable, "moving %s did not finish: %v; run the same move again, which finishes it or undoes what is left", appRef(r), err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "app": appRef(r), "from": from, "to": *req.To})
	return nil
}
