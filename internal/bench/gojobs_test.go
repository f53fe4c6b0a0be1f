package bench

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/handoff-run/handoff"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/examples"
	"github.com/handoff-run/handoff/internal/access"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// TestGoTableMatchesAccessJS: the Go transition table decides every write
// as examples/jobs/access.js does, refusals with the same reason, so the
// bench's Go run does the same work as the JavaScript one.
func TestGoTableMatchesAccessJS(t *testing.T) {
	src, err := examples.Jobs.ReadFile("jobs/access.js")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	js, err := access.New(access.Options{Now: func() time.Time { return now }}).CompileAccess("access.js", string(src))
	if err != nil {
		t.Fatal(err)
	}
	ms := now.UnixMilli()
	owner := &appcode.AccessUser{ID: "bench", IsOwner: true}
	guest := &appcode.AccessUser{ID: "guest"}
	pending := `{"_id":"j","_rev":"1-a","kind":"job","status":"pending","input":"a b","attempts":0}`
	running := func(claim string, attempts int, lease int64) string {
		b, _ := json.Marshal(map[string]any{"_id": "j", "_rev": "2-b", "kind": "job", "status": "running",
			"input": "a b", "attempts": attempts, "claimId": claim, "leaseUntil": lease})
		return string(b)
	}
	with := func(doc string, kv ...any) string {
		var m map[string]any
		json.Unmarshal([]byte(doc), &m)
		delete(m, "_rev")
		for i := 0; i < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		b, _ := json.Marshal(m)
		return string(b)
	}
	live, expired := ms+30_000, ms-1
	cases := []struct {
		name, doc, old, handler string
		user                    *appcode.AccessUser
	}{
		{"queue", with(pending), "", "", owner},
		{"queue signed out", with(pending), "", "", nil},
		{"queue running", with(pending, "status", "running"), "", "", owner},
		{"queue with attempts", with(pending, "attempts", 1), "", "", owner},
		{"queue without input", with(pending, "input", nil), "", "", owner},
		{"queue another kind", with(pending, "kind", "note"), "", "", owner},
		{"claim", running("c1", 1, live), pending, "onChange", owner},
		{"claim by a client", running("c1", 1, live), pending, "", owner},
		{"claim by the sweep", running("c1", 1, live), pending, "scheduled", owner},
		{"claim skipping an attempt", running("c1", 2, live), pending, "onChange", owner},
		{"claim without claimId", running("", 1, live), pending, "onChange", owner},
		{"claim with a past lease", running("c1", 1, expired), pending, "onChange", owner},
		{"claim changing input", with(running("c1", 1, live), "input", "x"), pending, "onChange", owner},
		{"note progress", with(running("c1", 1, live), "lastError", "e"), running("c1", 1, live), "onChange", owner},
		{"note with another lease", running("c1", 1, live+1), running("c1", 1, live), "onChange", owner},
		{"note with a stale claim", running("c2", 1, live), running("c1", 1, live), "onChange", owner},
		{"finish", with(running("c1", 1, live), "status", "done", "output", map[string]any{"words": 2}), running("c1", 1, live), "onChange", owner},
		{"finish with a stale claim", with(running("c2", 1, live), "status", "done"), running("c1", 1, live), "onChange", owner},
		{"finish with other attempts", with(running("c1", 2, live), "status", "done"), running("c1", 1, live), "onChange", owner},
		{"finish by a client", with(running("c1", 1, live), "status", "done"), running("c1", 1, live), "", owner},
		{"sweep back", with(running("c1", 1, expired), "status", "pending"), running("c1", 1, expired), "scheduled", owner},
		{"sweep before the lease ends", with(running("c1", 1, live), "status", "pending"), running("c1", 1, live), "scheduled", owner},
		{"sweep back out of attempts", with(running("c1", 3, expired), "status", "pending"), running("c1", 3, expired), "scheduled", owner},
		{"sweep to failed", with(running("c1", 3, expired), "status", "failed"), running("c1", 3, expired), "scheduled", owner},
		{"sweep by onChange", with(running("c1", 1, expired), "status", "pending"), running("c1", 1, expired), "onChange", owner},
		{"done to pending", with(running("c1", 1, live), "status", "pending"), with(running("c1", 1, live), "status", "done"), "scheduled", owner},
		{"delete", `{"_id":"j","_deleted":true}`, pending, "", owner},
		{"delete by a guest", `{"_id":"j","_deleted":true}`, pending, "", guest},
	}
	for _, c := range cases {
		in := appcode.AccessInput{DB: jobsDB, Doc: json.RawMessage(c.doc), User: c.user, Handler: appcode.Handler(c.handler),
			Timeout: time.Second, Now: now}
		if c.old != "" {
			in.OldDoc = json.RawMessage(c.old)
		}
		want, wantErr := js.Check(context.Background(), in)
		got, gotErr := goTable(goWrite(in))
		if errs.CodeOf(wantErr) == errs.AccessError || wantErr != nil && errs.CodeOf(wantErr) != errs.Forbidden {
			t.Fatalf("%s: access.js failed: %v", c.name, wantErr)
		}
		if reason(wantErr) != reason(gotErr) || (wantErr == nil) != (gotErr == nil) {
			t.Errorf("%s: access.js says %v, the Go table %v", c.name, wantErr, gotErr)
			continue
		}
		if wantErr == nil && !sameDecision(want, got) {
			t.Errorf("%s: access.js gives %+v, the Go table %+v", c.name, want, got)
		}
	}
}

// goWrite is the write the Go table sees for in.
func goWrite(in appcode.AccessInput) *handoff.Write {
	w := &handoff.Write{DB: in.DB, Doc: handoff.Doc(in.Doc), Old: handoff.Doc(in.OldDoc), Handler: string(in.Handler), Now: in.Now}
	var d struct {
		ID      string `json:"_id"`
		Deleted bool   `json:"_deleted"`
	}
	json.Unmarshal(in.Doc, &d)
	w.ID, w.Deleted = d.ID, d.Deleted
	if in.User != nil {
		u := handoff.User(*in.User)
		w.User = &u
	}
	return w
}

// sameDecision compares what access.js decided with the Go table's
// decision, which uses no grants but public ones.
func sameDecision(js appcode.AccessDecision, g handoff.Decision) bool {
	var grants []store.Grant
	for _, c := range g.Grant.Public {
		grants = append(grants, store.Grant{Kind: "public", Channel: c})
	}
	return slices.Equal(js.Channels, g.Channels) && slices.Equal(js.Grants, grants) &&
		g.Grant.Users == nil && g.Grant.Roles == nil && g.Members == nil
}

func reason(err error) string {
	if e, ok := err.(*errs.Error); ok {
		return e.Reason
	}
	return ""
}

// TestJobsWithGoHandlers: the Go run finishes every job exactly once, as
// the JavaScript one does, and says which handlers it ran.
func TestJobsWithGoHandlers(t *testing.T) {
	res, err := Jobs(context.Background(), JobsOptions{Jobs: 40, Concurrency: 4, Handlers: HandlersGo, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK || res.Done != 40 || res.Handlers != HandlersGo || res.Delivery.Count < 40 {
		t.Fatalf("Go handlers: %+v", res)
	}
	if _, err := Jobs(context.Background(), JobsOptions{Jobs: 1, Handlers: "lua", Dir: t.TempDir()}); err == nil {
		t.Fatal("handlers lua: no error")
	}
}
