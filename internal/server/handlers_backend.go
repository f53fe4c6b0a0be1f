package server

import (
	"net/http"
	"strconv"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
)

// logs lists the app's handler log lines after ?after=ID.
func (s *Server) logs(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	after, err := sinceParamNamed(r, "after")
	if err != nil {
		return err
	}
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	lines, err := s.e.Logs(r.Context(), a, appRef(r), after, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Logs []engine.LogLine `json:"logs"`
	}{lines})
	return nil
}

// events lists the app's waiting onChange events, or with ?dead=true the
// dead ones.
func (s *Server) events(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	dead, err := boolParam(r, "dead")
	if err != nil {
		return err
	}
	after, err := sinceParamNamed(r, "after")
	if err != nil {
		return err
	}
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	evs, err := s.e.Events(r.Context(), a, appRef(r), dead, after, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Events []engine.EventInfo `json:"events"`
	}{evs})
	return nil
}

// replay delivers a dead event again.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	seq, err := strconv.ParseInt(r.PathValue("seq"), 10, 64)
	if err != nil || seq < 1 {
		return errs.New(errs.Invalid, "event %q is not a sequence number; list dead events with `handoff events --dead`", r.PathValue("seq"))
	}
	if err := s.e.ReplayEvent(r.Context(), a, appRef(r), seq); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "seq": seq})
	return nil
}

// schedule reports the scheduled handler's interval, last run and error.
func (s *Server) schedule(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	info, err := s.e.Schedule(r.Context(), a, appRef(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

// transitions counts the moves of ?field= (default status) across the
// database's ledger: the console draws them as a graph.
func (s *Server) transitions(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	field := r.URL.Query().Get("field")
	if field == "" {
		field = "status"
	}
	ts, err := s.e.Transitions(r.Context(), a, appRef(r), r.PathValue("db"), field)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		Field       string              `json:"field"`
		Transitions []engine.Transition `json:"transitions"`
	}{field, ts})
	return nil
}
