package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/handoff-run/handoff/engine"
	"github.com/handoff-run/handoff/errs"
)

// codeBodyBytes bounds a deploy: two source files.
const codeBodyBytes = 8 << 20

// deploy stores access.js and backend.js as the app's next version.
func (s *Server) deploy(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	var req struct {
		Access  string `json:"access"`
		Backend string `json:"backend"`
	}
	if err := decodeBody(w, r, codeBodyBytes, &req, `{"access":"export function jobs(doc, oldDoc, user, ctx) {...}","backend":""}`); err != nil {
		return err
	}
	info, err := s.e.Deploy(r.Context(), a, appRef(r), req.Access, req.Backend)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, info)
	return nil
}

func (s *Server) codeVersions(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	vs, err := s.e.CodeVersions(r.Context(), a, appRef(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Versions []engine.CodeInfo `json:"versions"`
	}{vs})
	return nil
}

// activate makes an earlier version live again: the rollback.
func (s *Server) activate(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	v, err := strconv.Atoi(r.PathValue("version"))
	if err != nil || v < 1 {
		return errs.New(errs.Invalid, "version %q is not a version number; list them with `handoff app versions`", r.PathValue("version"))
	}
	if err := s.e.Rollback(r.Context(), a, appRef(r), v); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "version": v})
	return nil
}

// settings changes per-app settings; today the access-function deadline.
func (s *Server) settings(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	var req struct {
		AccessTimeout string `json:"accessTimeout"`
	}
	if err := decodeBody(w, r, smallBodyBytes, &req, `{"accessTimeout":"250ms"}`); err != nil {
		return err
	}
	d, err := time.ParseDuration(req.AccessTimeout)
	if err != nil {
		return errs.New(errs.Invalid, "accessTimeout %q is not a duration; use a value such as \"250ms\" or \"0\" for the default", req.AccessTimeout)
	}
	if err := s.e.SetAccessTimeout(r.Context(), a, appRef(r), d); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "accessTimeout": d.String()})
	return nil
}
