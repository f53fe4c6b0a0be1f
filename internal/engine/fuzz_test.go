package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store/sqlite"
)

// fuzzMaxDoc keeps fuzz documents small, so the size check is exercised.
const fuzzMaxDoc = 8 << 10

// FuzzDocument puts arbitrary bytes as a document (with an arbitrary id)
// through the write path on a real SQLite store, which has a field index
// (so the store's JSON parser sees every document too). A put either
// fails cleanly with invalid or too_large, or stores exactly the object
// it was given, minus _rev.
func FuzzDocument(f *testing.F) {
	for _, s := range []struct{ body, id string }{
		{`{"status":"pending","attempts":0}`, "job-1"},
		{`{"_id":"from-body","_rev":"3-abc","n":1.5e10}`, ""},
		{`{"_id":"same","x":null}`, "same"},
		{`{"_id":"a"}`, "b"},
		{`{}`, ""},
		{`{"_x":1}`, "r"},
		{`{"a":{"_nested":true},"b":[1,"2",{"c":[]}]}`, "n"},
		{`{"a":1}}`, "t"},
		{`{"a":1} {"b":2}`, "t2"},
		{`[1,2,3]`, "arr"},
		{`"just a string"`, "s"},
		{`null`, "nul"},
		{"{\"k\":\"\xff\xfe\",\"\xc3\":1}", "utf8"},
		{`{"e":"\u0000\ud800\u2028<>&","big":123456789012345678901234567890,"neg":-0.0e-7}`, "esc"},
		{`{"dup":1,"dup":2,"_rev":1,"_rev":"x"}`, "dup"},
		{"{\"deep\":" + strings.Repeat("[", 200) + strings.Repeat("]", 200) + "}", "deep"},
		{`{"pad":"` + strings.Repeat("x", fuzzMaxDoc) + `"}`, "big"},
		{`{"a":1}`, "_reserved"},
		{`{"a":1}`, "ctl\x01"},
		{`{"a":1}`, strings.Repeat("i", 513)},
		{`{"n":1e999999,"m":-1e400,"t":1e-400,"z":0e-99999,"ok":5e-324}`, "nums"},
		{`{"n":` + strings.Repeat("7", 500) + `}`, "longnum"},
		{`{"a":{"b":["\ud83d\ude00","\\u0000","\udc00\ud800"]}}`, "pairs"},
		{`{"\ud800":1}`, "lonekey"},
	} {
		f.Add([]byte(s.body), s.id)
	}

	ctx := context.Background()
	st, err := sqlite.Open(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { st.Close() })
	e := New(st, Options{Clock: clock.NewVirtual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), MaxDocBytes: fuzzMaxDoc})
	admin := Actor{User: AdminUser, Admin: true}
	if _, err := e.Bootstrap(ctx, ""); err != nil {
		f.Fatal(err)
	}
	if _, err := e.CreateApp(ctx, admin, "admin/fuzz", false); err != nil {
		f.Fatal(err)
	}
	// Create a field index, so every commit also goes through SQLite's
	// JSON functions.
	if _, err := e.Query(ctx, admin, "admin/fuzz", "docs", "status", json.RawMessage(`"x"`), 0, ""); err != nil {
		f.Fatal(err)
	}
	app, err := st.App(ctx, AdminUser, "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	appID := app.ID

	f.Fuzz(func(t *testing.T, body []byte, id string) {
		res, err := e.Put(ctx, admin, "admin/fuzz", "docs", id, body, appcode.PutOptions{})
		if err != nil {
			var ee *errs.Error
			if !errors.As(err, &ee) || ee.Message == "" {
				t.Fatalf("Put(%q, %q): %v is not a clean error", id, body, err)
			}
			if strings.HasPrefix(ee.Message, "document value at") || strings.HasPrefix(ee.Message, "document key at") {
				if fault := fuzzValueFault(body); fault == "" {
					t.Fatalf("Put(%q) refused a document whose values are fine: %v", body, err)
				}
			}
			switch {
			case ee.Code == errs.TooLarge && len(body) <= fuzzMaxDoc:
				t.Fatalf("Put(%q) of %d bytes: too_large under the limit", body, len(body))
			case ee.Code != errs.Invalid && ee.Code != errs.TooLarge:
				t.Fatalf("Put(%q, %q): %v, want invalid or too_large", id, body, err)
			}
			return
		}
		if len(body) > fuzzMaxDoc {
			t.Fatalf("Put accepted %d bytes over the %d limit", len(body), fuzzMaxDoc)
		}
		if !json.Valid(body) {
			t.Fatalf("Put accepted invalid JSON %q", body)
		}
		if fault := fuzzValueFault(body); fault != "" {
			t.Fatalf("Put accepted %q, which %s", body, fault)
		}
		in, ok := decodeFuzz(body).(map[string]any)
		if !ok {
			t.Fatalf("Put accepted a non-object %q", body)
		}
		if err := ValidID(res.ID); err != nil {
			t.Fatalf("Put stored the bad id %q: %v", res.ID, err)
		}
		bodyID, hasBodyID := in["_id"].(string)
		switch {
		case id != "" && res.ID != id:
			t.Fatalf("Put(%q) stored id %q", id, res.ID)
		case id == "" && hasBodyID && res.ID != bodyID:
			t.Fatalf("Put with _id %q stored id %q", bodyID, res.ID)
		case hasBodyID && bodyID != res.ID:
			t.Fatalf("Put with id %q and _id %q succeeded", id, bodyID)
		}
		raw, err := e.Get(ctx, admin, "admin/fuzz", "docs", res.ID)
		if err != nil {
			t.Fatalf("Get(%q) after Put: %v", res.ID, err)
		}
		delete(in, "_rev")
		in["_id"], in["_rev"] = res.ID, res.Rev
		if out := decodeFuzz(raw); !reflect.DeepEqual(out, in) {
			t.Fatalf("Put(%q) then Get = %s\nwant %v", body, raw, in)
		}
		head, err := st.Get(ctx, appID, "docs", res.ID)
		if err != nil || head == nil || head.Rev != res.Rev || head.Deleted {
			t.Fatalf("stored head %+v, %v", head, err)
		}
		stored, ok := decodeFuzz(head.Body).(map[string]any)
		if !ok {
			t.Fatalf("stored body %q is not an object", head.Body)
		}
		for k := range stored {
			if strings.HasPrefix(k, "_") {
				t.Fatalf("stored body %s has the reserved field %q", head.Body, k)
			}
		}
	})
}

