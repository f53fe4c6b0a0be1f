package access_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

// docs/architecture.md, "access.js": a named export gates its database, `export default` gates
// every other one, and without either the default rule applies.
func TestExportsChooseTheGate(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/gates"
	en.app(app, false)
	en.member(app, "bob", "viewer")
	en.member(app, "carol", "editor")

	en.deploy(app, `
export function named(doc) {
  if (doc.ok !== true) throw { forbidden: "named says no" };
  return { channels: ["n"] };
}
export default function (doc) {
  if (doc.ok !== true) throw { forbidden: "default says no" };
  return { channels: ["d"] };
}
`)
	_, err := en.try(alice, app, "named", "a", `{"ok":false}`)
	wantForbidden(t, err, "named says no", "named export, refused")
	_, err = en.try(alice, app, "other", "a", `{"ok":false}`)
	wantForbidden(t, err, "default says no", "default export, refused")
	// The function, not the membership, decides: erin is no member.
	en.put(erin, app, "named", "a", `{"ok":true}`)
	en.put(erin, app, "other", "a", `{"ok":true}`)

	// Without a default export, the other databases follow the default
	// rule: the owner and editors write, members read.
	en.deploy(app, `
export function named(doc) {
  if (doc.ok !== true) throw { forbidden: "named says no" };
  return { channels: ["n"] };
}
`)
	_, err = en.try(erin, app, "named", "b", `{"ok":false}`)
	wantForbidden(t, err, "named says no", "named export after redeploy")
	en.put(erin, app, "named", "b", `{"ok":true}`)

	en.put(alice, app, "plain", "p1", `{"ok":false}`)
	en.put(carol, app, "plain", "p2", `{"ok":false}`)
	_, err = en.try(bob, app, "plain", "p3", `{}`)
	wantForbidden(t, err, "not an editor", "viewer writes an ungated db")
	_, err = en.try(erin, app, "plain", "p3", `{}`)
	wantForbidden(t, err, "not an editor", "non-member writes an ungated db")
	_, err = en.try(anon, app, "plain", "p3", `{}`)
	wantCode(t, err, errs.Unauthorized, "anonymous writes an ungated db")
	for _, a := range []engine.Actor{alice, bob, carol} {
		if d := en.get(a, app, "plain", "p1"); d["ok"] != false {
			t.Fatalf("%s reads p1 = %v", a.User, d)
		}
	}
	_, err = en.e.Get(en.ctx, erin, app, "plain", "p1")
	wantForbidden(t, err, "not a member", "non-member reads an ungated db")
}

// probeJS shows the test what the function was given: a write with
// probe:true (or a delete of an id starting with "show-") is refused with
// the function's arguments as the reason.
const probeJS = `
export function probe(doc, oldDoc, user, ctx) {
  if (doc.probe || (doc._deleted && doc._id.startsWith("show-")))
    throw { forbidden: JSON.stringify({ doc, oldDoc, user }) };
  return { channels: ["p"] };
}
export function teams(doc, oldDoc, user, ctx) {
  ctx.requireOwner();
  return { members: doc.members };
}
`

type probed struct {
	Doc    map[string]any `json:"doc"`
	OldDoc map[string]any `json:"oldDoc"` // nil for null
	User   map[string]any `json:"user"`   // nil for null
	raw    map[string]json.RawMessage
}

func probe(t *testing.T, err error, what string) probed {
	t.Helper()
	ee := refusal(t, err, what)
	if ee.Code != errs.Forbidden {
		t.Fatalf("%s: %v, want the probe's refusal", what, err)
	}
	var p probed
	if err := json.Unmarshal([]byte(ee.Reason), &p); err != nil {
		t.Fatalf("%s: reason %q: %v", what, ee.Reason, err)
	}
	if err := json.Unmarshal([]byte(ee.Reason), &p.raw); err != nil {
		t.Fatal(err)
	}
	return p
}

func wantObject(t *testing.T, got map[string]any, want string, what string) {
	t.Helper()
	var w map[string]any
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, w) {
		t.Fatalf("%s = %v, want %v", what, got, w)
	}
}

