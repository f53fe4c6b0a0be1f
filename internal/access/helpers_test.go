package access_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/access"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store/sqlite"
)

// The tests run the engine on a real SQLite store with the access runtime,
// exactly as `handoff serve` does.

var (
	admin = engine.Actor{User: engine.AdminUser, Admin: true}
	anon  = engine.Actor{}
	alice = engine.Actor{User: "alice"} // owns every app of the tests
	bob   = engine.Actor{User: "bob"}
	carol = engine.Actor{User: "carol"}
	dave  = engine.Actor{User: "dave"}
	erin  = engine.Actor{User: "erin"} // never a member
)

func onChange(a engine.Actor) engine.Actor  { a.Handler = "onChange"; return a }
func scheduled(a engine.Actor) engine.Actor { a.Handler = "scheduled"; return a }

type env struct {
	t   testing.TB
	ctx context.Context
	st  *sqlite.Store
	e   *engine.Engine
}

// newEnv opens a store in a temp directory, bootstraps the admin and adds
// the users alice, bob, carol, dave and erin.
func newEnv(t testing.TB) *env {
	t.Helper()
	return newEnvWith(t, engine.Options{}, access.Options{})
}

func newEnvWith(t testing.TB, eo engine.Options, ao access.Options) *env {
	t.Helper()
	// Decisions and reads do not care whether a commit reached the disk.
	st, err := sqlite.OpenUnsynced(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eo.Code = jsapp.New(jsapp.Options{Access: ao})
	en := &env{t: t, ctx: context.Background(), st: st, e: engine.New(st, eo)}
	if _, err := en.e.Bootstrap(en.ctx, ""); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob", "carol", "dave", "erin"} {
		if _, err := en.e.AddUser(en.ctx, admin, u); err != nil {
			t.Fatalf("AddUser(%s): %v", u, err)
		}
	}
	return en
}

// app creates ref with a generous access deadline (see relax); the tests
// of the deadline set it themselves.
func (en *env) app(ref string, public bool) {
	en.t.Helper()
	if _, err := en.e.CreateApp(en.ctx, admin, ref, public); err != nil {
		en.t.Fatalf("CreateApp(%s): %v", ref, err)
	}
	en.relax(ref)
}

func (en *env) member(ref, user, role string) {
	en.t.Helper()
	if err := en.e.AddMember(en.ctx, alice, ref, user, role); err != nil {
		en.t.Fatalf("AddMember(%s, %s, %s): %v", ref, user, role, err)
	}
}

func (en *env) deploy(ref, src string) engine.CodeInfo {
	en.t.Helper()
	ci, err := en.e.Deploy(en.ctx, alice, ref, src, "")
	if err != nil {
		en.t.Fatalf("Deploy(%s): %v", ref, err)
	}
	return ci
}

// relax gives app's access function a generous deadline, for tests that
// are not about the deadline: under -race on a loaded 2-core machine a
// trivial call can spend 100ms of wall-clock time descheduled.
func (en *env) relax(ref string) {
	en.t.Helper()
	if err := en.e.SetAccessTimeout(en.ctx, alice, ref, 10*time.Second); err != nil {
		en.t.Fatal(err)
	}
}

func (en *env) try(a engine.Actor, ref, db, id, body string) (appcode.WriteResult, error) {
	return en.e.Put(en.ctx, a, ref, db, id, []byte(body), appcode.PutOptions{})
}

func (en *env) put(a engine.Actor, ref, db, id, body string) appcode.WriteResult {
	en.t.Helper()
	r, err := en.try(a, ref, db, id, body)
	if err != nil {
		en.t.Fatalf("Put(%v %s %s/%s %s): %v", a, ref, db, id, body, err)
	}
	return r
}

func (en *env) del(a engine.Actor, ref, db, id string) appcode.WriteResult {
	en.t.Helper()
	r, err := en.e.Delete(en.ctx, a, ref, db, id, "")
	if err != nil {
		en.t.Fatalf("Delete(%v %s %s/%s): %v", a, ref, db, id, err)
	}
	return r
}

func (en *env) get(a engine.Actor, ref, db, id string) map[string]any {
	en.t.Helper()
	raw, err := en.e.Get(en.ctx, a, ref, db, id)
	if err != nil {
		en.t.Fatalf("Get(%v %s %s/%s): %v", a, ref, db, id, err)
	}
	return object(en.t, raw)
}

// lastSeq is the app's latest committed sequence.
func (en *env) lastSeq(ref string) int64 {
	en.t.Helper()
	owner, name, _ := strings.Cut(ref, "/")
	a, err := en.st.App(en.ctx, owner, name)
	if err != nil {
		en.t.Fatal(err)
	}
	n, err := en.st.LastSeq(en.ctx, a.ID)
	if err != nil {
		en.t.Fatal(err)
	}
	return n
}

func object(t testing.TB, raw []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("not a JSON object: %s: %v", raw, err)
	}
	return m
}

// refusal returns err as an *errs.Error, failing when it is not one.
func refusal(t testing.TB, err error, what string) *errs.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want a refusal", what)
	}
	var ee *errs.Error
	if !errors.As(err, &ee) {
		t.Fatalf("%s: %v is not an *errs.Error", what, err)
	}
	if ee.Message == "" {
		t.Fatalf("%s: %v has no message", what, err)
	}
	return ee
}

// wantForbidden wants code forbidden with exactly reason.
func wantForbidden(t testing.TB, err error, reason, what string) {
	t.Helper()
	ee := refusal(t, err, what)
	if ee.Code != errs.Forbidden || ee.Reason != reason {
		t.Fatalf("%s: got %s (reason %q), want forbidden with reason %q", what, err, ee.Reason, reason)
	}
}

// wantCode wants code, and a message containing every one of parts.
func wantCode(t testing.TB, err error, code errs.Code, what string, parts ...string) *errs.Error {
	t.Helper()
	ee := refusal(t, err, what)
	if ee.Code != code {
		t.Fatalf("%s: got %v, want code %s", what, err, code)
	}
	for _, p := range parts {
		if !strings.Contains(ee.Message, p) {
			t.Fatalf("%s: message %q does not contain %q", what, ee.Message, p)
		}
	}
	return ee
}

// ids lists the _id of documents.
func ids(t testing.TB, docs []json.RawMessage) []string {
	t.Helper()
	out := make([]string, len(docs))
	for i, d := range docs {
		out[i], _ = object(t, d)["_id"].(string)
	}
	return out
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