func decodeFuzz(b []byte) any {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return v
}

// fuzzValueFault says how a valid JSON text breaks the rules on values,
// or "" if it does not: a number past float64 or MaxNumberChars, an
// exponent past ±9999, an escaped NUL or a surrogate escape that is not
// half of a pair. It reads the text its own way, to check the engine's.
func fuzzValueFault(body []byte) string {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		s := string(n)
		f, err := strconv.ParseFloat(s, 64)
		mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
		exp = strings.TrimLeft(exp, "+-0")
		switch {
		case len(s) > MaxNumberChars:
			return "has a number too long"
		case err != nil:
			return "has a number out of range"
		case f == 0 && strings.Trim(mant, "-0.") != "":
			return "has a number that reads as 0"
		case len(exp) > 4:
			return "has an exponent too large"
		}
	}
	// Each string's escaped UTF-16 code units, in order; a raw character
	// between two escapes breaks a pair.
	var units []int
	inString := false
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case !inString:
			if c == '"' {
				inString, units = true, units[:0]
			}
			continue
		case c == '"':
			inString = false
			units = append(units, -1)
		case c == '\\' && body[i+1] == 'u':
			u, _ := strconv.ParseUint(string(body[i+2:i+6]), 16, 16)
			units = append(units, int(u))
			i += 5
			continue
		case c == '\\':
			i++
			units = append(units, -1)
		default:
			units = append(units, -1)
		}
		if inString {
			continue
		}
		for j := 0; j < len(units); j++ {
			u := units[j]
			switch {
			case u == 0:
				return "holds NUL"
			case u >= 0xdc00 && u < 0xe000:
				return "holds a lone low surrogate"
			case u >= 0xd800 && u < 0xdc00:
				if j+1 < len(units) && units[j+1] >= 0xdc00 && units[j+1] < 0xe000 {
					j++
					continue
				}
				return "holds a lone high surrogate"
			}
		}
	}
	return ""
}