func TestDocAndOldDoc(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/probe"
	en.app(app, false)
	en.deploy(app, probeJS)

	// A new document: doc has _id and no _rev, even when the body sends
	// one; oldDoc is null, not {}.
	p := probe(t, must(en.try(alice, app, "probe", "new", `{"_rev":"3-abc","probe":true,"n":1}`)), "create")
	wantObject(t, p.Doc, `{"_id":"new","probe":true,"n":1}`, "doc of a create")
	if string(p.raw["oldDoc"]) != "null" {
		t.Fatalf("oldDoc of a create = %s, want null", p.raw["oldDoc"])
	}
	// The id from the body counts too.
	p = probe(t, must(en.try(alice, app, "probe", "", `{"_id":"from-body","probe":true}`)), "create by body id")
	wantObject(t, p.Doc, `{"_id":"from-body","probe":true}`, "doc with the body's _id")

	// An update: oldDoc is the real head, with its _rev.
	r1 := en.put(alice, app, "probe", "d1", `{"status":"pending","n":1}`)
	p = probe(t, must(en.try(alice, app, "probe", "d1", `{"status":"running","probe":true}`)), "update")
	wantObject(t, p.Doc, `{"_id":"d1","status":"running","probe":true}`, "doc of an update")
	wantObject(t, p.OldDoc, fmt.Sprintf(`{"_id":"d1","_rev":%q,"status":"pending","n":1}`, r1.Rev), "oldDoc of an update")
	r2 := en.put(alice, app, "probe", "d1", `{"status":"running","n":2}`)
	p = probe(t, must(en.try(alice, app, "probe", "d1", `{"probe":true}`)), "second update")
	wantObject(t, p.OldDoc, fmt.Sprintf(`{"_id":"d1","_rev":%q,"status":"running","n":2}`, r2.Rev), "oldDoc after two writes")

	// Deletes run the function: doc is {_id, _deleted: true}, oldDoc the head.
	en.put(alice, app, "probe", "show-1", `{"v":1}`)
	head := en.get(alice, app, "probe", "show-1")
	_, err := en.e.Delete(en.ctx, alice, app, "probe", "show-1", "")
	p = probe(t, err, "delete")
	if string(p.raw["doc"]) != `{"_id":"show-1","_deleted":true}` {
		t.Fatalf("doc of a delete = %s", p.raw["doc"])
	}
	wantObject(t, p.OldDoc, fmt.Sprintf(`{"_id":"show-1","_rev":%q,"v":1}`, head["_rev"]), "oldDoc of a delete")
	if d := en.get(alice, app, "probe", "show-1"); d["_rev"] != head["_rev"] {
		t.Fatalf("a refused delete changed the document: %v", d)
	}

	// After a delete the head is a tombstone: oldDoc is null again.
	en.del(alice, app, "probe", "d1")
	p = probe(t, must(en.try(alice, app, "probe", "d1", `{"probe":true}`)), "write over a tombstone")
	if string(p.raw["oldDoc"]) != "null" {
		t.Fatalf("oldDoc over a tombstone = %s, want null", p.raw["oldDoc"])
	}
	wantObject(t, p.Doc, `{"_id":"d1","probe":true}`, "doc over a tombstone")
	en.put(alice, app, "probe", "d1", `{"back":true}`)
}

// must turns a (result, error) pair into the error, for probes that must
// be refused.
func must(_ appcode.WriteResult, err error) error { return err }

