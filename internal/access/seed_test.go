package access_test

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
)

// seedPath is the product document whose sample access.js must run on
// handoff unchanged. It is read at test time, never copied here.
const seedPath = "/work/shared/seed/doc-status-state-machines.txt"

// seedAccessJS extracts the sample: from the line starting with
// "jsexport function jobs" (the leading "js" is the code block's
// language tag) up to the "backend.js" heading.
func seedAccessJS(t *testing.T) string {
	t.Helper()
	f, err := os.Open(seedPath)
	if os.IsNotExist(err) {
		t.Skip("seed not found at " + seedPath)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.HasPrefix(line, "jsexport function jobs"):
			in = true
			line = strings.TrimPrefix(line, "js")
		case in && strings.HasPrefix(line, "backend.js"):
			return b.String()
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	t.Fatalf("%s has no access.js sample between `jsexport function jobs` and the backend.js heading", seedPath)
	return ""
}

func TestSeedSampleRunsUnchanged(t *testing.T) {
	t.Parallel()
	src := seedAccessJS(t)
	en := newEnv(t)
	const app = "alice/seed"
	en.app(app, false)
	en.member(app, "bob", "viewer")
	if ci := en.deploy(app, src); ci.Version != 1 {
		t.Fatalf("deploy = %+v", ci)
	}
	const pending = `{"type":"job","status":"pending","attempts":0,"input":"https://example.com/a.jpg"}`
	en.put(bob, app, "jobs", "j1", pending)
	claim := fmt.Sprintf(`{"type":"job","status":"running","attempts":1,"input":"https://example.com/a.jpg","claimId":"c1","leaseUntil":%d}`,
		time.Now().Add(time.Minute).UnixMilli())

	// A client cannot claim; only onChange can.
	_, err := en.try(alice, app, "jobs", "j1", claim)
	ee := refusal(t, err, "client claim")
	if ee.Code != errs.Forbidden || !strings.Contains(ee.Reason, "onChange") {
		t.Fatalf("client claim: %v (reason %q), want forbidden naming onChange", err, ee.Reason)
	}
	head := en.get(alice, app, "jobs", "j1")
	r := en.put(onChange(bob), app, "jobs", "j1", claim)
	if got := en.get(bob, app, "jobs", "j1"); got["status"] != "running" || got["_rev"] != r.Rev || got["_rev"] == head["_rev"] {
		t.Fatalf("after the onChange claim: %v", got)
	}
	// Its own refusals keep their reasons.
	_, err = en.try(bob, app, "jobs", "j2", `{"type":"job","status":"running","attempts":0}`)
	if ee := refusal(t, err, "new running job"); ee.Code != errs.Forbidden || ee.Reason == "" {
		t.Fatalf("new running job: %v", err)
	}
	_, err = en.try(anon, app, "jobs", "j3", pending)
	if ee := refusal(t, err, "anonymous"); ee.Code != errs.Forbidden || ee.Reason == "" {
		t.Fatalf("anonymous job: %v", err)
	}
}
