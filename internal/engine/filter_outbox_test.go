package engine_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/internal/pgtest"
	"github.com/handoff-run/handoff/internal/sim"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
	"github.com/handoff-run/handoff/store/sqlite"
)

// onBothStores runs f on a fresh embedded store and on a fresh PostgreSQL
// database (skipped without PostgreSQL).
func onBothStores(t *testing.T, f func(t *testing.T, st store.Store)) {
	t.Run("sqlite", func(t *testing.T) {
		st, err := sqlite.Open(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f(t, st)
	})
	t.Run("postgres", func(t *testing.T) {
		url := pgtest.Fresh(t, 4) // before the deadline: it may wait for a share of the server
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		st, err := postgres.Open(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f(t, st)
	})
}

// outboxApp is alice/app on an engine that is never started, so every
// event its commits enqueue stays in the store's outbox to be counted.
type outboxApp struct {
	t     *testing.T
	e     *engine.Engine
	st    store.Store
	alice engine.Actor
	id    int64
}

func newOutboxApp(t *testing.T, st store.Store) *outboxApp {
	t.Helper()
	ctx := context.Background()
	e := engine.New(st, engine.Options{
		Code: jsapp.New(jsapp.Options{}),
	})
	t.Cleanup(e.Close)
	tok, err := e.Bootstrap(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	admin, _ := e.Authenticate(ctx, tok)
	if _, err := e.AddUser(ctx, admin, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateApp(ctx, admin, "alice/app", false); err != nil {
		t.Fatal(err)
	}
	a, err := st.App(ctx, "alice", "app")
	if err != nil {
		t.Fatal(err)
	}
	return &outboxApp{t: t, e: e, st: st, alice: engine.Actor{User: "alice"}, id: a.ID}
}

func (o *outboxApp) deploy(backendJS string) {
	o.t.Helper()
	if _, err := o.e.Deploy(context.Background(), o.alice, "alice/app", "", backendJS); err != nil {
		o.t.Fatal(err)
	}
}

func (o *outboxApp) put(db, id, body string) int64 {
	o.t.Helper()
	res, err := o.e.Put(context.Background(), o.alice, "alice/app", db, id, []byte(body), appcode.PutOptions{})
	if err != nil {
		o.t.Fatalf("put %s/%s: %v", db, id, err)
	}
	return res.Seq
}

func (o *outboxApp) del(db, id string) int64 {
	o.t.Helper()
	res, err := o.e.Delete(context.Background(), o.alice, "alice/app", db, id, "")
	if err != nil {
		o.t.Fatalf("delete %s/%s: %v", db, id, err)
	}
	return res.Seq
}

// outbox returns the seqs of the app's outbox rows, as the store holds them.
func (o *outboxApp) outbox() []int64 {
	o.t.Helper()
	evs, err := o.st.ListEvents(context.Background(), o.id, false, 0, 1000)
	if err != nil {
		o.t.Fatal(err)
	}
	var seqs []int64
	for _, ev := range evs {
		seqs = append(seqs, ev.Seq)
	}
	return seqs
}

func (o *outboxApp) wantOutbox(want []int64) {
	o.t.Helper()
	if got := o.outbox(); !slices.Equal(got, want) {
		o.t.Fatalf("outbox rows at seqs %v, want %v", got, want)
	}
}

// TestFilteredCommitsWriteNoOutboxRow: under config.onChange.when and
// dbs only the commits that match leave an outbox row; the others leave
// none at all, so nothing claims, runs or acks them.
func TestFilteredCommitsWriteNoOutboxRow(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, st store.Store) {
		o := newOutboxApp(t, st)
		o.deploy(`export const config = { onChange: {
	when: { kind: "job", status: ["pending", "retry"] },
	dbs: ["jobs"],
} };
export async function onChange(event, ctx) {}`)
		var want []int64
		want = append(want, o.put("jobs", "a", `{"kind":"job","status":"pending"}`))
		o.put("jobs", "b", `{"kind":"job","status":"running"}`)
		want = append(want, o.put("jobs", "c", `{"kind":"job","status":"retry","n":1}`))
		o.put("jobs", "d", `{"status":"pending"}`)                     // no kind: every field must match
		o.put("jobs", "e", `{"kind":"note","status":"pending"}`)       // the other field fails
		o.put("jobs", "f", `{"kind":"job","status":["pending"]}`)      // an array is no scalar
		o.put("other", "g", `{"kind":"job","status":"pending"}`)       // not in dbs
		o.put("jobs", "h", `{"kind":"job","status":{"is":"pending"}}`) // nor is an object
		want = append(want, o.put("jobs", "b", `{"kind":"job","status":"pending"}`))
		// A delete matches on the body it removes.
		want = append(want, o.del("jobs", "a"))
		o.put("jobs", "c", `{"kind":"job","status":"done"}`)
		o.del("jobs", "c")
		o.del("other", "g")
		o.wantOutbox(want)
	})
}

// TestUnfilteredCommitsAllWriteOutboxRows: without when and dbs every
// commit, to any database, delete or not, gets its event as before.
func TestUnfilteredCommitsAllWriteOutboxRows(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, st store.Store) {
		o := newOutboxApp(t, st)
		o.deploy(`export const config = { onChange: { concurrency: 2 } };
export async function onChange(event, ctx) {}`)
		want := []int64{
			o.put("jobs", "a", `{"kind":"job","status":"pending"}`),
			o.put("other", "b", `{}`),
			o.del("jobs", "a"),
		}
		o.wantOutbox(want)
	})
}

