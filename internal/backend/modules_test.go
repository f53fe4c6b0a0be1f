package backend_test

import (
	"context"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/internal/appdir"
	"github.com/handoff-run/handoff/internal/apptest"
)

// TestOnChangeThrowNamesTheModule: an onChange that fails inside an
// imported module reports that module's file and line, whether the
// module throws synchronously or its promise rejects.
func TestOnChangeThrowNamesTheModule(t *testing.T) {
	code, err := appdir.Read(apptest.Folder(t, map[string]string{
		"backend.js": `import { check } from "./lib/check.js";
import { later } from "./lib/later.js";

export async function onChange(event, ctx) {
  if (event.docId === "sync") check(event.doc);
  if (event.docId === "async") await later(event.doc);
}
`,
		"lib/check.js": `// Checks a document before work starts.
export function check(doc) {
  if (!doc.input) {
    throw new Error("a job needs an input");
  }
}
`,
		"lib/later.js": `export async function later(doc) {
  await null;
  throw new TypeError("bad size " + doc.size);
}
`,
	}))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	b := e.compile(code.Backend)
	hc := newFake()
	for id, want := range map[string]string{
		"sync":  "lib/check.js:4:",
		"async": "lib/later.js:3:",
	} {
		doc := hc.seed("jobs", map[string]any{"_id": id, "size": 3})
		err := b.OnChange(context.Background(), event("jobs", id, doc), hc)
		if err == nil || !strings.HasPrefix(err.Error(), want) || !strings.Contains(err.Error(), "(in onChange)") {
			t.Errorf("%s: got %v, want it at %s", id, err, want)
		}
	}
}
