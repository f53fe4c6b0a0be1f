package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

const (
	// maxBulkDocs bounds one bulk request; importers send batches.
	maxBulkDocs = 1000
	// bulkConcurrency is how many puts of one bulk request run at once.
	// Concurrent puts share the store's group commits, which is what makes
	// a bulk faster than the same puts one by one; the bound keeps one
	// request from flooding the write queue.
	bulkConcurrency = 32
)

// bulkResult is one document's outcome, at its index in the request.
type bulkResult struct {
	OK       bool        `json:"ok"`
	ID       string      `json:"id"`
	Rev      string      `json:"rev,omitempty"`
	Seq      int64       `json:"seq,omitempty"`
	Existing bool        `json:"existing,omitempty"`
	Error    *errs.Error `json:"error,omitempty"`
}

// bulk puts many documents in one request. Each document succeeds or
// fails on its own, like separate puts; the answer lists the outcomes in
// input order. Documents run concurrently, so two documents with the same
// _id in one request are written in no particular order.
func (s *Server) bulk(w http.ResponseWriter, r *http.Request, a engine.Actor) error {
	var req struct {
		Docs     []json.RawMessage `json:"docs"`
		IfAbsent bool              `json:"ifAbsent"`
	}
	const example = `{"docs":[{"_id":"j1","status":"pending"}],"ifAbsent":true}`
	if err := decodeBody(w, r, bulkBodyBytes(s.e.MaxDocBytes()), &req, example); err != nil {
		return err
	}
	switch {
	case req.Docs == nil:
		return errs.New(errs.Invalid, "the request body has no docs array; send %s", example)
	case len(req.Docs) > maxBulkDocs:
		return errs.New(errs.Invalid, "a bulk request takes at most %d documents, not %d; split it into batches", maxBulkDocs, len(req.Docs))
	}
	ref, db := appRef(r), r.PathValue("db")
	if err := engine.ValidDB(db); err != nil {
		return err
	}
	o := appcode.PutOptions{IfAbsent: req.IfAbsent}
	results := make([]bulkResult, len(req.Docs))
	if len(req.Docs) > 0 {
		// The first document goes alone: an unknown app or a missing
		// credential fails it the same way it would fail every other one,
		// and deserves one error, not a thousand.
		results[0] = s.bulkPut(r, a, ref, db, req.Docs[0], o)
		if e := results[0].Error; e != nil && (e.Code == errs.NotFound || e.Code == errs.Unauthorized) {
			return e
		}
	}
	s.bulkRun(len(req.Docs)-1, func(i int) {
		results[i+1] = s.bulkPut(r, a, ref, db, req.Docs[i+1], o)
	})
	writeJSON(w, http.StatusOK, struct {
		Results []bulkResult `json:"results"`
	}{results})
	return nil
}

// bulkRun calls f(0..n-1) on at most bulkConcurrency goroutines.
func (s *Server) bulkRun(n int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(n, bulkConcurrency) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// bulkPut puts one document and reports its outcome; a server failure
// is reported as any request's is (asError). It recovers a panic itself:
// it runs on its own goroutine, beyond the reach of the server's
// recovery, and one bad document must not crash the process.
func (s *Server) bulkPut(r *http.Request, a engine.Actor, ref, db string, doc json.RawMessage, o appcode.PutOptions) (res bulkResult) {
	defer func() {
		if v := recover(); v != nil {
			res = bulkResult{ID: bodyID(doc), Error: s.failure(r, "bulk put panicked", fmt.Sprint(v), "app", ref, "db", db, "stack", string(debug.Stack()))}
			s.metrics.write(false, res.Error)
		}
	}()
	wr, err := s.e.Put(r.Context(), a, ref, db, "", doc, o)
	s.metrics.write(wr.Existing, err)
	if err != nil {
		return bulkResult{ID: bodyID(doc), Error: s.asError(r, err)}
	}
	return bulkResult{OK: true, ID: wr.ID, Rev: wr.Rev, Seq: wr.Seq, Existing: wr.Existing}
}

// bodyID is a failed document's _id, when it has a readable one, so the
// client can tell which document failed without counting.
func bodyID(doc json.RawMessage) string {
	var v struct {
		ID any `json:"_id"`
	}
	if json.Unmarshal(doc, &v) != nil {
		return ""
	}
	id, _ := v.ID.(string)
	return id
}
