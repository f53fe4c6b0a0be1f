package server

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/handoff-run/handoff/internal/engine"
)

// TestJobsPage drives examples/jobs' own page in Chromium as a visitor
// would: sign up, queue a job and watch it go pending → running → done
// live, see the transition table refuse a visitor's move in its own
// words, add a passkey, sign out (which ends the token), and sign in
// again with the passkey.
func TestJobsPage(t *testing.T) {
	t.Parallel()
	cheapPasswords()
	s := newStack(t, "")
	files := map[string][]byte{}
	for _, name := range []string{"index.html", "board.js", "board.css"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "examples", "jobs", "public", name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	if _, err := s.e.DeployCode(s.ctx, aliceCLI, jobsApp, engine.Code{Access: s.accessJS, Backend: readExample(t, "backend.js"), Files: files}); err != nil {
		t.Fatal(err)
	}
	if err := s.e.SetSignup(s.ctx, aliceCLI, jobsApp, engine.SignupOpen); err != nil {
		t.Fatal(err)
	}
	port := s.ts.URL[strings.LastIndex(s.ts.URL, ":"):]

	b := newBrowser(t)
	b.open("http://jobs--alice.localhost" + port + "/")
	b.virtualAuthenticator()
	b.waitJS("the sign-in form", `!document.querySelector("#sign-in").hidden`)
	b.do("sign up", chromedp.SendKeys(`#sign-in-form input[name="name"]`, "sam"),
		chromedp.SendKeys(`#sign-in-form input[name="password"]`, "a long password"))
	b.click("#sign-up-button")
	b.waitText("#who-name", "Signed in as sam")

	// Record every column the new job's card shows up in.
	b.eval(`(() => {
		window.seen = [];
		const look = () => {
			const li = [...document.querySelectorAll(".columns li")].find((li) => li.querySelector(".input")?.textContent === "four words to count");
			const status = li?.closest("section").dataset.status;
			if (status && window.seen[window.seen.length - 1] !== status) window.seen.push(status);
		};
		new MutationObserver(look).observe(document.querySelector(".columns"), { subtree: true, childList: true });
		return true;
	})()`, nil)
	s.gate.hold() // the job waits in pending until the test lets its handler run
	b.do("queue a job", chromedp.SendKeys(`#queue input[name="input"]`, "four words to count"),
		chromedp.Click(`#queue input[name="slow"]`))
	b.click(`#queue button[type="submit"]`)
	b.waitText(`section[data-status="pending"] ol`, "four words to count")

	// The visitor tries a move only the handlers may make: refused, with
	// access.js's reason on the page, and the job still pending.
	b.click(`section[data-status="pending"] li button`)
	b.waitText("#message", "Refused: ")
	var refusal string
	b.eval(`document.querySelector("#message").textContent`, &refusal)
	if !strings.Contains(refusal, "no transition from pending to done") {
		t.Errorf("the refusal reads %q, want access.js's reason", refusal)
	}

	s.gate.release()
	b.waitText(`section[data-status="done"] ol`, "4 words")
	var seen []string
	b.eval(`window.seen`, &seen)
	if !slices.Equal(seen, []string{"pending", "running", "done"}) {
		t.Fatalf("the job's card showed up in %v, want pending, running, done", seen)
	}

	// A passkey, then sign-out: the token the page held no longer works.
	b.click("#add-passkey")
	b.waitText("#message", "Passkey added")
	var token string
	b.eval(`localStorage.getItem("handoff.visitor:alice/jobs")`, &token)
	if token == "" {
		t.Fatal("the page keeps no visitor token in its site's storage")
	}
	b.click("#sign-out")
	b.waitJS("the sign-in form again", `!document.querySelector("#sign-in").hidden`)
	req, _ := http.NewRequest("GET", s.ts.URL+"/v1/whoami", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the signed-out token answers %d, want 401", res.StatusCode)
	}

	b.click("#passkey-button")
	b.waitText("#who-name", "Signed in as sam")
	b.waitText(`section[data-status="done"] ol`, "4 words") // the board is live again
	var who string
	b.eval(`import("/_handoff/client/visitor.js").then((h) => h.connect().whoami()).then((w) => w.user)`, &who)
	if who != "sam@jobs--alice" {
		t.Fatalf("after the passkey sign-in the page acts as %q", who)
	}
}
