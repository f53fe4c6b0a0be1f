package server

import (
	"encoding/json"
	"net/http"

	"github.com/handoff-run/handoff/engine"
	"github.com/handoff-run/handoff/errs"
)

func (s *Server) listDBs(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	dbs, err := s.e.Databases(r.Context(), a, appRef(r))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		DBs []string `json:"dbs"`
	}{dbs})
	return nil
}

// query answers field=key lookups. key is a JSON value, so "3" and 3 are
// different keys; the CLI quotes bare words before sending them.
func (s *Server) query(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	q := r.URL.Query()
	field := q.Get("field")
	if field == "" || !q.Has("key") {
		return errs.New(errs.Invalid, "a query needs field and key; pass e.g. ?field=status&key=%%22running%%22 (key is a JSON value)")
	}
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	p, err := s.e.Query(r.Context(), a, appRef(r), r.PathValue("db"), field, json.RawMessage(q.Get("key")), limit, q.Get("after"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// scan lists a database's live documents by id.
func (s *Server) scan(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	p, err := s.e.Scan(r.Context(), a, appRef(r), r.PathValue("db"), limit, r.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// changes serves both changes routes: with {db} in the path one
// database, without it every database of the app.
func (s *Server) changes(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	since, err := sinceParam(r)
	if err != nil {
		return err
	}
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	c, err := s.e.Changes(r.Context(), a, appRef(r), r.PathValue("db"), since, limit)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, c)
	return nil
}
