package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/internal/apptest"
)

// TestServeWatchesImportsAndLogsDeployErrors: `serve --app` redeploys
// when a module that access.js imports changes; an edit that does not
// build goes to the app's log (as `handoff logs` shows it) as well as the
// terminal, and the next good edit logs that it recovered.
func TestServeWatchesImportsAndLogsDeployErrors(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	dir := apptest.Folder(t, map[string]string{
		"access.js": `import { refuse } from "./rules/refuse.js";
export default function (doc) { refuse(doc); }
`,
		"rules/refuse.js": `export function refuse(doc) { throw { forbidden: "first rules" }; }
`,
		"backend.js": `import { label } from "./lib/label.js";
export async function onChange(event, ctx) { ctx.log("info", label(event.docId)); }
`,
		"lib/label.js": `export const label = (id) => "saw " + id;
`,
	})
	srv := startServerArgs(t, data, []string{"--app", "mo/app=" + dir})
	tok, err := os.ReadFile(filepath.Join(data, "mo.token"))
	if err != nil {
		t.Fatalf("the owner's token: %v\n%s", err, srv.log())
	}
	token := strings.TrimSpace(string(tok))
	versions := func() int {
		return strings.Count(must(t, srv.url, token, "app", "versions", "--app", "mo/app").stdout, `"version"`)
	}
	logs := func() []map[string]any {
		var out []map[string]any
		for _, l := range strings.Split(strings.TrimSpace(must(t, srv.url, token, "logs", "--app", "mo/app").stdout), "\n") {
			var m map[string]any
			if l != "" && json.Unmarshal([]byte(l), &m) == nil && m["source"] == "deploy" {
				out = append(out, m)
			}
		}
		return out
	}
	put := func(id, reason string) {
		t.Helper()
		fails(t, srv.url, token, 4, "error: forbidden: access.js refused the write: "+reason, "db", "put", "--app", "mo/app", "--db", "d", `{"_id":"`+id+`"}`)
	}
	if n := versions(); n != 1 {
		t.Fatalf("after start: %d versions", n)
	}
	put("a", "first rules")

	// An edit of the imported module, not of access.js, redeploys.
	apptest.Write(t, dir, map[string]string{"rules/refuse.js": `export function refuse(doc) { throw { forbidden: "second rules" }; }
`})
	waitFor(t, 20*time.Second, func() bool { return versions() == 2 }, srv)
	put("b", "second rules")

	// A module that does not parse: the live version stays, and the app's
	// log says which file and line to fix.
	apptest.Write(t, dir, map[string]string{"rules/refuse.js": "export function refuse(doc) {\n  throw { forbidden: };\n}\n"})
	waitFor(t, 20*time.Second, func() bool { return len(logs()) == 1 }, srv)
	l := logs()[0]
	if msg, _ := l["message"].(string); l["level"] != "error" || !strings.Contains(msg, "rules/refuse.js:2:") || !strings.Contains(msg, "live version stays") {
		t.Fatalf("deploy error in the app's log: %v", l)
	}
	if !strings.Contains(srv.log(), "rules/refuse.js:2:") {
		t.Errorf("the terminal does not show the error:\n%s", srv.log())
	}
	put("c", "second rules")

	// A misspelt handler export is refused the same way. The export goes
	// first: the watcher may deploy between the two writes, and with the
	// export already misspelt every state it can see is refused alike
	// (and the same error is logged once).
	apptest.Write(t, dir, map[string]string{"backend.js": `export async function onchange(event, ctx) {}
`})
	apptest.Write(t, dir, map[string]string{"rules/refuse.js": `export function refuse(doc) { throw { forbidden: "third rules" }; }
`})
	waitFor(t, 20*time.Second, func() bool { return len(logs()) == 2 }, srv)
	if msg, _ := logs()[1]["message"].(string); !strings.Contains(msg, "did you mean onChange?") {
		t.Fatalf("refused export in the app's log: %v", logs()[1])
	}
	if n := versions(); n != 2 {
		t.Fatalf("a refused version was deployed: %d versions", n)
	}

	// Fixed: deployed, and the log says it recovered.
	apptest.Write(t, dir, map[string]string{"backend.js": `export async function onChange(event, ctx) {}
`})
	waitFor(t, 20*time.Second, func() bool { return versions() == 3 }, srv)
	waitFor(t, 20*time.Second, func() bool { return len(logs()) == 3 }, srv)
	if l := logs()[2]; l["level"] != "info" || !strings.Contains(l["message"].(string), "recovered") || !strings.Contains(l["message"].(string), "version 3") {
		t.Fatalf("recovery in the app's log: %v", l)
	}
	put("d", "third rules")
}
