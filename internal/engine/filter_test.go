package engine

import (
	"testing"

	"github.com/handoff-run/handoff/internal/appcode"
)

func TestChangeWanted(t *testing.T) {
	t.Parallel()
	when := []appcode.FieldMatch{
		{Field: "kind", Values: []any{"job"}},
		{Field: "status", Values: []any{"pending", "retry"}},
	}
	cases := []struct {
		body string
		want bool
	}{
		{`{"kind":"job","status":"pending"}`, true},
		{`{"attempts":0,"input":"a b","kind":"job","status":"retry"}`, true},
		{` { "kind" : "job" , "status" : "pending" } `[1:], true}, // spaces a store may keep
		{`{"kind":"job","meta":{"status":"done","kind":"x"},"status":"pending"}`, true},
		{`{"kind":"job","meta":{"status":"pending"},"status":"done"}`, false}, // only the top level counts
		{`{"kind":"job","st\u0061tus":"pending"}`, true},
		{`{"kind":"j\u006fb","status":"pending"}`, true},
		{`{"kind":"job"}`, false},
		{`{"kind":"job","status":"Pending"}`, false},
		{`{"kind":"job","status":null}`, false},
		{`{}`, false},
		{``, false},
		{`[]`, false},
	}
	for _, c := range cases {
		if got := changeWanted(nil, when, "jobs", []byte(c.body)); got != c.want {
			t.Errorf("%s: got %v, want %v", c.body, got, c.want)
		}
	}
	if !changeWanted(nil, nil, "any", nil) {
		t.Error("no filter: a delete without a body is delivered")
	}
	if changeWanted([]string{"jobs"}, nil, "other", []byte(`{}`)) || !changeWanted([]string{"a", "jobs"}, nil, "jobs", []byte(`{}`)) {
		t.Error("dbs decided wrong")
	}
}

// BenchmarkChangeWanted is the cost the filter adds to a commit of the
// job pattern.
//
//	go test -run '^$' -bench ChangeWanted -benchmem ./engine
func BenchmarkChangeWanted(b *testing.B) {
	when := []appcode.FieldMatch{
		{Field: "kind", Values: []any{"job"}},
		{Field: "status", Values: []any{"pending"}},
	}
	body := []byte(`{"attempts":1,"claimId":"m1x2-abcdefgh","input":"resize cat.png to 200 px","kind":"job","leaseUntil":1767600030000,"status":"running"}`)
	for b.Loop() {
		changeWanted([]string{"jobs"}, when, "jobs", body)
	}
}
