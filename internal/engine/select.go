package engine

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// Selector picks a query's documents by one field: those whose value
// equals Key, lies in [From, To), or is a string that starts with
// Prefix. Exactly one of Key, a range (From and/or To) or Prefix is set.
//
// A range holds numbers and strings only, numbers before strings:
// numbers by value, strings by code point (their UTF-8 bytes). A bound
// left out leaves that end open, so From 10 alone takes every number
// from 10 and every string. An equality query answers in id order; a
// range or prefix query in (value, id) order.
type Selector struct {
	Field    string
	Key      json.RawMessage
	From, To json.RawMessage
	Prefix   *string
}

func (s Selector) ranged() bool { return s.Key == nil }

// Select lists the live documents the selector picks that a may read,
// a page at a time.
func (e *Engine) Select(ctx context.Context, a Actor, appRef, db string, s Selector, limit int, after string) (appcode.Page, error) {
	app, v, err := e.readable(ctx, a, appRef, db, false)
	if err != nil {
		return appcode.Page{}, err
	}
	q, err := s.storeQuery()
	if err != nil {
		return appcode.Page{}, err
	}
	limit, err = pageLimit(limit)
	if err != nil {
		return appcode.Page{}, err
	}
	q.AppID, q.DB = app.ID, db
	start, err := decodePos(after, s.ranged())
	if err != nil {
		return appcode.Page{}, err
	}
	var keyOf func(store.Doc) json.RawMessage
	if s.ranged() {
		path := strings.Split(s.Field, ".")
		keyOf = func(d store.Doc) json.RawMessage { return fieldValue(d.Body, path) }
	}
	return e.fillPage(app, v, db, limit, start, keyOf, func(after pos, n int) ([]store.Doc, error) {
		q.After, q.AfterKey, q.Limit = after.id, after.key, n
		return e.st.Query(ctx, q)
	})
}

// storeQuery checks the selector and turns it into a store query (a
// prefix becomes the range of strings it starts).
func (s Selector) storeQuery() (store.Query, error) {
	if err := ValidField(s.Field); err != nil {
		return store.Query{}, err
	}
	hasRange := s.From != nil || s.To != nil
	switch {
	case s.Key != nil && (hasRange || s.Prefix != nil):
		return store.Query{}, errs.New(errs.Invalid, "a query takes key, or from and to, or prefix, not several; pass one of them")
	case s.Prefix != nil && hasRange:
		return store.Query{}, errs.New(errs.Invalid, "a query takes from and to, or prefix, not both; a prefix is already a range")
	case s.Key == nil && !hasRange && s.Prefix == nil:
		return store.Query{}, errs.New(errs.Invalid, "a query needs key, from and/or to, or prefix; pass e.g. key=\"running\" or from=10&to=20")
	case s.Key != nil:
		key, err := checkKey("query key", s.Key)
		return store.Query{Field: s.Field, Key: key}, err
	case s.Prefix != nil:
		if err := checkPrefix(*s.Prefix); err != nil {
			return store.Query{}, err
		}
		r := &store.Range{From: jsonString(*s.Prefix)}
		if end, ok := prefixEnd(*s.Prefix); ok {
			r.To = jsonString(end)
		}
		return store.Query{Field: s.Field, Range: r}, nil
	}
	r := &store.Range{}
	var err error
	if s.From != nil {
		if r.From, err = checkBound("from", s.From); err != nil {
			return store.Query{}, err
		}
	}
	if s.To != nil {
		if r.To, err = checkBound("to", s.To); err != nil {
			return store.Query{}, err
		}
	}
	return store.Query{Field: s.Field, Range: r}, nil
}

// checkKey checks a JSON value a query compares documents with: one that
// no document could hold is refused rather than matching nothing.
func checkKey(what string, key json.RawMessage) (json.RawMessage, error) {
	key = bytes.TrimSpace(key)
	if !json.Valid(key) {
		return nil, errs.New(errs.Invalid, "%s %q is not a JSON value; quote strings, e.g. \"running\"", what, key)
	}
	if d := jsonDepth(key); d > MaxDepth {
		return nil, errs.New(errs.Invalid, "%s nests %d levels deep; documents nest at most %d, so none would match", what, d, MaxDepth)
	}
	if ve := checkValues(key); ve != nil {
		at := ""
		if len(ve.path) > 0 {
			at = " at " + ve.where()
		}
		return nil, errs.New(errs.Invalid, "%s%s: %s; no document can hold such a value, so query with one that fits", what, at, ve.fault)
	}
	return key, nil
}

