package appcode

import (
	"bytes"
	"encoding/json"
	"testing"
)

// TestDocJSONQuotesLikeMarshal: the quick quoting of ids and revs writes
// what json.Marshal writes, for plain and unusual strings alike.
func TestDocJSONQuotesLikeMarshal(t *testing.T) {
	for _, id := range []string{"job-1", "a b", `q"uote`, `back\slash`, "<tag>&", "tab\t", "é", "\u2028", ""} {
		var b bytes.Buffer
		writeJSONString(&b, id)
		want, _ := json.Marshal(id)
		if b.String() != string(want) {
			t.Errorf("writeJSONString(%q) = %s, want %s", id, b.String(), want)
		}
	}
}
