package engine

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/handoff-run/handoff/internal/appcode"
)

// A job pattern's onChange does nothing for most of the commits it sees
// (its own claims and finishes), yet each would cost an outbox row, a
// claim, a JavaScript call and an ack. config.onChange.when and dbs let
// the engine drop those commits before they reach the outbox.

// changeWanted reports whether a commit to db with body gets an onChange
// event under config.onChange's dbs and when. body is the committed
// document, or for a delete the document's last body. A field absent from
// body matches no value, not even null.
func changeWanted(dbs []string, when []appcode.FieldMatch, db string, body []byte) bool {
	if len(dbs) > 0 && !slices.Contains(dbs, db) {
		return false
	}
	if len(when) == 0 {
		return true
	}
	if len(body) == 0 || body[0] != '{' {
		return false
	}
	// Stored bodies are valid, compact JSON objects (parseDoc): one scan
	// of the top level finds every field, with nothing decoded that is
	// not compared.
	found := 0
	i := skipSpace(body, 1)
	for i < len(body) && body[i] == '"' {
		kend := stringEnd(body, i)
		key := body[i+1 : kend-1]
		i = skipSpace(body, kend)
		i = skipSpace(body, i+1) // the colon
		if i >= len(body) {
			return false
		}
		vend := valueEnd(body, i)
		if m := fieldOf(when, key); m != nil {
			if !scalarIn(body[i:vend], m.Values) {
				return false
			}
			found++
		}
		i = skipSpace(body, vend)
		if i < len(body) && body[i] == ',' {
			i = skipSpace(body, i+1)
		}
	}
	return found == len(when)
}

// fieldOf returns the entry of when for a key as written in JSON.
func fieldOf(when []appcode.FieldMatch, raw []byte) *appcode.FieldMatch {
	if slices.Contains(raw, '\\') {
		var key string
		if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &key) != nil {
			return nil
		}
		raw = []byte(key)
	}
	for j := range when {
		if string(raw) == when[j].Field {
			return &when[j]
		}
	}
	return nil
}

// scalarIn reports whether the JSON value raw equals one of values.
// Strings compare by their text, numbers by their value (1 and 1.0 are
// equal); objects and arrays equal nothing.
func scalarIn(raw []byte, values []any) bool {
	if len(raw) == 0 {
		return false
	}
	switch c := raw[0]; {
	case c == '"':
		s := raw[1 : len(raw)-1]
		if slices.Contains(raw, '\\') {
			var u string
			if json.Unmarshal(raw, &u) != nil {
				return false
			}
			s = []byte(u)
		}
		for _, v := range values {
			if x, ok := v.(string); ok && x == string(s) {
				return true
			}
		}
	case c == 't' || c == 'f':
		for _, v := range values {
			if x, ok := v.(bool); ok && x == (c == 't') {
				return true
			}
		}
	case c == 'n':
		return slices.Contains(values, nil)
	case c == '-' || c >= '0' && c <= '9':
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return false
		}
		for _, v := range values {
			if x, ok := v.(float64); ok && x == f {
				return true
			}
		}
	}
	return false
}