func TestUserObject(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/users"
	en.app(app, false)
	en.member(app, "bob", "viewer")
	en.member(app, "bob", "staff")
	en.deploy(app, probeJS)

	user := func(a engine.Actor) probed {
		t.Helper()
		return probe(t, must(en.try(a, app, "probe", "", `{"probe":true}`)), "probe as "+a.User)
	}
	if p := user(anon); string(p.raw["user"]) != "null" {
		t.Fatalf("anonymous user = %s, want null", p.raw["user"])
	}
	wantObject(t, user(alice).User, `{"id":"alice","userHandle":"alice","roles":[],"isOwner":true}`, "owner")
	wantObject(t, user(erin).User, `{"id":"erin","userHandle":"erin","roles":[],"isOwner":false}`, "non-member")
	wantObject(t, sortRoles(user(bob).User), `{"id":"bob","userHandle":"bob","roles":["staff","viewer"],"isOwner":false}`, "member")
	wantObject(t, sortRoles(user(engine.Actor{User: "bob", Device: "phone-1"}).User),
		`{"id":"bob","userHandle":"bob","roles":["staff","viewer"],"isOwner":false,"device":"phone-1"}`, "member on a device")

	// Documents give roles with members: {role: [ids]}, on top of the
	// member roles, as long as the document lives.
	en.put(alice, app, "teams", "t1", `{"members":{"reviewer":["bob","erin"],"staff":["bob"]}}`)
	en.put(alice, app, "teams", "t2", `{"members":{"night":["erin"]}}`)
	got := user(bob).User
	if r := rolesOf(got); !reflect.DeepEqual(sorted(r), []string{"reviewer", "staff", "viewer"}) {
		t.Fatalf("bob's roles with a team doc = %v", got)
	}
	if r := rolesOf(user(erin).User); !reflect.DeepEqual(sorted(r), []string{"night", "reviewer"}) {
		t.Fatalf("erin's roles from documents = %v", r)
	}
	en.del(alice, app, "teams", "t1")
	if r := rolesOf(user(erin).User); !reflect.DeepEqual(r, []string{"night"}) {
		t.Fatalf("erin's roles after the team doc was deleted = %v", r)
	}
	en.put(alice, app, "teams", "t2", `{"members":{}}`)
	if r := rolesOf(user(erin).User); len(r) != 0 {
		t.Fatalf("erin's roles after the team doc dropped her = %v", r)
	}
	if r := rolesOf(user(bob).User); !reflect.DeepEqual(sorted(r), []string{"staff", "viewer"}) {
		t.Fatalf("bob's roles after = %v", r)
	}
}

// sortRoles sorts user.roles: their order carries no meaning.
func sortRoles(u map[string]any) map[string]any {
	r := sorted(rolesOf(u))
	roles := make([]any, len(r))
	for i, x := range r {
		roles[i] = x
	}
	u["roles"] = roles
	return u
}

func rolesOf(u map[string]any) []string {
	var out []string
	for _, r := range u["roles"].([]any) {
		out = append(out, r.(string))
	}
	return out
}

// ctxJS calls the ctx check that the document names, with doc.arg.
const ctxJS = `
export function checks(doc, oldDoc, user, ctx) {
  if (doc.check === "requireOwner") ctx.requireOwner();
  else ctx[doc.check](doc.arg);
  return { channels: ["checks"] };
}
export function grants(doc, oldDoc, user, ctx) {
  ctx.requireOwner();
  return { grant: doc.grant, members: doc.members };
}
`

