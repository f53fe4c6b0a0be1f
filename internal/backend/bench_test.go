package backend_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/examples"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/backend"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// BenchmarkOnChange measures the per-event overhead of running onChange:
// borrowing a runtime, arming the run limit, building the event (with a
// small document) and waiting for the handler's promise. The handler
// returns at once, so the number is the cost the platform adds to every
// event. It runs on real time (no virtual clock), as in production.
//
//	go test -run '^$' -bench OnChange -benchmem ./backend
func BenchmarkOnChange(b *testing.B) {
	c := backend.New(backend.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	be, err := c.CompileBackend("backend.js", `export async function onChange(event, ctx) {
  if (event.doc.status !== "pending") return
}`)
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	ev := appcode.ChangeEvent{DB: "jobs", DocID: "j1", Seq: 1, Attempt: 1,
		Doc: json.RawMessage(`{"_id":"j1","_rev":"1-abc","type":"job","status":"done","input":"cat.png","attempts":1}`)}
	hc := newFake()
	ctx := context.Background()
	b.Run("serial", func(b *testing.B) {
		for b.Loop() {
			if err := be.OnChange(ctx, ev, hc); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := be.OnChange(ctx, ev, hc); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// instantHC answers every write at once with a new rev and no other work,
// so a benchmark over it times only the handler's JavaScript and the
// bindings around it.
type instantHC struct{ *fakeHC }

func (instantHC) Put(_ context.Context, db, id string, _ json.RawMessage, _ appcode.PutOptions) (appcode.WriteResult, error) {
	return appcode.WriteResult{ID: id, Rev: "2-b"}, nil
}

// BenchmarkJobsOnChange runs examples/jobs' onChange on the event of a
// new pending job: the claim, the work and the finish, with writes that
// return at once. It is the JavaScript a job costs: its other commits get
// no event (config.onChange.when).
//
//	go test -run '^$' -bench JobsOnChange -benchmem ./backend
func BenchmarkJobsOnChange(b *testing.B) {
	src, err := examples.Jobs.ReadFile("jobs/backend.js")
	if err != nil {
		b.Fatal(err)
	}
	c := backend.New(backend.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	be, err := c.CompileBackend("backend.js", string(src))
	if err != nil {
		b.Fatal(err)
	}
	defer be.Close()
	ev := appcode.ChangeEvent{DB: "jobs", DocID: "job-1", Seq: 1, Attempt: 1,
		Doc: json.RawMessage(`{"_id":"job-1","_rev":"1-a","kind":"job","status":"pending","input":"resize cat.png to 200 px","attempts":0}`)}
	hc := instantHC{newFake()}
	ctx := context.Background()
	for b.Loop() {
		if err := be.OnChange(ctx, ev, hc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHandlerPieces prices what examples/jobs' onChange is made of,
// one piece per handler, over writes that return at once: the run itself
// (empty), an await, one ctx.db.put, and ten of each of the plain
// JavaScript steps it takes (the time of one is a tenth of the difference
// with empty). It shows where a job's JavaScript goes: the engine's
// objects and promises, not the handler's logic.
//
//	go test -run '^$' -bench HandlerPieces -benchmem ./internal/backend
func BenchmarkHandlerPieces(b *testing.B) {
	ten := func(step string) string {
		return `export async function onChange(event, ctx) { const job = event.doc; for (let i = 0; i < 10; i++) { ` + step + ` } }`
	}
	pieces := []struct{ name, src string }{
		{"empty", `export async function onChange(event, ctx) {}`},
		{"await", `export async function onChange(event, ctx) { await 1 }`},
		{"put", `export async function onChange(event, ctx) { await ctx.db.put(event.doc, {db: "jobs", ifRev: event.doc._rev}) }`},
		{"10-spreads", ten(`const c = {...job, status: "running"}`)},
		{"10-rests", ten(`const {status, ...rest} = job`)},
		{"10-splits", ten(`job.input.split(/\s+/).filter(Boolean).length`)},
		{"10-dates", ten(`new Date().toISOString()`)},
		{"10-claim-ids", ten(`Date.now().toString(36) + "-" + Math.random().toString(36).slice(2, 10)`)},
	}
	ev := appcode.ChangeEvent{DB: "jobs", DocID: "job-1", Seq: 1, Attempt: 1,
		Doc: json.RawMessage(`{"_id":"job-1","_rev":"1-a","kind":"job","status":"pending","input":"resize cat.png to 200 px","attempts":0}`)}
	c := backend.New(backend.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, p := range pieces {
		b.Run(p.name, func(b *testing.B) {
			be, err := c.CompileBackend("backend.js", p.src)
			if err != nil {
				b.Fatal(err)
			}
			defer be.Close()
			hc := instantHC{newFake()}
			for b.Loop() {
				if err := be.OnChange(context.Background(), ev, hc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkJobsJavaScriptFloor runs the JavaScript of one job of
// examples/jobs on a bare goja runtime, with none of handoff around it:
// the three access.js checks (create, claim, finish) and onChange, whose
// ctx.db.put returns a settled promise at once. Documents are made by
// object literals, the cheapest way goja builds them. What it reports is
// what the example's own code costs on this engine, whatever the platform
// does: BenchmarkJobsOnChange and BenchmarkAccessEvaluations minus this
// is what handoff adds (docs/benchmarks.md, "What the engine costs").
//
//	go test -run '^$' -bench JobsJavaScriptFloor -benchmem ./internal/backend
func BenchmarkJobsJavaScriptFloor(b *testing.B) {
	vm := goja.New()
	for _, file := range []string{"access.js", "backend.js"} {
		src, err := examples.Jobs.ReadFile("jobs/" + file)
		if err != nil {
			b.Fatal(err)
		}
		p, err := jsvm.Compile(file, string(src))
		if err != nil {
			b.Fatal(err)
		}
		wrapper, err := vm.RunString(p.Code())
		if err != nil {
			b.Fatal(err)
		}
		exports, module := vm.NewObject(), vm.NewObject()
		_ = module.Set("exports", exports)
		run, _ := goja.AssertFunction(wrapper)
		if _, err := run(goja.Undefined(), exports, goja.Undefined(), module); err != nil {
			b.Fatal(err)
		}
		if err := vm.Set(strings.TrimSuffix(file, ".js"), module.Get("exports")); err != nil {
			b.Fatal(err)
		}
	}
	job, err := vm.RunString(`(() => {
		const actx = (handler) => ({ requireBackend(h) { if (h !== handler) throw { forbidden: "not " + h } } });
		const user = () => ({ id: "alice", userHandle: "alice", roles: [], isOwner: true });
		const fresh = () => ({ _id: "job-1", kind: "job", status: "pending", input: "resize cat.png to 200 px", attempts: 0 });
		const ctx = {
			db: { put: (doc) => Promise.resolve({ id: doc._id, rev: "2-b" }) },
			log() {},
		};
		return async () => {
			access.jobs(fresh(), null, user(), actx(""));
			const stored = { ...fresh(), _rev: "1-a" };
			await backend.onChange({ dbName: "jobs", docId: "job-1", doc: stored, oldDoc: null, seq: 1, deleted: false, attempt: 1 }, ctx);
			const claimed = { ...fresh(), status: "running", attempts: 1, claimId: "c-1", leaseUntil: Date.now() + 30000 };
			access.jobs(claimed, stored, user(), actx("onChange"));
			access.jobs({ ...claimed, status: "done", output: { words: 5 } }, claimed, user(), actx("onChange"));
		};
	})()`)
	if err != nil {
		b.Fatal(err)
	}
	one, _ := goja.AssertFunction(job)
	for b.Loop() {
		// A top-level call runs the promise jobs it queued before it
		// returns, so the whole async chain ends within it.
		p, err := one(goja.Undefined())
		if err != nil {
			b.Fatal(err)
		}
		if st := p.Export().(*goja.Promise); st.State() != goja.PromiseStateFulfilled {
			b.Fatalf("the job ended %v: %v", st.State(), st.Result())
		}
	}
}
