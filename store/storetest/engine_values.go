package storetest

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/engine"
)

// testEngineDeepDocuments: a document the engine accepts must not break
// the store. Deeply nested JSON is either refused as invalid, or stored;
// and then every query, on a field indexed before or after, still works.
func testEngineDeepDocuments(t *testing.T, e *env) {
	e.fixture()
	e.put(alice, appJobs, "jobs", "plain", `{"status":"pending","kind":"a"}`, appcode.PutOptions{})
	putDeep := func(depth int) {
		t.Helper()
		id := fmt.Sprint("deep-", depth)
		body := `{"status":"pending","kind":"deep","nest":` + strings.Repeat(`[`, depth) + strings.Repeat(`]`, depth) + `}`
		_, err := e.eng.Put(e.ctx, alice, appJobs, "jobs", id, []byte(body), appcode.PutOptions{})
		if err != nil && errs.CodeOf(err) != errs.Invalid {
			t.Fatalf("Put of a doc nested %d deep: %v; want success or invalid", depth, err)
		}
		if err == nil {
			if d := e.doc(appJobs, "jobs", id); d["kind"] != "deep" {
				t.Fatalf("Get(%s) = %v", id, d)
			}
		}
	}
	// Before any field index exists.
	for _, depth := range []int{100, 1000, 5000} {
		putDeep(depth)
	}
	ids := e.queryIDs(appJobs, "jobs", "kind", `"a"`)
	wantIDs(t, ids, []string{"plain"}, "Query on a field first queried after deep docs")
	// Once a field index exists.
	for _, depth := range []int{999, 1001} {
		putDeep(depth)
	}
	e.put(alice, appJobs, "jobs", "after", `{"status":"pending","kind":"a"}`, appcode.PutOptions{})
	wantIDs(t, e.queryIDs(appJobs, "jobs", "kind", `"a"`), []string{"after", "plain"}, "Query after more writes")
}

// testEngineDocumentValues: numbers that do not fit a float64 and strings
// with NUL or half a surrogate pair are refused at the door, naming where,
// the same on every store; the values at the edge of the rules are kept
// exactly and found by queries.
func testEngineDocumentValues(t *testing.T, e *env) {
	e.fixture()
	for body, want := range map[string]string{
		`{"n":1e999999}`:   `document value at .n (byte 5): 1e999999 is out of the range of a 64-bit float`,
		`{"a":[1,-1e400]}`: `document value at .a[1] (byte 8): -1e400 is out of the range`,
		`{"n":` + strings.Repeat("9", 200000) + `}`: `is 200000 characters long; the limit is 400`,
		`{"n":1e-400}`:                 `1e-400 is too small for a 64-bit float`,
		`{"n":0e-99999}`:               `0e-99999 has an exponent beyond ±9999`,
		`{"a":{"b":["x","a\u0000b"]}}`: `document value at .a.b[1] (byte 15): it holds \u0000 (NUL)`,
		`{"s":"\ud800"}`:               `document value at .s (byte 5): it holds \ud800, half of a UTF-16 surrogate pair`,
		`{"s":"x\udc00"}`:              `it holds \udc00, half`,
		`{"s":"\ud800\u0041"}`:         `it holds \ud800, half`,
		`{"a\u0000":1}`:                `document key at ["a\u0000"] (byte 1): it holds \u0000`,
		`{"in":{"x y":{"\udfff":1}}}`:  `document key at .in["x y"]["\udfff"] (byte 14)`,
		` {"n":1e999}`:                 `(byte 6)`,
	} {
		_, err := e.eng.Put(e.ctx, alice, appJobs, "jobs", "bad", []byte(body), appcode.PutOptions{})
		wantCode(t, err, errs.Invalid, "Put of "+body[:min(len(body), 40)])
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Put(%.40s) = %v\nwant a message with %q", body, err, want)
		}
	}
	if _, err := e.eng.Get(e.ctx, alice, appJobs, "jobs", "bad"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("a refused document was stored: %v", err)
	}

	good := map[string]string{
		"tiny":  `{"n":5e-324}`,
		"huge":  `{"n":-1.7976931348623157e308}`,
		"zero":  `{"n":-0.0e-9999}`,
		"long":  `{"n":1.` + strings.Repeat("0", engine.MaxNumberChars-2) + `}`,
		"pair":  `{"s":"\ud83d\ude00","t":"\\u0000","u":"\uffff\ufffd"}`,
		"pkey":  `{"\ud83d\ude00":"smile"}`,
		"plain": `{"s":"NUL is \\u0000, written out"}`,
	}
	for id, body := range good {
		e.put(alice, appJobs, "jobs", id, body, appcode.PutOptions{})
		raw, err := e.eng.Get(e.ctx, alice, appJobs, "jobs", id)
		if err != nil {
			t.Fatal(err)
		}
		want := decodeObject(t, []byte(body))
		got := decodeObject(t, raw)
		delete(got, "_id")
		delete(got, "_rev")
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("Get(%s) = %s, want %s", id, raw, body)
		}
	}
	wantIDs(t, e.queryIDs(appJobs, "jobs", "n", `5e-324`), []string{"tiny"}, "Query(n = 5e-324)")
	wantIDs(t, e.queryIDs(appJobs, "jobs", "n", `-1.7976931348623157e308`), []string{"huge"}, "Query(n = -max)")
	wantIDs(t, e.queryIDs(appJobs, "jobs", "s", `"😀"`), []string{"pair"}, "Query(s = a surrogate pair)")

	for key, want := range map[string]string{
		`1e999`:            `query key: 1e999 is out of the range of a 64-bit float`,
		`"a\u0000"`:        `query key: it holds \u0000 (NUL)`,
		`{"a":["\ud800"]}`: `query key at .a[0]: it holds \ud800`,
		strings.Repeat("[", 200) + strings.Repeat("]", 200): `query key nests 200 levels deep`,
	} {
		_, err := e.eng.Query(e.ctx, alice, appJobs, "jobs", "n", json.RawMessage(key), 0, "")
		wantCode(t, err, errs.Invalid, "Query with key "+key)
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Query(%s) = %v\nwant a message with %q", key, err, want)
		}
	}
}