func TestCtxChecks(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/ctx"
	en.app(app, false)
	en.member(app, "bob", "viewer")
	en.member(app, "carol", "staff")
	en.member(app, "dave", "viewer")
	en.deploy(app, ctxJS)
	en.put(alice, app, "grants", "g", `{
		"grant": {"users": {"bob": ["cb"]}, "roles": {"staff": ["cs"], "reviewer": ["cr"]}, "public": ["cp"]},
		"members": {"reviewer": ["dave"]}}`)

	const (
		onlyOnChange = "only the backend's onChange handler may make this change"
		needStaff    = "this change needs the role staff"
		ownerOnly    = "only the app's owner may make this change"
	)
	cases := []struct {
		who    engine.Actor
		check  string
		arg    any
		reason string // "" passes
	}{
		// requireBackend: only a handler the server set passes.
		{alice, "requireBackend", "onChange", onlyOnChange},
		{engine.Actor{User: "alice", Path: "onChange"}, "requireBackend", "onChange", onlyOnChange},
		{engine.Actor{User: "alice", Path: "cli"}, "requireBackend", "onChange", onlyOnChange},
		{anon, "requireBackend", "onChange", onlyOnChange},
		{onChange(alice), "requireBackend", "onChange", ""},
		{onChange(bob), "requireBackend", "onChange", ""},
		{scheduled(alice), "requireBackend", "onChange", onlyOnChange},
		{scheduled(alice), "requireBackend", "scheduled", ""},
		{engine.Actor{User: "alice", Handler: "fetch"}, "requireBackend", "fetch", ""},
		{scheduled(alice), "requireBackend", []string{"onChange", "scheduled"}, ""},
		{onChange(alice), "requireBackend", []string{"onChange", "scheduled"}, ""},
		{engine.Actor{User: "alice", Handler: "fetch"}, "requireBackend", []string{"onChange", "scheduled"},
			"only the backend's onChange or scheduled handler may make this change"},
		{alice, "requireBackend", []string{"onChange", "scheduled"}, "only the backend's onChange or scheduled handler may make this change"},

		// requireUser
		{bob, "requireUser", "bob", ""},
		{carol, "requireUser", "bob", "only user bob may make this change"},
		{alice, "requireUser", "bob", "only user bob may make this change"},
		{anon, "requireUser", "bob", "only user bob may make this change"},
		{carol, "requireUser", []string{"bob", "carol"}, ""},
		{dave, "requireUser", []string{"bob", "carol"}, "only user bob or carol may make this change"},

		// requireRole: member roles and roles given by documents.
		{carol, "requireRole", "staff", ""},
		{bob, "requireRole", "staff", needStaff},
		{alice, "requireRole", "staff", needStaff},
		{anon, "requireRole", "staff", needStaff},
		{bob, "requireRole", []string{"staff", "viewer"}, ""},
		{erin, "requireRole", []string{"staff", "viewer"}, "this change needs the role staff or viewer"},
		{dave, "requireRole", "reviewer", ""},
		{bob, "requireRole", "reviewer", "this change needs the role reviewer"},

		// requireAccess: channels granted directly, by role, by a
		// document-given role, public to members; the owner has them all.
		{bob, "requireAccess", "cb", ""},
		{carol, "requireAccess", "cb", "this change needs access to channel cb"},
		{carol, "requireAccess", "cs", ""},
		{carol, "requireAccess", []string{"cb", "cs"}, ""},
		{bob, "requireAccess", []string{"cs", "cr"}, "this change needs access to channel cs or cr"},
		{dave, "requireAccess", "cr", ""},
		{dave, "requireAccess", "cp", ""},
		{bob, "requireAccess", "cp", ""},
		{erin, "requireAccess", "cp", "this change needs access to channel cp"},
		{alice, "requireAccess", "nowhere", ""},
		{anon, "requireAccess", "cp", "this change needs access to channel cp; sign in"},

		// requireOwner
		{alice, "requireOwner", nil, ""},
		{onChange(alice), "requireOwner", nil, ""},
		{bob, "requireOwner", nil, ownerOnly},
		{admin, "requireOwner", nil, ownerOnly},
		{anon, "requireOwner", nil, ownerOnly},
	}
	for i, c := range cases {
		name := fmt.Sprintf("%s(%v) as %+v", c.check, c.arg, c.who)
		body, _ := json.Marshal(map[string]any{"check": c.check, "arg": c.arg})
		_, err := en.try(c.who, app, "checks", fmt.Sprintf("c%d", i), string(body))
		if c.reason == "" {
			if err != nil {
				t.Errorf("%s: %v, want it to pass", name, err)
			}
			continue
		}
		ee := refusal(t, err, name)
		if ee.Code != errs.Forbidden || ee.Reason != c.reason {
			t.Errorf("%s: got %v (reason %q), want forbidden %q", name, err, ee.Reason, c.reason)
		}
	}

	// A check given something other than a name or names is a bug in
	// access.js, not a refusal.
	_, err := en.try(alice, app, "checks", "bad", `{"check":"requireUser","arg":42}`)
	wantCode(t, err, errs.AccessError, "requireUser(42)", "TypeError", "takes a user name or an array of them")
}

