package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/sim"
)

// badWriter's onChange tries to write values documents may not hold and
// records what each write answered.
const badWriter = `
export async function onChange(event, ctx) {
  if (event.deleted || event.doc.step !== "start") return;
  const out = [];
  for (const doc of [{ _id: "nul", s: "a\u0000b" }, { _id: "lone", s: "x\ud800" }, { _id: "key", ["\udc00"]: 1 }]) {
    try {
      await ctx.db.put(doc);
      out.push("stored " + doc._id);
    } catch (e) {
      out.push(e.code + ": " + e.message);
    }
  }
  await ctx.db.put({ ...event.doc, step: "done", out }, { ifRev: event.doc._rev });
}
`

// TestHandlerWritesMeetTheDocumentRules: a backend handler's ctx.db.put
// goes through the same door as an HTTP put.
func TestHandlerWritesMeetTheDocumentRules(t *testing.T) {
	t.Parallel()
	env := sim.New(t, sim.Options{Dir: sim.WriteApp(t, map[string]string{"backend.js": badWriter})})
	env.Put("work", "w1", map[string]any{"step": "start"})
	env.RunUntil(func() bool { return env.Get("work", "w1")["step"] == "done" }, time.Minute)
	out, _ := env.Get("work", "w1")["out"].([]any)
	if len(out) != 3 {
		t.Fatalf("out = %v", out)
	}
	for i, o := range out {
		if s, _ := o.(string); !strings.HasPrefix(s, "invalid: document ") {
			t.Errorf("write %d answered %q, want invalid", i, o)
		}
	}
	for _, id := range []string{"nul", "lone", "key"} {
		if d := env.Get("work", id); d != nil {
			t.Errorf("document %s was stored: %v", id, d)
		}
	}
}