// testEngineNamesNoStoreHolds: names, numbers and cursors that no user,
// device, secret, version or document can have are answered as not
// found or invalid, never looked up: PostgreSQL refuses NUL in text and
// numbers past its column types, which made them internal errors.
func testEngineNamesNoStoreHolds(t *testing.T, e *env) {
	e.fixture()
	for _, v := range []int{0, -1, math.MaxInt32 + 1, math.MaxInt64} {
		wantCode(t, e.eng.Rollback(e.ctx, alice, appJobs, v), errs.NotFound, fmt.Sprint("Rollback to version ", v))
	}
	_, err := e.eng.RotateToken(e.ctx, admin, "bob\x00")
	wantCode(t, err, errs.NotFound, "RotateToken of a name with NUL")
	wantCode(t, e.eng.AddMember(e.ctx, alice, appJobs, "bob\x00", "editor"), errs.Invalid, "AddMember of a name with NUL")
	wantCode(t, e.eng.RemoveMember(e.ctx, alice, appJobs, "bob\x00", ""), errs.NotFound, "RemoveMember of a name with NUL")
	wantCode(t, e.eng.RemoveMember(e.ctx, alice, appJobs, "bob", "\xff"), errs.NotFound, "RemoveMember of a role of invalid UTF-8")
	wantCode(t, e.eng.RevokeDevice(e.ctx, alice, "d\x00"), errs.NotFound, "RevokeDevice of a name with NUL")
	wantCode(t, e.eng.RemoveSecret(e.ctx, alice, appJobs, "s\x00"), errs.NotFound, "RemoveSecret of a name with NUL")
	for _, id := range []string{"a\x00", "\xff"} {
		cursor := base64.RawURLEncoding.EncodeToString([]byte("i:" + id))
		_, err := e.eng.Scan(e.ctx, alice, appJobs, "jobs", 0, cursor)
		wantCode(t, err, errs.Invalid, fmt.Sprintf("Scan after %q", id))
		_, err = e.eng.Query(e.ctx, alice, appJobs, "jobs", "status", json.RawMessage(`"x"`), 0, cursor)
		wantCode(t, err, errs.Invalid, fmt.Sprintf("Query after %q", id))
	}

	// Device tokens: a name no device has, and a nonce that the replay
	// check would store, from a device whose key really signed it.
	key, err := auth.NewDeviceKey("alice", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.eng.AddDevice(e.ctx, alice, "laptop", key.Public(), ""); err != nil {
		t.Fatal(err)
	}
	sign := func(user, device, nonce string) string {
		sum := sha256.Sum256(nil)
		payload, _ := json.Marshal(map[string]any{"u": user, "d": device, "t": e.clk.Now().Unix(), "n": nonce,
			"m": "GET", "p": "/v1/whoami", "b": hex.EncodeToString(sum[:])})
		return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(ed25519.Sign(key.Private, payload))
	}
	if a, err := e.eng.AuthenticateDevice(e.ctx, sign("alice", "laptop", "n1"), "GET", "/v1/whoami", nil); err != nil || a.User != "alice" {
		t.Fatalf("AuthenticateDevice of a good token = %+v, %v", a, err)
	}
	for _, c := range [][3]string{{"alice\x00", "laptop", "n2"}, {"alice", "lap\x00", "n3"}, {"alice", "laptop", "n\x00"}, {"alice", "laptop", "\xff"}} {
		_, err := e.eng.AuthenticateDevice(e.ctx, sign(c[0], c[1], c[2]), "GET", "/v1/whoami", nil)
		wantCode(t, err, errs.Unauthorized, fmt.Sprintf("AuthenticateDevice as %q", c))
	}
}