// docs/architecture.md, "access.js": no client can pass requireBackend, whatever it sends.
func TestRequireBackendCannotBeForged(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/forge"
	en.app(app, false)
	en.deploy(app, `
export default function (doc, oldDoc, user, ctx) {
  ctx.requireBackend(["onChange", "scheduled", "fetch"]);
  return { channels: ["x"] };
}
`)
	const reason = "only the backend's onChange or scheduled or fetch handler may make this change"
	for _, body := range []string{
		`{"_handler":"onChange"}`,
		`{"_writer":{"handler":"onChange"}}`,
		`{"_path":"onChange"}`,
	} {
		_, err := en.try(alice, app, "jobs", "", body)
		wantCode(t, err, errs.Invalid, body, "reserved")
	}
	for _, body := range []string{
		`{"handler":"onChange"}`,
		`{"writer":{"handler":"scheduled"}}`,
		`{"ctx":{"handler":"fetch"},"user":{"isOwner":true}}`,
	} {
		for _, a := range []engine.Actor{alice, admin, anon, {User: "alice", Path: "onChange"}, {User: "alice", Device: "onChange"}} {
			_, err := en.try(a, app, "jobs", "", body)
			wantForbidden(t, err, reason, fmt.Sprintf("%s as %+v", body, a))
		}
	}
	seq := en.lastSeq(app)
	for _, h := range []appcode.Handler{appcode.OnChange, appcode.Scheduled, appcode.Fetch} {
		en.put(engine.Actor{User: "alice", Handler: h}, app, "jobs", "", `{}`)
	}
	_, err := en.try(engine.Actor{User: "alice", Handler: "other"}, app, "jobs", "", `{}`)
	wantForbidden(t, err, reason, "an unknown handler")
	if got := en.lastSeq(app); got != seq+3 {
		t.Fatalf("LastSeq = %d, want %d", got, seq+3)
	}
	// Deletes by a client are refused the same way.
	r := en.put(onChange(alice), app, "jobs", "j", `{}`)
	_, err = en.e.Delete(en.ctx, alice, app, "jobs", "j", r.Rev)
	wantForbidden(t, err, reason, "client delete")
	if _, err := en.e.Delete(en.ctx, scheduled(alice), app, "jobs", "j", r.Rev); err != nil {
		t.Fatalf("scheduled delete: %v", err)
	}
}

