package engine_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store/sqlite"
)

// testMaxDoc is the size limit of the test engines.
const testMaxDoc = 4096

// fixture is an engine on a real SQLite store with:
// admin; alice, owner of alice/jobs (private) and alice/pub (public);
// bob, a viewer of alice/jobs; carol, an editor; dave, no role.
type fixture struct {
	t      *testing.T
	ctx    context.Context
	e      *engine.Engine
	st     *sqlite.Store
	tokens map[string]string
	actors map[string]engine.Actor
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	f := &fixture{t: t, ctx: context.Background(), st: st, tokens: map[string]string{}, actors: map[string]engine.Actor{}}
	f.e = engine.New(st, engine.Options{Clock: clock.NewVirtual(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)), MaxDocBytes: testMaxDoc})
	tok, err := f.e.Bootstrap(f.ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	f.tokens["admin"] = tok
	f.actors["admin"] = f.auth(tok)
	for _, u := range []string{"alice", "bob", "carol", "dave"} {
		tok, err := f.e.AddUser(f.ctx, f.actors["admin"], u)
		if err != nil {
			t.Fatal(err)
		}
		f.tokens[u] = tok
		f.actors[u] = f.auth(tok)
	}
	f.actors["anonymous"] = f.auth("")
	alice := f.actors["alice"]
	for ref, public := range map[string]bool{"alice/jobs": false, "alice/pub": true} {
		if _, err := f.e.CreateApp(f.ctx, alice, ref, public); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.e.AddMember(f.ctx, alice, "alice/jobs", "bob", "viewer"); err != nil {
		t.Fatal(err)
	}
	if err := f.e.AddMember(f.ctx, alice, "alice/jobs", "carol", engine.RoleEditor); err != nil {
		t.Fatal(err)
	}
	for _, app := range []string{"alice/jobs", "alice/pub"} {
		if _, err := f.e.Put(f.ctx, alice, app, "jobs", "j1", []byte(`{"status":"pending"}`), appcode.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f *fixture) auth(tok string) engine.Actor {
	f.t.Helper()
	a, err := f.e.Authenticate(f.ctx, tok)
	if err != nil {
		f.t.Fatal(err)
	}
	return a
}

// state is what a refused call must leave alone: each app's sequence and
// documents.
func (f *fixture) state() string {
	f.t.Helper()
	var b strings.Builder
	for _, ref := range []string{"alice/jobs", "alice/pub"} {
		owner, name, _ := strings.Cut(ref, "/")
		app, err := f.st.App(f.ctx, owner, name)
		if err != nil {
			f.t.Fatal(err)
		}
		seq, err := f.st.LastSeq(f.ctx, app.ID)
		if err != nil {
			f.t.Fatal(err)
		}
		dbs, _ := f.st.Databases(f.ctx, app.ID)
		fmt.Fprintf(&b, "%s seq=%d dbs=%v;", ref, seq, dbs)
		for _, db := range dbs {
			docs, _ := f.st.Scan(f.ctx, app.ID, db, "", 1000)
			for _, d := range docs {
				fmt.Fprintf(&b, " %s/%s@%s", db, d.ID, d.Rev)
			}
		}
	}
	return b.String()
}

func wantCode(t *testing.T, err error, code errs.Code, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want %s", what, code)
	}
	var ee *errs.Error
	if !errors.As(err, &ee) {
		t.Fatalf("%s: %v is not an *errs.Error", what, err)
	}
	if ee.Code != code {
		t.Fatalf("%s: %v (code %s), want code %s", what, err, ee.Code, code)
	}
	if len(ee.Message) < 10 {
		t.Fatalf("%s: message %q does not tell the user what to do", what, ee.Message)
	}
}

func TestPutRejectsBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := f.actors["alice"]
	big := `{"pad":"` + strings.Repeat("x", testMaxDoc) + `"}`
	cases := []struct {
		name, app, db, id, body string
		o                       appcode.PutOptions
		code                    errs.Code
	}{
		{"malformed JSON", "alice/jobs", "jobs", "x", `{"a":`, appcode.PutOptions{}, errs.Invalid},
		{"trailing comma", "alice/jobs", "jobs", "x", `{"a":1,}`, appcode.PutOptions{}, errs.Invalid},
		{"unquoted key", "alice/jobs", "jobs", "x", `{a:1}`, appcode.PutOptions{}, errs.Invalid},
		{"single quotes", "alice/jobs", "jobs", "x", `{'a':1}`, appcode.PutOptions{}, errs.Invalid},
		{"trailing brace", "alice/jobs", "jobs", "x", `{"a":1}}`, appcode.PutOptions{}, errs.Invalid},
		{"trailing bracket", "alice/jobs", "jobs", "x", `{"a":1}]`, appcode.PutOptions{}, errs.Invalid},
		{"two objects", "alice/jobs", "jobs", "x", `{"a":1} {"b":2}`, appcode.PutOptions{}, errs.Invalid},
		{"trailing garbage", "alice/jobs", "jobs", "x", `{"a":1} x`, appcode.PutOptions{}, errs.Invalid},
		{"raw control character in a string", "alice/jobs", "jobs", "x", "{\"a\":\"x\ny\"}", appcode.PutOptions{}, errs.Invalid},
		{"empty body", "alice/jobs", "jobs", "x", ``, appcode.PutOptions{}, errs.Invalid},
		{"blank body", "alice/jobs", "jobs", "x", " \n\t", appcode.PutOptions{}, errs.Invalid},
		{"array", "alice/jobs", "jobs", "x", `[{"a":1}]`, appcode.PutOptions{}, errs.Invalid},
		{"empty array", "alice/jobs", "jobs", "x", `[]`, appcode.PutOptions{}, errs.Invalid},
		{"string", "alice/jobs", "jobs", "x", `"doc"`, appcode.PutOptions{}, errs.Invalid},
		{"null", "alice/jobs", "jobs", "x", `null`, appcode.PutOptions{}, errs.Invalid},
		{"number", "alice/jobs", "jobs", "x", `42`, appcode.PutOptions{}, errs.Invalid},
		{"boolean", "alice/jobs", "jobs", "x", `true`, appcode.PutOptions{}, errs.Invalid},
		{"id from the body is empty", "alice/jobs", "jobs", "", `{"_id":""}`, appcode.PutOptions{}, errs.Invalid},
		{"id 513 bytes", "alice/jobs", "jobs", strings.Repeat("a", 513), `{}`, appcode.PutOptions{}, errs.Invalid},
		{"id 513 bytes in the body", "alice/jobs", "jobs", "", `{"_id":"` + strings.Repeat("a", 513) + `"}`, appcode.PutOptions{}, errs.Invalid},
		{"id with a leading _", "alice/jobs", "jobs", "_design", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"id with a leading _ in the body", "alice/jobs", "jobs", "", `{"_id":"_x"}`, appcode.PutOptions{}, errs.Invalid},
		{"id with a newline", "alice/jobs", "jobs", "a\nb", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"id with NUL", "alice/jobs", "jobs", "a\x00b", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"id with DEL", "alice/jobs", "jobs", "a\x7fb", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"id with a C1 control", "alice/jobs", "jobs", "a\u0085b", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"id with an escaped control in the body", "alice/jobs", "jobs", "", `{"_id":"a\u0007b"}`, appcode.PutOptions{}, errs.Invalid},
		{"id not UTF-8", "alice/jobs", "jobs", "a\xff\xfeb", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"_id not a string", "alice/jobs", "jobs", "", `{"_id":5}`, appcode.PutOptions{}, errs.Invalid},
		{"_id null", "alice/jobs", "jobs", "x", `{"_id":null}`, appcode.PutOptions{}, errs.Invalid},
		{"_id differs from the id", "alice/jobs", "jobs", "a", `{"_id":"b"}`, appcode.PutOptions{}, errs.Invalid},
		{"ifRev without an id", "alice/jobs", "jobs", "", `{}`, appcode.PutOptions{IfRev: "1-x"}, errs.Invalid},
		{"reserved _x", "alice/jobs", "jobs", "x", `{"_x":1}`, appcode.PutOptions{}, errs.Invalid},
		{"reserved _deleted", "alice/jobs", "jobs", "x", `{"_deleted":true}`, appcode.PutOptions{}, errs.Invalid},
		{"reserved _", "alice/jobs", "jobs", "x", `{"_":1}`, appcode.PutOptions{}, errs.Invalid},
		{"reserved escaped \\u005f", "alice/jobs", "jobs", "x", `{"\u005fx":1}`, appcode.PutOptions{}, errs.Invalid},
		{"over the size limit", "alice/jobs", "jobs", "x", big, appcode.PutOptions{}, errs.TooLarge},
		{"unknown app", "ghost/app", "jobs", "x", `{}`, appcode.PutOptions{}, errs.NotFound},
		{"unknown app name", "alice/nope", "jobs", "x", `{}`, appcode.PutOptions{}, errs.NotFound},
		{"app ref without /", "alicejobs", "jobs", "x", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"app ref upper case", "Alice/jobs", "jobs", "x", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"app ref empty name", "alice/", "jobs", "x", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"app ref three parts", "alice/jobs/x", "jobs", "x", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"app ref empty", "", "jobs", "x", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"db empty", "alice/jobs", "", "x", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"db with a space", "alice/jobs", "my db", "x", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"db with a slash", "alice/jobs", "a/b", "x", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"db 65 chars", "alice/jobs", strings.Repeat("d", 65), "x", `{}`, appcode.PutOptions{}, errs.Invalid},
		{"db not ASCII", "alice/jobs", "jöbs", "x", `{}`, appcode.PutOptions{}, errs.Invalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.state()
			_, err := f.e.Put(f.ctx, alice, c.app, c.db, c.id, []byte(c.body), c.o)
			wantCode(t, err, c.code, "Put")
			if after := f.state(); after != before {
				t.Fatalf("a refused put changed the store:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

func TestPutAcceptsEdgeInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := f.actors["alice"]
	exact := `{"pad":"` + strings.Repeat("x", testMaxDoc-10) + `"}`
	cases := []struct {
		name, id, body, wantID string
		want                   map[string]any
	}{
		{"_id and _rev accepted, _rev ignored", "", `{"_id":"k1","_rev":"7-abc","a":1}`, "k1", map[string]any{"a": json.Number("1")}},
		{"_id equal to the id", "k2", `{"_id":"k2","a":1}`, "k2", map[string]any{"a": json.Number("1")}},
		{"reserved names only at the top level", "k4", `{"a":{"_x":1},"b":[{"_deleted":true}]}`, "k4",
			map[string]any{"a": map[string]any{"_x": json.Number("1")}, "b": []any{map[string]any{"_deleted": true}}}},
		{"an id of 512 bytes", strings.Repeat("é", 256), `{}`, strings.Repeat("é", 256), map[string]any{}},
		{"an id with spaces, slashes and emoji", "a b/c?d#🙂", `{}`, "a b/c?d#🙂", map[string]any{}},
		{"a doc at the size limit", "k5", exact, "k5", map[string]any{"pad": strings.Repeat("x", testMaxDoc-10)}},
		{"spaces around the object", "k6", " \n{\"a\" : 1}\n ", "k6", map[string]any{"a": json.Number("1")}},
		{"empty object", "k7", `{}`, "k7", map[string]any{}},
	}
	if len(exact) != testMaxDoc {
		t.Fatalf("exact doc is %d bytes", len(exact))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, err := f.e.Put(f.ctx, alice, "alice/jobs", "jobs", c.id, []byte(c.body), appcode.PutOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if r.ID != c.wantID || strings.HasPrefix(r.Rev, "7-") {
				t.Fatalf("Put = %+v", r)
			}
			raw, err := f.e.Get(f.ctx, alice, "alice/jobs", "jobs", r.ID)
			if err != nil {
				t.Fatal(err)
			}
			got := decode(t, raw)
			c.want["_id"], c.want["_rev"] = r.ID, r.Rev
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Fatalf("Get = %v, want %v", got, c.want)
			}
		})
	}
}

func decode(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("%s: %v", raw, err)
	}
	return m
}

func TestReadsRejectBadInput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	alice := f.actors["alice"]
	e, ctx := f.e, f.ctx
	cursor := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	query := func(field, key string, limit int, after string) func() error {
		return func() error {
			_, err := e.Query(ctx, alice, "alice/jobs", "jobs", field, json.RawMessage(key), limit, after)
			return err
		}
	}
	scan := func(limit int, after string) func() error {
		return func() error { _, err := e.Scan(ctx, alice, "alice/jobs", "jobs", limit, after); return err }
	}
	changes := func(db string, since int64, limit int) func() error {
		return func() error { _, err := e.Changes(ctx, alice, "alice/jobs", db, since, limit); return err }
	}
	get := func(app, db, id string) func() error {
		return func() error { _, err := e.Get(ctx, alice, app, db, id); return err }
	}
	history := func(app, db, id string) func() error {
		return func() error { _, err := e.History(ctx, alice, app, db, id); return err }
	}
	del := func(app, db, id string) func() error {
		return func() error { _, err := e.Delete(ctx, alice, app, db, id, ""); return err }
	}
	cases := []struct {
		name string
		call func() error
		code errs.Code
	}{
		{"query: cursor not base64", query("status", `"pending"`, 0, "!!!"), errs.Invalid},
		{"query: cursor of another kind", query("status", `"pending"`, 0, cursor("x:j1")), errs.Invalid},
		{"query: cursor with padding", query("status", `"pending"`, 0, base64.URLEncoding.EncodeToString([]byte("i:jx"))), errs.Invalid},
		{"query: limit -1", query("status", `"pending"`, -1, ""), errs.Invalid},
		{"query: limit 1001", query("status", `"pending"`, 1001, ""), errs.Invalid},
		{"query: empty field", query("", `"pending"`, 0, ""), errs.Invalid},
		{"query: field with ..", query("a..b", `1`, 0, ""), errs.Invalid},
		{"query: field with a leading dot", query(".a", `1`, 0, ""), errs.Invalid},
		{"query: field with a trailing dot", query("a.", `1`, 0, ""), errs.Invalid},
		{"query: field with a space", query("a b", `1`, 0, ""), errs.Invalid},
		{"query: field as a JSON path", query("$.a", `1`, 0, ""), errs.Invalid},
		{"query: field with a quote", query(`a'b`, `1`, 0, ""), errs.Invalid},
		{"query: field with a double quote", query(`a"b`, `1`, 0, ""), errs.Invalid},
		{"query: field with brackets", query(`a[0]`, `1`, 0, ""), errs.Invalid},
		{"query: field part of 65 chars", query(strings.Repeat("f", 65), `1`, 0, ""), errs.Invalid},
		{"query: field path of 9 parts", query("a.b.c.d.e.f.g.h.i", `1`, 0, ""), errs.Invalid},
		{"query: key not JSON", query("status", `pending`, 0, ""), errs.Invalid},
		{"query: empty key", query("status", ``, 0, ""), errs.Invalid},
		{"query: two keys", query("status", `"a" "b"`, 0, ""), errs.Invalid},
		{"query: bad db", func() error {
			_, err := e.Query(ctx, alice, "alice/jobs", "my db", "status", json.RawMessage(`1`), 0, "")
			return err
		}, errs.Invalid},
		{"query: unknown app", func() error {
			_, err := e.Query(ctx, alice, "ghost/app", "jobs", "status", json.RawMessage(`1`), 0, "")
			return err
		}, errs.NotFound},
		{"scan: bad cursor", scan(0, "%%%"), errs.Invalid},
		{"scan: cursor of another kind", scan(0, cursor("j1")), errs.Invalid},
		{"scan: limit -5", scan(-5, ""), errs.Invalid},
		{"scan: limit 100000", scan(100000, ""), errs.Invalid},
		{"changes: since -1", changes("", -1, 0), errs.Invalid},
		{"changes: limit -1", changes("", 0, -1), errs.Invalid},
		{"changes: limit 1001", changes("jobs", 0, 1001), errs.Invalid},
		{"changes: bad db", changes("b@d", 0, 0), errs.Invalid},
		{"get: empty id", get("alice/jobs", "jobs", ""), errs.Invalid},
		{"get: id with a leading _", get("alice/jobs", "jobs", "_all_docs"), errs.Invalid},
		{"get: id 513 bytes", get("alice/jobs", "jobs", strings.Repeat("i", 513)), errs.Invalid},
		{"get: id not UTF-8", get("alice/jobs", "jobs", "\xff"), errs.Invalid},
		{"get: bad db", get("alice/jobs", "a b", "j1"), errs.Invalid},
		{"get: empty db", get("alice/jobs", "", "j1"), errs.Invalid},
		{"history: empty db", history("alice/jobs", "", "j1"), errs.Invalid},
		{"query: empty db", func() error {
			_, err := e.Query(ctx, alice, "alice/jobs", "", "status", json.RawMessage(`"pending"`), 0, "")
			return err
		}, errs.Invalid},
		{"scan: empty db", func() error { _, err := e.Scan(ctx, alice, "alice/jobs", "", 0, ""); return err }, errs.Invalid},
		{"get: unknown app", get("ghost/app", "jobs", "j1"), errs.NotFound},
		{"get: bad app ref", get("ghost", "jobs", "j1"), errs.Invalid},
		{"get: unknown db", get("alice/jobs", "nodb", "j1"), errs.NotFound},
		{"history: id with a control char", history("alice/jobs", "jobs", "a\tb"), errs.Invalid},
		{"history: bad app ref", history("a/b/c", "jobs", "j1"), errs.Invalid},
		{"delete: empty id", del("alice/jobs", "jobs", ""), errs.Invalid},
		{"delete: id with a leading _", del("alice/jobs", "jobs", "_x"), errs.Invalid},
		{"delete: bad db", del("alice/jobs", "x y", "j1"), errs.Invalid},
		{"delete: unknown app", del("ghost/app", "jobs", "j1"), errs.NotFound},
		{"databases: unknown app", func() error { _, err := e.Databases(ctx, alice, "ghost/app"); return err }, errs.NotFound},
		{"members: bad app ref", func() error { _, err := e.Members(ctx, alice, "BAD"); return err }, errs.Invalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := f.state()
			wantCode(t, c.call(), c.code, c.name)
			if after := f.state(); after != before {
				t.Fatalf("a refused call changed the store:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
	// The edges of the ranges are accepted.
	for _, call := range []func() error{
		query("status", `"pending"`, 1000, ""), query("status", `"pending"`, 1, ""),
		query("a.b.c.d.e.f.g.h", `1`, 0, ""), query(strings.Repeat("f", 64), `1`, 0, ""),
		query("my-field_2", ` 1 `, 0, ""), query("status", `"pending"`, 0, cursor("i:")),
		scan(1000, cursor("i:j0")), changes("", 0, 1000), changes("nodb", 99, 0),
	} {
		if err := call(); err != nil {
			t.Fatalf("valid call refused: %v", err)
		}
	}
}
