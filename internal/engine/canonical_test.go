package engine

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// canonicalByMap is the plain way to canonicalise: decode into a map and
// encode it again. canonicalObject must agree with it byte for byte, or
// documents stored before would get new revs for the same content.
func canonicalByMap(b []byte) ([]byte, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{
		`{}`, ` { } `, `{"b":1,"a":2}`, `{"status":"pending","attempts":0,"input":"a b c"}`,
		`{ "a" : [ 1 , 2 , { "z" : 1 , "y" : "two words" } ] , "b" : { } }`,
		`{"dup":1,"dup":2,"a":0,"dup":3}`,
		`{"e":"\u0000\ud800\u2028<>&","big":123456789012345678901234567890,"neg":-0.0e-7}`,
		"{\"k\":\"\xff\xfe\",\"\xc3\":1,\"\xc3\":2}",
		`{"\u00e9":1,"é":2,"e\u0301":3,"\"q\"":4,"a\\b":5,"\t":6}`,
		"{\"\u2028\":1,\"<&>\":2}",
		`{"s":"a \"quoted\" } ] string","n":null,"t":true,"f":false,"x":-1.5E+3}`,
		"{\"deep\":" + strings.Repeat("[", 50) + strings.Repeat("]", 50) + "}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		b = bytes.TrimSpace(b)
		if len(b) == 0 || b[0] != '{' || !json.Valid(b) {
			return
		}
		want, err := canonicalByMap(b)
		if err != nil {
			t.Skip() // not an object encoding/json can hold
		}
		ms, err := canonicalObject(b)
		if err != nil {
			t.Fatalf("canonicalObject(%q): %v", b, err)
		}
		got, err := appendCanonical(nil, ms)
		if err != nil {
			t.Fatalf("appendCanonical(%q): %v", b, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("canonical form of %q\n got %q\nwant %q", b, got, want)
		}
	})
}