// checkBound checks a range bound: a JSON number or string.
func checkBound(name string, b json.RawMessage) (json.RawMessage, error) {
	b, err := checkKey("range bound "+name, b)
	if err != nil {
		return nil, err
	}
	if c := b[0]; c != '"' && c != '-' && (c < '0' || c > '9') {
		return nil, errs.New(errs.Invalid, "range bound %s=%s is not a number or a string; ranges hold numbers and strings only (quote strings, e.g. %s=\"2024-01\")", name, b, name)
	}
	return b, nil
}

func checkPrefix(p string) error {
	if !utf8.ValidString(p) || strings.ContainsRune(p, 0) {
		return errs.New(errs.Invalid, "prefix %q is not text a document can hold (invalid UTF-8 or NUL); pass plain text", p)
	}
	return nil
}

// prefixEnd is the least string above every string that starts with p:
// p with its last code point raised by one (past the surrogates, which
// no text holds), dropping code points already at the top. ok is false
// when there is none (p is empty or all top code points).
func prefixEnd(p string) (string, bool) {
	rs := []rune(p)
	for i := len(rs) - 1; i >= 0; i-- {
		r := rs[i] + 1
		if r == 0xD800 {
			r = 0xE000
		}
		if r <= utf8.MaxRune {
			rs[i] = r
			return string(rs[:i+1]), true
		}
	}
	return "", false
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

// fieldValue is the JSON value at path in a document body, nil where the
// path ends early.
func fieldValue(body []byte, path []string) json.RawMessage {
	v := json.RawMessage(body)
	for _, name := range path {
		var m map[string]json.RawMessage
		if json.Unmarshal(v, &m) != nil || m[name] == nil {
			return nil
		}
		v = m[name]
	}
	return v
}

// pos is where a page resumes: after document id, which had value key
// in the queried field (range queries only).
type pos struct {
	id  string
	key json.RawMessage
}

// A range query's cursor also holds the last value, since its pages are
// in (value, id) order: "r:" and the JSON array [value, id].
func encodeRangeCursor(key json.RawMessage, id string) string {
	b, _ := json.Marshal([]any{key, id})
	return base64.RawURLEncoding.EncodeToString(append([]byte("r:"), b...))
}

// decodePos reads a cursor of the query's kind.
func decodePos(c string, ranged bool) (pos, error) {
	if !ranged || c == "" {
		id, err := decodeCursor(c)
		return pos{id: id}, err
	}
	bad := errs.New(errs.Invalid, "cursor %q is not one this server returned for a range or prefix query; pass the next value of the previous page, or none to start over", c)
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || !bytes.HasPrefix(b, []byte("r:")) {
		return pos{}, bad
	}
	var v []json.RawMessage
	var id string
	if json.Unmarshal(b[2:], &v) != nil || len(v) != 2 || json.Unmarshal(v[1], &id) != nil ||
		!utf8.ValidString(id) || strings.ContainsRune(id, 0) {
		return pos{}, bad
	}
	if _, err := checkBound("after", v[0]); err != nil {
		return pos{}, bad
	}
	return pos{id: id, key: v[0]}, nil
}

// matcher is the selector as a test of a field's decoded value, for
// live queries; it agrees with the stores' answers.
func (s Selector) matcher() (func(v any) bool, error) {
	q, err := s.storeQuery()
	if err != nil {
		return nil, err
	}
	if q.Range == nil {
		var k any
		if err := decodeJSON(q.Key, &k); err != nil {
			return nil, errs.New(errs.Invalid, "query key %q is not a JSON value", q.Key)
		}
		return func(v any) bool { return reflect.DeepEqual(v, k) }, nil
	}
	var from, to any
	if q.Range.From != nil {
		decodeJSON(q.Range.From, &from)
	}
	if q.Range.To != nil {
		decodeJSON(q.Range.To, &to)
	}
	return func(v any) bool {
		switch v.(type) {
		case float64, string:
		default:
			return false
		}
		return (from == nil || compareScalars(v, from) >= 0) && (to == nil || compareScalars(v, to) < 0)
	}, nil
}

// compareScalars orders numbers (float64) before strings, numbers by
// value and strings by bytes, as ranges do.
func compareScalars(a, b any) int {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		if !ok {
			return -1
		}
		return cmp.Compare(x, y)
	case string:
		y, ok := b.(string)
		if !ok {
			return 1
		}
		return strings.Compare(x, y)
	}
	return 0
}
