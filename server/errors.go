package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"

	"github.com/handoff-run/handoff/errs"
)

// errorBody is the JSON shape of every error answer:
// {"error":{"code":"conflict","message":"...","reason":"..."}}.
type errorBody struct {
	Error *errs.Error `json:"error"`
}

// writeError answers with err's code and the status errs.HTTPStatus
// gives it. An error without a code is a bug: the client gets a generic
// internal error and the details go to the log, never to the client.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	e := s.asError(r, err)
	s.writeErrorStatus(w, errs.HTTPStatus(e.Code), e)
}

// writeErrorStatus answers with e under an explicit status, for the few
// answers (405) whose status the code alone does not say.
func (s *Server) writeErrorStatus(w http.ResponseWriter, status int, e *errs.Error) {
	if e.Code == errs.Unauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="handoff"`)
	}
	writeJSON(w, status, errorBody{Error: e})
}

func (s *Server) asError(r *http.Request, err error) *errs.Error {
	var e *errs.Error
	if !errors.As(err, &e) {
		s.log.Error("request failed with an uncoded error", "method", r.Method, "route", r.Pattern, "err", err)
		return errs.New(errs.Internal, "the server failed to handle the request; retry, and check the server log if it persists")
	}
	if e.Code == errs.Internal {
		s.log.Error("request failed", "method", r.Method, "route", r.Pattern, "err", e.Message)
	}
	return e
}

// recovered handles a panic of a handler: it logs it with its stack and
// answers 500 internal if nothing was sent yet. It reports whether the
// response had already started, in which case the caller aborts the
// connection.
func (s *Server) recovered(w *responseWriter, r *http.Request, v any) (abort bool) {
	if v == http.ErrAbortHandler {
		return true
	}
	s.log.Error("handler panicked", "method", r.Method, "route", r.Pattern, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
	if w.status != 0 {
		return true
	}
	s.writeErrorStatus(w, http.StatusInternalServerError,
		errs.New(errs.Internal, "the server hit a bug handling this request; it was logged, and the server keeps running"))
	return false
}

// writeJSON sends v as the JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Only our own types are encoded here, so this is a bug.
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"the response could not be encoded"}}`)
	}
	writeRawJSON(w, status, b)
}

// writeRawJSON sends an already encoded JSON body, such as a document.
func writeRawJSON(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
	_, _ = w.Write([]byte{'\n'})
}
