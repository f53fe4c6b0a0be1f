package server

import (
	"net/http"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

// writeResponse is the answer to a put or delete:
// {"ok":true,"id","rev","seq","existing"?}.
type writeResponse struct {
	OK bool `json:"ok"`
	appcode.WriteResult
}

// putDoc writes the document named in the path.
func (s *Server) putDoc(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	return s.put(w, r, a, r.PathValue("id"))
}

// postDoc writes a document whose id comes from its _id, or is minted.
func (s *Server) postDoc(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	return s.put(w, r, a, "")
}

func (s *Server) put(w http.ResponseWriter, r *http.Request, a engine.Actor, id string) error {
	o, err := putOptions(r)
	if err != nil {
		return err
	}
	// One byte past the engine's limit is enough to know a body is too
	// large; the engine validates everything else about it.
	body, err := readBody(w, r, int64(s.e.MaxDocBytes()), "the document")
	if err != nil {
		s.metrics.write(false, err)
		return err
	}
	res, err := s.e.Put(r.Context(), a, appRef(r), r.PathValue("db"), id, body, o)
	s.metrics.write(res.Existing, err)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, writeResponse{OK: true, WriteResult: res})
	return nil
}

func putOptions(r *http.Request) (appcode.PutOptions, error) {
	q, err := writeQuery(r, "ifRev", "ifAbsent")
	if err != nil {
		return appcode.PutOptions{}, err
	}
	ifAbsent, err := boolParam(r, "ifAbsent")
	if err != nil {
		return appcode.PutOptions{}, err
	}
	// The engine refuses ifRev with ifAbsent, for every path.
	return appcode.PutOptions{IfRev: q.Get("ifRev"), IfAbsent: ifAbsent}, nil
}

func (s *Server) getDoc(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	doc, err := s.e.Get(r.Context(), a, appRef(r), r.PathValue("db"), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeRawJSON(w, http.StatusOK, doc)
	return nil
}

func (s *Server) history(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	h, err := s.e.History(r.Context(), a, appRef(r), r.PathValue("db"), r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, struct {
		History []engine.Entry `json:"history"`
	}{h})
	return nil
}

func (s *Server) deleteDoc(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	q, err := writeQuery(r, "ifRev")
	if err != nil {
		return err
	}
	res, err := s.e.Delete(r.Context(), a, appRef(r), r.PathValue("db"), r.PathValue("id"), q.Get("ifRev"))
	s.metrics.write(false, err)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, writeResponse{OK: true, WriteResult: res})
	return nil
}
