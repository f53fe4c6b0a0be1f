package server

import (
	"encoding/json"
	"net/http"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
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

// query answers field=key lookups, ranges (from, to) and prefixes. key,
// from and to are JSON values, so "3" and 3 are different keys; the CLI
// quotes bare words before sending them. prefix is plain text.
func (s *Server) query(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	sel, err := selectorParams(r)
	if err != nil {
		return err
	}
	limit, err := limitParam(r)
	if err != nil {
		return err
	}
	p, err := s.e.Select(r.Context(), a, appRef(r), r.PathValue("db"), sel, limit, r.URL.Query().Get("after"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, p)
	return nil
}

// selectorParams reads field with key, from and/or to, or prefix.
func selectorParams(r *http.Request) (engine.Selector, error) {
	q := r.URL.Query()
	sel := engine.Selector{Field: q.Get("field")}
	if sel.Field == "" || !(q.Has("key") || q.Has("from") || q.Has("to") || q.Has("prefix")) {
		return sel, errs.New(errs.Invalid, "a query needs field and key, from/to or prefix; pass e.g. ?field=status&key=%%22running%%22 or ?field=n&from=10&to=20 (key, from and to are JSON values)")
	}
	param := func(name string) json.RawMessage {
		if !q.Has(name) {
			return nil
		}
		return json.RawMessage(q.Get(name))
	}
	sel.Key, sel.From, sel.To = param("key"), param("from"), param("to")
	if q.Has("prefix") {
		p := q.Get("prefix")
		sel.Prefix = &p
	}
	return sel, nil
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
