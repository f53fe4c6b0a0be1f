package engine

import (
	"strings"
	"testing"
)

// TestDocumentErrorsSayWhatToFix: a refused body's message points at the
// problem and says what to send instead.
func TestDocumentErrorsSayWhatToFix(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"a":1`:           "ends before its last brace",
		`{"a":1,,"b":2}`:   "at byte 8",
		`{"a":"x"}}`:       "data after the JSON object",
		"{\"a\":\"\xff\"}": "not valid UTF-8 (first bad byte at offset 6)",
		`{"a":1,"a":2}`:    `the field "a" more than once`,
		`[1]`:              "must be a JSON object",
		"{}\v":             "data after the JSON object",
		`{} {}`:            "data after the JSON object",
		`{"a":tru}`:        "at byte 9",
		"\n {\"n\":1e999}": "document value at .n (byte 7): 1e999 is out of the range",
	} {
		_, err := parseDoc([]byte(body), 1<<20)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseDoc(%q) = %v; want a message with %q", body, err, want)
		}
	}
}
