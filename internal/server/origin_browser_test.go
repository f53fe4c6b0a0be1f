package server

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/internal/engine"
)

// TestARefusedOriginIsForbiddenNotUnreachable: in Chromium, a page on an
// origin the app does not allow sees its calls fail as forbidden, with
// the command that allows the origin, not as an unreachable server; the
// live feed stops with the same error instead of retrying forever. Once
// the origin is allowed, the same calls work; a server that is really
// down is still unavailable.
func TestARefusedOriginIsForbiddenNotUnreachable(t *testing.T) {
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
	s.put("alice/board", "tasks", "t1", `{"status":"open"}`)
	port := s.ts.URL[strings.LastIndex(s.ts.URL, ":"):]
	other := "http://other--alice.localhost" + port

	b := newBrowser(t)
	b.open(other + "/")
	b.waitJS("the client module", "window.handoff !== undefined")
	calls := fmt.Sprintf(`(async () => {
		const app = window.handoff.connect({ token: %s }).app("alice/board");
		const why = (p) => p.then(() => ({ code: "answered" }), (e) => ({ code: e.code, message: e.message }));
		const live = new Promise((resolve) => {
			const stop = app.db("tasks").liveQuery({ field: "status", key: "open" }, () => { stop(); resolve({ code: "answered" }); },
				{ onError: (e) => { stop(); resolve({ code: e.code, message: e.message }); } });
		});
		return { get: await why(app.db("tasks").get("t1")), put: await why(app.db("tasks").put({ status: "open" }, { id: "t2" })), live: await live };
	})()`, jsString(s.token))
	type outcome struct{ Code, Message string }
	var got map[string]outcome
	b.eval(calls, &got)
	want := "handoff app set --app alice/board --origin " + other
	for _, what := range []string{"get", "put", "live"} {
		if r := got[what]; r.Code != "forbidden" || !strings.Contains(r.Message, want) {
			t.Errorf("%s from a refused origin: %s %q; want forbidden naming %q", what, r.Code, r.Message, want)
		}
	}

	if _, err := s.e.SetOrigins(s.ctx, aliceCLI, "alice/board", []string{other}); err != nil {
		t.Fatal(err)
	}
	b.eval(calls, &got)
	for _, what := range []string{"get", "put", "live"} {
		if r := got[what]; r.Code != "answered" {
			t.Errorf("%s once the origin is allowed: %s %q", what, r.Code, r.Message)
		}
	}

	// A port nothing listens on any more: the server is really down.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://localhost:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	var down outcome
	b.eval(fmt.Sprintf(`window.handoff.connect({ server: %s }).app("alice/board").db("tasks").get("t1")
		.then(() => ({ code: "answered" }), (e) => ({ code: e.code, message: e.message }))`, jsString(gone)), &down)
	if down.Code != "unavailable" || !strings.Contains(down.Message, "cannot reach the handoff server") {
		t.Errorf("a server that is down: %s %q; want unavailable", down.Code, down.Message)
	}
}
