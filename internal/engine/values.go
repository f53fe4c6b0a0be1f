package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/handoff-run/handoff/errs"
)

// Every number and string of a document must mean the same on every
// store and to every reader: SQLite's JSON functions and JavaScript read
// numbers as 64-bit floats, PostgreSQL's jsonb keeps them as numeric, and
// jsonb and text columns refuse NUL and half surrogate pairs. A value
// that one of them would refuse, or read differently, is refused at the
// door instead.

// MaxNumberChars bounds how long a number may be written: far more than
// the 17 significant digits a float64 holds, far less than PostgreSQL's
// numeric limits.
const MaxNumberChars = 400

// maxExponentDigits bounds a number's exponent to ±9999, which the
// stores hold even for a zero such as 0e-9999.
const maxExponentDigits = 4

// valueError is a number or string that breaks the rules above.
type valueError struct {
	at    int      // byte offset of the value (or key) in the JSON text
	path  []string // path segments, innermost first
	key   bool     // the fault is in an object key
	fault string   // what is wrong
	fix   string   // what to do about it in a document
}

// where is the value's JSON path, like .input.items[2].
func (v *valueError) where() string {
	if len(v.path) == 0 {
		return "."
	}
	p := slices.Clone(v.path)
	slices.Reverse(p)
	return strings.Join(p, "")
}

// docError is the error of a document whose JSON text starts at byte
// lead of the body as sent.
func (v *valueError) docError(lead int) error {
	what := "value"
	if v.key {
		what = "key"
	}
	return errs.New(errs.Invalid, "document %s at %s (byte %d): %s; %s", what, v.where(), lead+v.at, v.fault, v.fix)
}

// ValidValues checks a stored document's JSON text against the rules on
// numbers and strings that every write now meets; bodies stored before
// those rules may break them.
func ValidValues(doc []byte) error {
	if !json.Valid(doc) {
		return errs.New(errs.Invalid, "document is not valid JSON")
	}
	if d := jsonDepth(doc); d > MaxDepth {
		return errs.New(errs.Invalid, "document nests %d levels deep; the limit is %d", d, MaxDepth)
	}
	if ve := checkValues(doc); ve != nil {
		return ve.docError(0)
	}
	return nil
}

// checkValues checks every number and string (keys included) of valid
// JSON. Nesting is bounded by MaxDepth before this runs.
func checkValues(b []byte) *valueError {
	_, err := checkValue(b, skipSpace(b, 0))
	return err
}

// checkValue checks the value at b[i] and returns the index just past it.
func checkValue(b []byte, i int) (int, *valueError) {
	switch b[i] {
	case '{':
		i = skipSpace(b, i+1)
		if b[i] == '}' {
			return i + 1, nil
		}
		for {
			kend := stringEnd(b, i)
			key := b[i:kend]
			if fault, fix := stringFault(key); fault != "" {
				return 0, &valueError{at: i, path: []string{pathKey(key)}, key: true, fault: fault, fix: fix}
			}
			i = skipSpace(b, kend)
			end, err := checkValue(b, skipSpace(b, i+1))
			if err != nil {
				err.path = append(err.path, pathKey(key))
				return 0, err
			}
			i = skipSpace(b, end)
			if b[i] == '}' {
				return i + 1, nil
			}
			i = skipSpace(b, i+1)
		}
	case '[':
		i = skipSpace(b, i+1)
		if b[i] == ']' {
			return i + 1, nil
		}
		for n := 0; ; n++ {
			end, err := checkValue(b, i)
			if err != nil {
				err.path = append(err.path, "["+strconv.Itoa(n)+"]")
				return 0, err
			}
			i = skipSpace(b, end)
			if b[i] == ']' {
				return i + 1, nil
			}
			i = skipSpace(b, i+1)
		}
	case '"':
		end := stringEnd(b, i)
		if fault, fix := stringFault(b[i:end]); fault != "" {
			return 0, &valueError{at: i, fault: fault, fix: fix}
		}
		return end, nil
	case 't', 'f', 'n':
		return valueEnd(b, i), nil
	}
	end := valueEnd(b, i)
	if fault, fix := numberFault(b[i:end]); fault != "" {
		return 0, &valueError{at: i, fault: fault, fix: fix}
	}
	return end, nil
}

