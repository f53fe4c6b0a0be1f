package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// asError is err as the client may see it. A server failure (any code
// answered with a 5xx) gets an error id, which the log records with the
// whole error, its Detail included; the client gets the message and the
// id, never the Detail. An error without a code is a bug: the client gets
// a generic internal error.
func (s *Server) asError(r *http.Request, err error) *errs.Error {
	var e *errs.Error
	if !errors.As(err, &e) {
		return s.failure(r, "request failed with an uncoded error", err.Error())
	}
	if errs.HTTPStatus(e.Code) < 500 {
		return e
	}
	id := e.ID // set by a layer that logged the failure under it too
	if id == "" {
		id = errs.NewID()
	}
	level := slog.LevelError
	if e.Code != errs.Internal {
		level = slog.LevelWarn // not the server failing: an app's code, shutting down, cancelled
	}
	s.log.Log(r.Context(), level, "request failed", "error_id", id, "method", r.Method, "route", r.Pattern,
		"code", e.Code, "err", e.Message, "detail", e.Detail)
	return &errs.Error{Code: e.Code, Message: e.Message + " (error id " + id + ")", Reason: e.Reason, ID: id}
}

// failure logs a failure that has no words for the client under a new
// error id, and returns what the client gets instead.
func (s *Server) failure(r *http.Request, what, detail string, attrs ...any) *errs.Error {
	id := errs.NewID()
	s.log.Error(what, append([]any{"error_id", id, "method", r.Method, "route", r.Pattern, "err", detail}, attrs...)...)
	return &errs.Error{Code: errs.Internal, ID: id,
		Message: "the server failed to handle the request (error id " + id + "); retry, and if it persists give this id to the server's operator, whose log has the details"}
}

// recovered handles a panic of a handler: it logs it with its stack and
// answers 500 internal if nothing was sent yet. It reports whether the
// response had already started, in which case the caller aborts the
// connection.
func (s *Server) recovered(w *responseWriter, r *http.Request, v any) (abort bool) {
	if v == http.ErrAbortHandler {
		return true
	}
	e := s.failure(r, "handler panicked", fmt.Sprint(v), "stack", string(debug.Stack()))
	if w.status != 0 {
		return true
	}
	s.writeErrorStatus(w, http.StatusInternalServerError, e)
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
