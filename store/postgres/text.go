package postgres

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// jsonbText is the JSON text given to jsonb for a body or a query key.
// jsonb refuses two things JSON allows, the escape \u0000 and a lone
// surrogate escape (\ud800 without its pair); both become \ufffd. Only
// field queries see the difference: reads return the text as given.
func jsonbText(js []byte) string {
	if !bytes.Contains(js, []byte(`\u`)) {
		return string(js)
	}
	var out strings.Builder
	out.Grow(len(js))
	for i := 0; i < len(js); i++ {
		c := js[i]
		if c != '\\' || i+1 >= len(js) {
			out.WriteByte(c)
			continue
		}
		if js[i+1] != 'u' || i+6 > len(js) {
			out.Write(js[i : i+2]) // any other escape, \\ included
			i++
			continue
		}
		u, ok := hex4(js[i+2 : i+6])
		switch {
		case !ok:
			out.Write(js[i : i+6])
		case u == 0:
			out.WriteString(`\ufffd`)
		case u >= 0xd800 && u < 0xdc00:
			// A high surrogate must be followed by a low one.
			if i+12 <= len(js) && js[i+6] == '\\' && js[i+7] == 'u' {
				if lo, ok := hex4(js[i+8 : i+12]); ok && lo >= 0xdc00 && lo < 0xe000 {
					out.Write(js[i : i+12])
					i += 6
					break
				}
			}
			out.WriteString(`\ufffd`)
		case u >= 0xdc00 && u < 0xe000:
			out.WriteString(`\ufffd`)
		default:
			out.Write(js[i : i+6])
		}
		i += 5
	}
	return out.String()
}

func hex4(b []byte) (rune, bool) {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c-'a') + 10
		case c >= 'A' && c <= 'F':
			r |= rune(c-'A') + 10
		default:
			return 0, false
		}
	}
	return r, true
}

// pgText makes free text (log lines, handler errors) storable in a text
// column, which holds neither NUL nor invalid UTF-8: both become U+FFFD.
func pgText(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

// Text is free text as this store keeps it: NUL and invalid UTF-8, which
// a text column cannot hold, become U+FFFD.
func Text(s string) string { return pgText(s) }