// pathKey is a key as a path segment: .name, or ["the key"] as written
// when it is not a plain name.
func pathKey(raw []byte) string {
	name := raw[1 : len(raw)-1]
	plain := len(name) > 0
	for _, c := range name {
		if !(c == '_' || c == '-' || c == '$' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			plain = false
			break
		}
	}
	if plain {
		return "." + string(name)
	}
	return "[" + string(raw) + "]"
}

// stringFault says what is wrong with a JSON string literal (quotes
// included), and what to do: an escaped NUL or an escaped surrogate
// without its other half. Raw bytes need no check: the text is valid
// UTF-8, which has no surrogates, and valid JSON, which has no raw
// control characters.
func stringFault(s []byte) (fault, fix string) {
	for i := 1; i < len(s)-1; i++ {
		if s[i] != '\\' {
			continue
		}
		if s[i+1] != 'u' {
			i++
			continue
		}
		u := hex4(s[i+2 : i+6])
		switch {
		case u == 0:
			return `it holds \u0000 (NUL), which documents may not hold`, "remove it, or send binary data as base64"
		case u >= 0xd800 && u < 0xdc00:
			if i+12 <= len(s) && s[i+6] == '\\' && s[i+7] == 'u' {
				if lo := hex4(s[i+8 : i+12]); lo >= 0xdc00 && lo < 0xe000 {
					i += 11
					continue
				}
			}
			return lonelySurrogate(s[i : i+6])
		case u >= 0xdc00 && u < 0xe000:
			return lonelySurrogate(s[i : i+6])
		}
		i += 5
	}
	return "", ""
}

func lonelySurrogate(esc []byte) (fault, fix string) {
	return "it holds " + string(esc) + ", half of a UTF-16 surrogate pair without its other half",
		`send the whole pair (such as \ud83d\ude00) or the character itself as UTF-8`
}

// hex4 reads the four hex digits of a \u escape in valid JSON.
func hex4(b []byte) int {
	u, _ := strconv.ParseUint(string(b), 16, 16)
	return int(u)
}

// numberFault says what is wrong with a JSON number literal, and what to
// do: one that does not fit a float64 (too large, or so small that it
// reads as 0), is written too long, or has an exponent past ±9999.
func numberFault(s []byte) (fault, fix string) {
	const asString = "store it as a string"
	if len(s) <= 15 && plainInt(s) {
		return "", "" // the common case: a small integer
	}
	if len(s) > MaxNumberChars {
		return fmt.Sprintf("%s is %d characters long; the limit is %d", shortNumber(s), len(s), MaxNumberChars), asString
	}
	f, err := strconv.ParseFloat(string(s), 64)
	if err != nil {
		return fmt.Sprintf("%s is out of the range of a 64-bit float (about ±1.8e308)", shortNumber(s)), asString
	}
	mant, exp := s, []byte(nil)
	if k := bytes.IndexAny(s, "eE"); k >= 0 {
		mant, exp = s[:k], bytes.TrimLeft(bytes.TrimLeft(s[k+1:], "+-"), "0")
	}
	if f == 0 && bytes.ContainsAny(mant, "123456789") {
		return fmt.Sprintf("%s is too small for a 64-bit float (under about 5e-324) and would read back as 0", shortNumber(s)), "store 0, or " + asString
	}
	if len(exp) > maxExponentDigits {
		return fmt.Sprintf("%s has an exponent beyond ±9999", shortNumber(s)), "write it with a smaller exponent, or " + asString
	}
	return "", ""
}

func plainInt(s []byte) bool {
	for j, c := range s {
		if !(c >= '0' && c <= '9' || c == '-' && j == 0) {
			return false
		}
	}
	return true
}

// shortNumber is a number for a message, cut short if long.
func shortNumber(s []byte) string {
	if len(s) > 40 {
		return string(s[:40]) + "…"
	}
	return string(s)
}