// TestFilterValues covers the value rules of when on one store: numbers
// by value, booleans, null, escaped strings and keys, several fields.
func TestFilterValues(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o := newOutboxApp(t, st)
	o.deploy(`export const config = { onChange: { when: { n: [1, 2.5], ok: true, gone: null, "ü": "é" } } };
export async function onChange(event, ctx) {}`)
	var want []int64
	want = append(want, o.put("d", "a", `{"n":1,"ok":true,"gone":null,"ü":"é"}`))
	want = append(want, o.put("d", "b", `{"n":1.0,"ok":true,"gone":null,"\u00fc":"\u00e9","x":[1]}`))
	want = append(want, o.put("d", "c", `{"n":25e-1,"ok":true,"gone":null,"ü":"é"}`))
	o.put("d", "e", `{"n":"1","ok":true,"gone":null,"ü":"é"}`) // a string is no number
	o.put("d", "f", `{"n":1,"ok":"true","gone":null,"ü":"é"}`)
	o.put("d", "g", `{"n":1,"ok":true,"ü":"é"}`) // absent is not null
	o.put("d", "h", `{"n":1,"ok":false,"gone":null,"ü":"é"}`)
	o.put("d", "i", `{"n":3,"ok":true,"gone":null,"ü":"é"}`)
	o.wantOutbox(want)
}

// TestRedeployChangesFilter: the filter is the active code version's, so
// a deploy that changes when applies to the commits after it.
func TestRedeployChangesFilter(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, st store.Store) {
		o := newOutboxApp(t, st)
		const handler = "\nexport async function onChange(event, ctx) {}"
		o.deploy(`export const config = { onChange: { when: { status: "pending" } } };` + handler)
		want := []int64{o.put("jobs", "a", `{"status":"pending"}`)}
		o.put("jobs", "b", `{"status":"running"}`)
		o.deploy(`export const config = { onChange: { when: { status: "running" } } };` + handler)
		o.put("jobs", "c", `{"status":"pending"}`)
		want = append(want, o.put("jobs", "d", `{"status":"running"}`))
		o.deploy(handler) // no filter: everything again
		want = append(want, o.put("jobs", "e", `{"status":"pending"}`))
		o.wantOutbox(want)
	})
}

// TestFilteredCommitsRunNoJavaScript: delivery on, a filtered commit
// never reaches onChange, while its handler's own writes, kept out by
// dbs, start no runs either.
func TestFilteredCommitsRunNoJavaScript(t *testing.T) {
	t.Parallel()
	env := sim.New(t, sim.Options{Dir: sim.WriteApp(t, map[string]string{"backend.js": `
export const config = { onChange: { when: { status: "pending" }, dbs: ["jobs"] } };
export async function onChange(event, ctx) {
  await ctx.db.put({ _id: event.docId, saw: event.doc.status }, { db: "seen" });
}`})})
	env.Put("jobs", "a", map[string]any{"status": "pending"})
	env.Put("jobs", "b", map[string]any{"status": "running"})
	env.Put("other", "c", map[string]any{"status": "pending"})
	env.RunFor(time.Minute)
	runs := env.Runs()
	if len(runs) != 1 || runs[0].DocID != "a" {
		t.Fatalf("onChange runs %v, want one, for jobs/a", runs)
	}
	if env.Get("seen", "a") == nil || env.Get("seen", "b") != nil || env.Get("seen", "c") != nil {
		t.Fatal("seen holds the wrong documents")
	}
	if evs := env.Events(false); len(evs) != 0 {
		t.Fatalf("events left: %v", evs)
	}
}
