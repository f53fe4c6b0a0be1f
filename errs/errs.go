// Package errs holds the error codes that every layer of handoff speaks:
// the engine returns them, the HTTP API sends them as JSON, the CLI maps
// them to exit codes and handlers see them as err.code.
package errs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
)

// Code is a stable, machine-readable error kind. Scripts match on it, so
// the values never change once published.
type Code string

const (
	Invalid      Code = "invalid"      // the request is malformed; fix it and retry
	Conflict     Code = "conflict"     // ifRev no longer matches the head
	Forbidden    Code = "forbidden"    // the access function or a role refused
	Unauthorized Code = "unauthorized" // no valid credential
	NotFound     Code = "not_found"    // unknown app, database, user or document
	TooLarge     Code = "too_large"    // the document is over the size limit
	AccessError  Code = "access_error" // the access function itself failed
	AppError     Code = "app_error"    // an app's fetch handler failed: the app's code, not the server
	Exists       Code = "exists"       // a create of something that already exists
	Unavailable  Code = "unavailable"  // the server is shutting down or overloaded
	Internal     Code = "internal"     // a bug or an I/O failure on the server
	RateLimited  Code = "rate_limited" // too many failed attempts; wait and retry
	FanOut       Code = "fan_out"      // an onChange chain spent its write budget
)

// Error is an error with a code and a message that tells the user what to
// do next. Reason carries the access function's own words for forbidden.
// ID names a server failure (a 5xx answer) in the server's log. Detail is
// for that log only, never sent: the failure's own text, such as a
// storage error's, which may hold SQL and data.
type Error struct {
	Code    Code   `json:"code"`
	Message string `json:"message"`
	Reason  string `json:"reason,omitempty"`
	ID      string `json:"id,omitempty"`
	Detail  string `json:"-"`
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// New returns an *Error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf reports the code of err, or Internal when err carries none.
func CodeOf(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return Internal
}

// Is reports whether err carries code.
func Is(err error, code Code) bool { return err != nil && CodeOf(err) == code }

// HTTPStatus maps a code to the status the API answers with.
func HTTPStatus(code Code) int {
	switch code {
	case Invalid:
		return http.StatusBadRequest
	case Unauthorized:
		return http.StatusUnauthorized
	case Forbidden, AccessError:
		return http.StatusForbidden
	case NotFound:
		return http.StatusNotFound
	case Conflict, Exists:
		return http.StatusConflict
	case TooLarge:
		return http.StatusRequestEntityTooLarge
	case AppError:
		return http.StatusBadGateway
	case Unavailable:
		return http.StatusServiceUnavailable
	case RateLimited, FanOut:
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// ExitCode maps a code to the CLI's exit status (docs/architecture.md, "The CLI contract").
func ExitCode(code Code) int {
	switch code {
	case Conflict:
		return 3
	case Forbidden, Unauthorized, AccessError:
		return 4
	case NotFound:
		return 5
	}
	return 1
}

// NewID returns a short random error id, which ties a 5xx answer to the
// log lines that tell its story.
func NewID() string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Storage is the error a caller sees for a store call that failed: an
// *Error stays as it is; a cancelled or expired context is unavailable,
// to retry; anything else is internal, its detail kept for the log only.
func Storage(err error) error {
	var ee *Error
	if errors.As(err, &ee) {
		return err
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return New(Unavailable, "the request was cancelled before it finished: %v; retry it", err)
	}
	return &Error{Code: Internal, Detail: err.Error(),
		Message: "the server's storage failed; retry, and if it persists tell the server's operator"}
}
