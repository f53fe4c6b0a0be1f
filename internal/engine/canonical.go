package engine

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// Every write canonicalises its body, so this runs on the hot path of
// the job pattern three times per job. encoding/json's round trip through
// a map of RawMessage costs reflection and a re-validation of each value;
// canonicalObject cuts the same result out of valid JSON in one scan.

// member is one top-level field, as offsets into the document (no
// pointers, so sorting moves no write-barriered words): the key as written
// (quotes included), its value, and, for a key with escapes or non-ASCII,
// its unescaped form in the extra strings.
type member struct {
	rs, re, vs, ve int32
	ext            int32 // index+1 into the unescaped keys; 0 when plain
}

type members struct {
	doc  []byte
	ms   []member
	keys [][]byte
	dup  []byte // a key written more than once, if any
}

func (m *members) key(x member) []byte {
	if x.ext > 0 {
		return m.keys[x.ext-1]
	}
	return m.doc[x.rs+1 : x.re-1]
}

// canonicalObject returns the members of a valid JSON object, the last of
// each duplicated key, sorted by key as encoding/json sorts map keys.
// The input must have passed json.Valid and start with '{'.
func canonicalObject(b []byte) (*members, error) {
	m := &members{doc: b, ms: make([]member, 0, 16)}
	i := skipSpace(b, 1)
	if b[i] == '}' {
		return m, nil
	}
	for {
		end := stringEnd(b, i)
		x := member{rs: int32(i), re: int32(end)}
		if !plainKey(b[i:end]) {
			var k string
			if err := json.Unmarshal(b[i:end], &k); err != nil {
				return nil, err
			}
			m.keys = append(m.keys, []byte(k))
			x.ext = int32(len(m.keys))
		}
		i = skipSpace(b, end)
		i = skipSpace(b, i+1) // the colon
		vend := valueEnd(b, i)
		x.vs, x.ve = int32(i), int32(vend)
		m.ms = append(m.ms, x)
		i = skipSpace(b, vend)
		if b[i] == '}' {
			break
		}
		i = skipSpace(b, i+1) // the comma
	}
	// Stable, so that among duplicates the last one written sorts last.
	slices.SortStableFunc(m.ms, func(x, y member) int { return bytes.Compare(m.key(x), m.key(y)) })
	out := m.ms[:0]
	for j, x := range m.ms {
		if j+1 < len(m.ms) && bytes.Equal(m.key(m.ms[j+1]), m.key(x)) {
			m.dup = m.key(x)
			continue
		}
		out = append(out, x)
	}
	m.ms = out
	return m, nil
}

// appendCanonical writes members as one compact JSON object, byte for
// byte what encoding/json writes for the same map with SetEscapeHTML(false).
func appendCanonical(dst []byte, m *members) ([]byte, error) {
	dst = append(dst, '{')
	for j, x := range m.ms {
		if j > 0 {
			dst = append(dst, ',')
		}
		if x.ext == 0 {
			dst = append(dst, m.doc[x.rs:x.re]...)
		} else {
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(string(m.key(x))); err != nil {
				return nil, err
			}
			dst = append(dst, bytes.TrimSuffix(buf.Bytes(), []byte("\n"))...)
		}
		dst = append(dst, ':')
		if v := m.doc[x.vs:x.ve]; hasSpace(v) {
			var buf bytes.Buffer
			if err := json.Compact(&buf, v); err != nil {
				return nil, err
			}
			dst = append(dst, buf.Bytes()...)
		} else {
			dst = append(dst, v...)
		}
	}
	return append(dst, '}'), nil
}

// plainKey reports whether a quoted key is printable ASCII without
// escapes, which encoding/json writes back unchanged.
func plainKey(raw []byte) bool {
	for _, c := range raw[1 : len(raw)-1] {
		if c < 0x20 || c > 0x7e || c == '\\' || c == '"' {
			return false
		}
	}
	return true
}

func hasSpace(b []byte) bool {
	for _, c := range b {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			return true
		}
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string starting at b[i].
func stringEnd(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// valueEnd returns the index just past the value starting at b[i].
func valueEnd(b []byte, i int) int {
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = stringEnd(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[i])) {
		i++
	}
	return i
}
