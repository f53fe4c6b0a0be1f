package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
)

// codeBodyBytes bounds a deploy: two source files, and the static files
// in base64 (a third larger than their limit).
const codeBodyBytes = 8<<20 + engine.MaxStaticTotalBytes*4/3 + 1<<20

// deploy stores access.js, backend.js and the static files of public/
// (a map of paths to base64 contents) as the app's next version.
func (s *Server) deploy(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	var req struct {
		Access  string            `json:"access"`
		Backend string            `json:"backend"`
		Files   map[string][]byte `json:"files"`
	}
	if err := decodeBody(w, r, codeBodyBytes, &req, `{"access":"export function jobs(doc, oldDoc, user, ctx) {...}","backend":"","files":{"index.html":"PGgxPkhpPC9oMT4="}}`); err != nil {
		return err
	}
	info, err := s.e.DeployCode(r.Context(), a, appRef(r), engine.Code{Access: req.Access, Backend: req.Backend, Files: req.Files})
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

// settings changes per-app settings: the access-function deadline,
// whether anonymous readers may read the app's public channels, the extra
// web origins, who may sign up as a visitor, and (for a server admin)
// the memory one call of its JavaScript may use. Any of them; they are
// applied in that order, and the first invalid one stops the rest.
func (s *Server) settings(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	var req struct {
		AccessTimeout *string   `json:"accessTimeout"`
		Public        *bool     `json:"public"`
		Origins       *[]string `json:"origins"`
		Signup        *string   `json:"signup"`
		JSMemory      *int      `json:"jsMemory"`
	}
	const example = `{"accessTimeout":"250ms"}, {"public":true}, {"origins":["http://localhost:5173"]}, {"signup":"open"} or {"jsMemory":256}`
	if err := decodeBody(w, r, smallBodyBytes, &req, example); err != nil {
		return err
	}
	if req.AccessTimeout == nil && req.Public == nil && req.Origins == nil && req.Signup == nil && req.JSMemory == nil {
		return errs.New(errs.Invalid, "nothing to change; send %s", example)
	}
	out := map[string]any{"ok": true}
	if req.AccessTimeout != nil {
		d, err := time.ParseDuration(*req.AccessTimeout)
		if err != nil {
			return errs.New(errs.Invalid, "accessTimeout %q is not a duration; use a value such as \"250ms\" or \"0\" for the default", *req.AccessTimeout)
		}
		if err := s.e.SetAccessTimeout(r.Context(), a, appRef(r), d); err != nil {
			return err
		}
		out["accessTimeout"] = d.String()
	}
	if req.Public != nil {
		if err := s.e.SetPublic(r.Context(), a, appRef(r), *req.Public); err != nil {
			return err
		}
		out["public"] = *req.Public
	}
	if req.Origins != nil {
		origins, err := s.e.SetOrigins(r.Context(), a, appRef(r), *req.Origins)
		if err != nil {
			return err
		}
		out["origins"] = origins
	}
	if req.Signup != nil {
		if err := s.e.SetSignup(r.Context(), a, appRef(r), *req.Signup); err != nil {
			return err
		}
		out["signup"] = *req.Signup
	}
	if req.JSMemory != nil {
		if err := s.e.SetJSMemory(r.Context(), a, appRef(r), *req.JSMemory); err != nil {
			return err
		}
		out["jsMemory"] = *req.JSMemory
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
