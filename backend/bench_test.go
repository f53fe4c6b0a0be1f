package backend_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"testing"

	"github.com/handoff-run/handoff/backend"
	"github.com/handoff-run/handoff/engine"
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
	ev := engine.ChangeEvent{DB: "jobs", DocID: "j1", Seq: 1, Attempt: 1,
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
