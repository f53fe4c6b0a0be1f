package access_test

import (
	"strings"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appdir"
	"github.com/handoff-run/handoff/internal/apptest"
)

// bundled bundles the access.js of a folder of files as `handoff deploy`
// does.
func bundled(t *testing.T, files map[string]string) string {
	t.Helper()
	m, err := appdir.Bundle(apptest.Folder(t, files), appdir.AccessFile)
	if err != nil {
		t.Fatal(err)
	}
	return m.Code
}

// TestModuleErrorsNameTheModule: access.js split in modules runs, and a
// refusal, a requireBackend and a failure inside an imported module say
// the module's file and line, not the bundle's.
func TestModuleErrorsNameTheModule(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	en.app("alice/tasks", false)
	en.deploy("alice/tasks", bundled(t, map[string]string{
		"access.js": `import { checkTask } from "./rules/task.js";

export function tasks(doc, oldDoc, user, ctx) {
  checkTask(doc, ctx);
  return { channels: ["tasks"] };
}
`,
		"rules/task.js": `// The rules of a task document.
export function checkTask(doc, ctx) {
  if (!doc.title) {
    throw { forbidden: "a task needs a title" };
  }
  if (doc.status === "done") {
    ctx.requireBackend("onChange");
  }
  if (doc.status === "broken") {
    doc.nothing.here = 1;
  }
}
`,
	}))
	en.put(alice, "alice/tasks", "tasks", "t1", `{"title": "write docs"}`)

	_, err := en.try(alice, "alice/tasks", "tasks", "t2", `{}`)
	wantForbidden(t, err, "a task needs a title", "thrown refusal")
	wantCode(t, err, errs.Forbidden, "thrown refusal", "access.js refused the write: a task needs a title (refused at rules/task.js:4:")

	_, err = en.try(alice, "alice/tasks", "tasks", "t3", `{"title": "x", "status": "done"}`)
	wantCode(t, err, errs.Forbidden, "requireBackend", "only the backend's onChange handler", "rules/task.js:7:")

	_, err = en.try(alice, "alice/tasks", "tasks", "t4", `{"title": "x", "status": "broken"}`)
	ee := wantCode(t, err, errs.AccessError, "a TypeError", "rules/task.js:10:")
	if strings.Contains(ee.Message, "access.js:") {
		t.Errorf("the failure points into the bundle: %s", ee.Message)
	}
}

// A refusal in access.js itself reads as it always has.
func TestSingleFileRefusalUnchanged(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	en.app("alice/tasks", false)
	en.deploy("alice/tasks", bundled(t, map[string]string{
		"access.js": `export function tasks(doc) { throw { forbidden: "closed" }; }`,
	}))
	_, err := en.try(alice, "alice/tasks", "tasks", "t1", `{}`)
	if ee := refusal(t, err, "refusal"); ee.Message != "access.js refused the write: closed" {
		t.Fatalf("got %q", ee.Message)
	}
}
