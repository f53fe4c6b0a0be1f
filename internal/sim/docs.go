package sim

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

// Documents, and what the app did with them: the ledger, logs, events
// and handler runs.

// Doc is a document as a map, with _id and _rev.
type Doc = map[string]any

func (env *Env) marshal(v any) []byte {
	env.T.Helper()
	if b, ok := v.([]byte); ok {
		return b
	}
	if b, ok := v.(json.RawMessage); ok {
		return b
	}
	b, err := json.Marshal(v)
	if err != nil {
		env.T.Fatalf("sim: encoding %v: %v", v, err)
	}
	return b
}

// Put writes doc (a map, struct or JSON) as the owner through the CLI
// path and fails the test if the write is refused.
func (env *Env) Put(db, id string, doc any) appcode.WriteResult {
	env.T.Helper()
	r, err := env.PutAs(env.Owner, db, id, doc, appcode.PutOptions{})
	if err != nil {
		env.T.Fatalf("sim: put %s/%s: %v", db, id, err)
	}
	return r
}

// PutAs writes doc as a and returns the engine's answer.
func (env *Env) PutAs(a engine.Actor, db, id string, doc any, o appcode.PutOptions) (appcode.WriteResult, error) {
	return env.Engine.Put(env.Ctx, a, env.App, db, id, env.marshal(doc), o)
}

// Get reads a live document as the owner; nil when absent or deleted.
func (env *Env) Get(db, id string) Doc {
	env.T.Helper()
	raw, err := env.Engine.Get(env.Ctx, env.Owner, env.App, db, id)
	if err != nil {
		if errs.Is(err, errs.NotFound) {
			return nil
		}
		env.T.Fatalf("sim: get %s/%s: %v", db, id, err)
	}
	return Decode(env.T, raw)
}

// Decode parses a JSON object.
func Decode(t TB, raw json.RawMessage) Doc {
	t.Helper()
	var d Doc
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("sim: decoding %s: %v", raw, err)
	}
	return d
}

// Revision is one ledger entry with its document decoded.
type Revision struct {
	engine.Entry
	Body Doc
}

// History lists a document's revisions, oldest first.
func (env *Env) History(db, id string) []Revision {
	env.T.Helper()
	es, err := env.Engine.History(env.Ctx, env.Owner, env.App, db, id)
	if err != nil {
		env.T.Fatalf("sim: history of %s/%s: %v", db, id, err)
	}
	out := make([]Revision, len(es))
	for i, e := range es {
		out[i] = Revision{Entry: e, Body: Decode(env.T, e.Doc)}
	}
	return out
}

// Ledger lists every revision of the app (db "" for all databases) in
// commit order.
func (env *Env) Ledger(db string) []Revision {
	env.T.Helper()
	var out []Revision
	var since int64
	for {
		c, err := env.Engine.Changes(env.Ctx, env.Owner, env.App, db, since, engine.MaxLimit)
		if err != nil {
			env.T.Fatalf("sim: changes of %s: %v", env.App, err)
		}
		for _, e := range c.Changes {
			out = append(out, Revision{Entry: e, Body: Decode(env.T, e.Doc)})
		}
		if len(c.Changes) == 0 || c.Last == since {
			return out
		}
		since = c.Last
	}
}

// Logs lists every line of the app's log. Lines are stored without
// waiting, so it flushes the store first.
func (env *Env) Logs() []engine.LogLine {
	env.T.Helper()
	if err := env.Store.Flush(env.Ctx, env.Now()); err != nil {
		env.T.Fatal(err)
	}
	var out []engine.LogLine
	var after int64
	for {
		ls, err := env.Engine.Logs(env.Ctx, env.Admin, env.App, after, engine.MaxLimit)
		if err != nil {
			env.T.Fatalf("sim: logs of %s: %v", env.App, err)
		}
		out = append(out, ls...)
		if len(ls) < engine.MaxLimit {
			return out
		}
		after = ls[len(ls)-1].ID
	}
}

// LogsContaining lists the log lines whose message contains s.
func (env *Env) LogsContaining(s string) []engine.LogLine {
	env.T.Helper()
	var out []engine.LogLine
	for _, l := range env.Logs() {
		if strings.Contains(l.Message, s) {
			out = append(out, l)
		}
	}
	return out
}

// Events lists the app's waiting events, or its dead ones. Settlements
// are stored without waiting, so it flushes the store first.
func (env *Env) Events(dead bool) []engine.EventInfo {
	env.T.Helper()
	if err := env.Store.Flush(env.Ctx, env.Now()); err != nil {
		env.T.Fatal(err)
	}
	var out []engine.EventInfo
	var after int64
	for {
		evs, err := env.Engine.Events(env.Ctx, env.Admin, env.App, dead, after, engine.MaxLimit)
		if err != nil {
			env.T.Fatalf("sim: events of %s: %v", env.App, err)
		}
		out = append(out, evs...)
		if len(evs) < engine.MaxLimit {
			return out
		}
		after = evs[len(evs)-1].Seq
	}
}

// Schedule reports the app's scheduled handler.
func (env *Env) Schedule() engine.ScheduleInfo {
	env.T.Helper()
	info, err := env.Engine.Schedule(env.Ctx, env.Admin, env.App)
	if err != nil {
		env.T.Fatalf("sim: schedule of %s: %v", env.App, err)
	}
	return info
}

// Runs lists every handler call the engine made, in the order they
// started.
func (env *Env) Runs() []Run { return env.rec.all() }

// OnChangeRuns lists the onChange runs of one document.
func (env *Env) OnChangeRuns(db, id string) []Run {
	return slices.DeleteFunc(env.rec.all(), func(r Run) bool {
		return r.Handler != appcode.OnChange || r.DB != db || r.DocID != id
	})
}

// Ticks lists the scheduled runs.
func (env *Env) Ticks() []Run {
	return slices.DeleteFunc(env.rec.all(), func(r Run) bool { return r.Handler != appcode.Scheduled })
}

// String describes a run for failure messages.
func (r Run) String() string {
	if r.Handler == appcode.Scheduled {
		return fmt.Sprintf("scheduled(planned %s) %s..%s err=%v", r.Planned.Format(time.TimeOnly), r.Start.Format(time.TimeOnly+".000"), r.End.Format(time.TimeOnly+".000"), r.Err)
	}
	return fmt.Sprintf("onChange(%s/%s seq %d attempt %d) %s..%s err=%v", r.DB, r.DocID, r.Seq, r.Attempt,
		r.Start.Format(time.TimeOnly+".000"), r.End.Format(time.TimeOnly+".000"), r.Err)
}