func TestThrownValues(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/throws"
	en.app(app, false)
	en.deploy(app, `export function object(doc) {
  throw { forbidden: "x" };
}
export function str() { throw "plain words"; }
export function typeerror(doc) {
  const d = doc.missing;
  return d.field;
}
export function error() { throw new Error("boom"); }
export function other() { throw { notForbidden: 1 }; }
export function number() { throw 42; }
export function badReturn() { return "jobs"; }
export function numberReturn() { return 5; }
export function badChannels() { return { channels: [1, 2] }; }
export function nothing() {}
`)
	_, err := en.try(alice, app, "object", "", `{}`)
	wantForbidden(t, err, "x", "throw {forbidden}")
	if !strings.Contains(err.Error(), "x") {
		t.Fatalf("message %q does not carry the reason", err)
	}
	_, err = en.try(alice, app, "str", "", `{}`)
	wantForbidden(t, err, "plain words", "throw string")

	_, err = en.try(alice, app, "typeerror", "", `{}`)
	ee := wantCode(t, err, errs.AccessError, "TypeError", "TypeError")
	// doc.missing is undefined; reading .field of it fails on line 7.
	if m := regexp.MustCompile(`access\.js:7:(\d+)`).FindStringSubmatch(ee.Message); m == nil {
		t.Fatalf("TypeError message %q does not name access.js:7:COL", ee.Message)
	} else if col := m[1]; col != "10" && col != "11" && col != "12" {
		t.Fatalf("TypeError column %s, want the column of d.field (10-12): %s", col, ee.Message)
	}
	_, err = en.try(alice, app, "error", "", `{}`)
	wantCode(t, err, errs.AccessError, "new Error", "boom", "access.js:9:")
	_, err = en.try(alice, app, "other", "", `{}`)
	wantCode(t, err, errs.AccessError, "throw other object")
	_, err = en.try(alice, app, "number", "", `{}`)
	wantCode(t, err, errs.AccessError, "throw number")
	_, err = en.try(alice, app, "badReturn", "", `{}`)
	wantCode(t, err, errs.AccessError, "return a string")
	_, err = en.try(alice, app, "numberReturn", "", `{}`)
	if e := wantCode(t, err, errs.AccessError, "return a number"); !strings.Contains(e.Message, "(a number)") {
		t.Fatalf("a returned number is described as %q", e.Message)
	}
	_, err = en.try(alice, app, "badChannels", "", `{}`)
	wantCode(t, err, errs.AccessError, "return numbers as channels")
	en.put(alice, app, "nothing", "n", `{}`)
	if en.lastSeq(app) != 1 {
		t.Fatalf("refused writes committed: LastSeq %d", en.lastSeq(app))
	}
	// Each access_error is in the app's log, for its developer; a refusal
	// (forbidden) is the function working, and is not. The log lines are
	// queued before the last put, so its commit has them.
	lines, err := en.e.Logs(en.ctx, alice, app, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var logged []string
	for _, l := range lines {
		if l.Source == "access" && l.Level == "error" {
			logged = append(logged, l.Message)
		}
	}
	all := strings.Join(logged, "\n")
	if len(logged) != 7 || !strings.Contains(all, "TypeError") || !strings.Contains(all, "boom") || !strings.Contains(all, "badChannels/") {
		t.Fatalf("access errors logged: %d lines\n%s", len(logged), all)
	}
	if strings.Contains(all, "plain words") {
		t.Fatalf("a refusal was logged as an error:\n%s", all)
	}
}

func TestDeployVersionsAndRollback(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/deploy"
	en.app(app, false)
	v1 := en.deploy(app, `export default function (doc) {
  if (doc.v !== 1) throw { forbidden: "version 1 wants v=1" };
}
`)
	if v1.Version != 1 || !v1.Active || !v1.HasAccess {
		t.Fatalf("first deploy = %+v", v1)
	}
	v2 := en.deploy(app, `export default function (doc) {
  if (doc.v !== 2) throw { forbidden: "version 2 wants v=2" };
}
`)
	if v2.Version != 2 {
		t.Fatalf("second deploy = %+v", v2)
	}
	en.put(alice, app, "db", "", `{"v":2}`)

	// A syntax error on line 3 is refused with file, line and column; no
	// version is added and version 2 stays live.
	_, err := en.e.Deploy(en.ctx, alice, app, "export default function (doc) {\n  const ok = 1;\n  if (doc.v === ) {}\n}\n", "")
	// The column is the one of the unexpected ")".
	wantCode(t, err, errs.Invalid, "syntax error", "access.js:3:17: ")
	_, err = en.try(alice, app, "db", "", `{"v":1}`)
	wantForbidden(t, err, "version 2 wants v=2", "after a refused deploy")
	en.put(alice, app, "db", "", `{"v":2}`)
	_, err = en.e.Deploy(en.ctx, alice, app, "", "export const x = ;")
	wantCode(t, err, errs.Invalid, "backend syntax error", "backend.js:1:")

	vs, err := en.e.CodeVersions(en.ctx, alice, app)
	if err != nil {
		t.Fatal(err)
	}
	if len(vs) != 2 || vs[0].Version != 1 || vs[1].Version != 2 || vs[0].Active || !vs[1].Active {
		t.Fatalf("versions = %+v", vs)
	}

	// Rollback makes version 1 live; a deploy after it is version 3.
	if err := en.e.Rollback(en.ctx, alice, app, 1); err != nil {
		t.Fatal(err)
	}
	_, err = en.try(alice, app, "db", "", `{"v":2}`)
	wantForbidden(t, err, "version 1 wants v=1", "after rollback")
	en.put(alice, app, "db", "", `{"v":1}`)
	vs, _ = en.e.CodeVersions(en.ctx, alice, app)
	if len(vs) != 2 || !vs[0].Active || vs[1].Active {
		t.Fatalf("versions after rollback = %+v", vs)
	}
	wantCode(t, en.e.Rollback(en.ctx, alice, app, 9), errs.NotFound, "rollback to a missing version")
	wantForbidden(t, en.e.Rollback(en.ctx, bob, app, 2), "not the owner", "rollback by a non-owner")
	_, err = en.e.Deploy(en.ctx, bob, app, "export default function () {}", "")
	wantForbidden(t, err, "not the owner", "deploy by a non-owner")

	v3 := en.deploy(app, "export default function () {}\n")
	if v3.Version != 3 {
		t.Fatalf("third deploy = %+v", v3)
	}
	en.put(alice, app, "db", "", `{"v":"any"}`)
	if err := en.e.Rollback(en.ctx, alice, app, 2); err != nil {
		t.Fatal(err)
	}
	_, err = en.try(alice, app, "db", "", `{"v":3}`)
	wantForbidden(t, err, "version 2 wants v=2", "after rollback to 2")
}
