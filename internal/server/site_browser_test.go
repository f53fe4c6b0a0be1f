package server

import (
	"fmt"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
)

// sitePage is a page that loads the browser client the way an app's page
// does: from its own site, which sends it on to the API's origin.
const sitePage = `<!doctype html><title>site</title>
<script type="module">
import * as handoff from "/_handoff/client/handoff.js";
window.handoff = handoff;
</script>`

// TestSitePagesTalkToTheirOwnAppOnly: in Chromium, an app's page on its
// own origin reaches its app's API with the client module as served, and
// another app's page, holding the same token, is refused by CORS: it can
// neither read the first app's data nor write to it.
func TestSitePagesTalkToTheirOwnAppOnly(t *testing.T) {
	t.Parallel()
	s := newStack(t, "")
	for _, app := range []string{"alice/board", "alice/other"} {
		if _, err := s.e.CreateApp(s.ctx, consoleAdmin, app, false); err != nil {
			t.Fatal(err)
		}
		if _, err := s.e.DeployCode(s.ctx, aliceCLI, app, engine.Code{Files: map[string][]byte{"index.html": []byte(sitePage)}}); err != nil {
			t.Fatal(err)
		}
	}
	s.put("alice/board", "tasks", "t1", `{"status":"open","note":"board's own"}`)
	port := s.ts.URL[strings.LastIndex(s.ts.URL, ":"):]

	b := newBrowser(t)
	b.open("http://board--alice.localhost" + port + "/")
	b.waitJS("the client module", "window.handoff !== undefined")
	var got struct {
		Note  string
		Put   string
		Query int
	}
	b.eval(fmt.Sprintf(`(async () => {
		const app = window.handoff.connect({ token: %s }).app("alice/board");
		const doc = await app.db("tasks").get("t1");
		const put = await app.db("tasks").put({ status: "open" }, { id: "t2" });
		const q = await app.db("tasks").query({ field: "status", key: "open" });
		return { note: doc.note, put: put.rev, query: q.length };
	})()`, jsString(s.token)), &got)
	if got.Note != "board's own" || got.Put == "" || got.Query != 2 {
		t.Fatalf("the app's own page: %+v", got)
	}

	b.open("http://other--alice.localhost" + port + "/")
	b.waitJS("the client module", "window.handoff !== undefined")
	var refused struct{ Read, Write, Raw string }
	b.eval(fmt.Sprintf(`(async () => {
		const db = window.handoff.connect({ token: %[1]s }).app("alice/board").db("tasks");
		const why = (p) => p.then(() => "answered", (e) => e.name + ": " + e.message);
		return {
			read: await why(db.get("t1")),
			write: await why(db.put({ status: "stolen" }, { id: "t3" })),
			raw: await why(fetch(%[2]s, { headers: { Authorization: "Bearer " + %[1]s } }).then((r) => r.text())),
		};
	})()`, jsString(s.token), jsString("http://localhost"+port+"/v1/apps/alice/board/dbs/tasks/docs/t1")), &refused)
	for what, r := range map[string]string{"read": refused.Read, "write": refused.Write, "raw fetch": refused.Raw} {
		if r == "answered" || strings.Contains(r, "board's own") {
			t.Errorf("another app's page could %s the board's data: %s", what, r)
		}
	}
	if _, err := s.e.Get(s.ctx, aliceCLI, "alice/board", "tasks", "t3"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("another app's page wrote to the board: %v", err)
	}
}
