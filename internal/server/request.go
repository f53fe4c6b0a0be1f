package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/handoff-run/handoff/errs"
)

// smallBodyBytes bounds the bodies of user, app and member requests.
const smallBodyBytes = 64 << 10

// bulkBodyBytes bounds a bulk request: 32 MiB, or one document of the
// largest allowed size plus room for the envelope. Clients that import
// large documents batch by bytes as well as by count.
func bulkBodyBytes(maxDoc int) int64 {
	return max(32<<20, int64(maxDoc)+smallBodyBytes)
}

// readBody reads the whole body, refusing with too_large past limit bytes
// without reading further, so an oversized upload costs the server at
// most limit bytes of memory.
func readBody(w http.ResponseWriter, r *http.Request, limit int64, what string) ([]byte, error) {
	tooLarge := func() error {
		return errs.New(errs.TooLarge, "%s is over the limit of %d bytes; make it smaller", what, limit)
	}
	if r.ContentLength > limit {
		return nil, tooLarge()
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return nil, tooLarge()
	}
	if err != nil {
		return nil, bodyError(err)
	}
	return b, nil
}

// bodyError is the answer to a body that could not be read in full.
func bodyError(err error) error {
	var te errBodyTimeout
	if errors.As(err, &te) {
		return errs.New(errs.Invalid, "the request body did not arrive within %v of the start of the request; send it faster or in smaller parts (signed-in requests, with a token or a device signature, may take longer)", te.limit)
	}
	return errs.New(errs.Invalid, "could not read the request body: %v; send it again", err)
}

// decodeBody decodes a JSON request body into v. Unknown fields are
// refused, so a misspelled option fails loudly instead of being ignored.
// example is shown in the error to say what a good body looks like.
func decodeBody(w http.ResponseWriter, r *http.Request, limit int64, v any, example string) error {
	b, err := readBody(w, r, limit, "the request body")
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return errs.New(errs.Invalid, "the request body is empty; send a JSON object such as %s", example)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errs.New(errs.Invalid, "the request body is not valid: %s; send a JSON object such as %s", describeJSONError(err), example)
	}
	if dec.More() {
		return errs.New(errs.Invalid, "the request body has data after the JSON object; send exactly one object such as %s", example)
	}
	return nil
}

// describeJSONError turns a decoding error into words a user can act on.
func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("field %q must be %s, not %s", te.Field, jsonType(te.Type.Kind().String()), te.Value)
	case errors.As(err, &te):
		return fmt.Sprintf("expected %s, got %s", jsonType(te.Type.Kind().String()), te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("malformed JSON at byte %d (%v)", se.Offset, se)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends too early"
	}
	return err.Error()
}

func jsonType(kind string) string {
	switch kind {
	case "string":
		return "a string"
	case "bool":
		return "true or false"
	case "slice", "array":
		return "an array"
	case "struct", "map":
		return "an object"
	case "interface":
		return "a JSON value"
	}
	return "a number"
}

// checkQuery refuses a malformed query string. url.Values silently drops
// the pairs it cannot decode, which would turn a mangled cursor into
// "start from the beginning" instead of an error.
func checkQuery(r *http.Request) error {
	if _, err := url.ParseQuery(r.URL.RawQuery); err != nil {
		return errs.New(errs.Invalid, "the query string is malformed: %v; URL-encode parameter values", err)
	}
	return nil
}

// writeQuery reads the query string of a put or delete. A misspelt
// ifRev must not turn a guarded write into a blind one, so parameters
// other than allowed are refused; so is an empty ifRev, which is what a
// script sends when the rev it read came back empty.
func writeQuery(r *http.Request, allowed ...string) (url.Values, error) {
	if err := checkQuery(r); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	for k := range q {
		if !slices.Contains(allowed, k) {
			return nil, errs.New(errs.Invalid, "unknown parameter %q for this write; the parameters are %s (names are case-sensitive)", k, strings.Join(allowed, ", "))
		}
	}
	if q.Has("ifRev") && q.Get("ifRev") == "" {
		return nil, errs.New(errs.Invalid, "ifRev is empty; pass the _rev you read (such as 2-1f0c...), or leave ifRev out to write without a check")
	}
	return q, nil
}

// intParam parses an optional integer query parameter; absent is 0.
func intParam(r *http.Request, name, hint string) (int, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, errs.New(errs.Invalid, "%s=%q is not an integer; %s", name, v, hint)
	}
	return n, nil
}

// limitParam is the page size; absent is 0, which lets the engine pick
// its default. A limit given must be a page size: 0 would read as "none".
func limitParam(r *http.Request) (int, error) {
	const hint = "pass a page size from 1 to 1000, or leave it out for the default"
	n, err := intParam(r, "limit", hint)
	if err == nil && n < 1 && r.URL.Query().Has("limit") {
		return 0, errs.New(errs.Invalid, "limit=%d is not a page size; %s", n, hint)
	}
	return n, err
}

// sinceParam is the sequence a changes page starts after.
func sinceParam(r *http.Request) (int64, error) { return sinceParamNamed(r, "since") }

// sinceParamNamed parses a position to resume after (a sequence or a log
// line id); absent is 0.
func sinceParamNamed(r *http.Request, name string) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, errs.New(errs.Invalid, "%s=%q is not a position; pass 0, or a value from an earlier page", name, v)
	}
	return n, nil
}

// boolParam parses an optional boolean query parameter; absent is false.
func boolParam(r *http.Request, name string) (bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, errs.New(errs.Invalid, "%s=%q is not a boolean; pass %s=true or leave it out", name, v, name)
	}
	return b, nil
}
