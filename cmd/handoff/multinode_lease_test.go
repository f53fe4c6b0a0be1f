package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/client"
	"github.com/handoff-run/handoff/examples"
)

// TestKilledNodesJobsComeBack runs examples/jobs as it is on two `handoff
// serve` nodes sharing PostgreSQL, kills one with SIGKILL while jobs run
// on both, and checks that every job is done soon after: the dead node's
// event leases (30 s) stop being renewed and run out, and the example's
// sweep (every 5 s) brings back the jobs whose own lease (30 s) it held.
// The deadline is generous; the assertion is that all are done.
func TestKilledNodesJobsComeBack(t *testing.T) {
	t.Parallel() // its own servers, data and database; it mostly waits on them
	if testing.Short() {
		t.Skip("runs two servers for a minute")
	}
	const (
		app  = "load/jobs"
		jobs = 200
	)
	pg := freshPostgres(t, 12)
	code := t.TempDir()
	for _, name := range []string{"access.js", "backend.js"} {
		src, err := examples.Jobs.ReadFile("jobs/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(code, name), src, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := "HANDOFF_ADMIN_TOKEN=killed-node-admin-token-0123456789"
	data1 := t.TempDir()
	victim := startServerArgs(t, data1, []string{"--postgres", pg, "--app", app + "=" + code}, env)
	tok, err := os.ReadFile(filepath.Join(data1, "load.token"))
	if err != nil {
		t.Fatalf("the owner's token: %v\n%s", err, victim.log())
	}
	token := strings.TrimSpace(string(tok))
	waitUntil(t, 30*time.Second, "the app's code is live", func() bool {
		return strings.Contains(victim.log(), "deployed the app's code")
	})
	survivor := startServerArgs(t, t.TempDir(), []string{"--postgres", pg}, env)
	ctx := context.Background()
	cs := []*client.Client{client.New(victim.url, token), client.New(survivor.url, token)}
	for i := range jobs {
		body := fmt.Appendf(nil, `{"kind":"job","status":"pending","attempts":0,"input":"job %d","delayMs":3000}`, i)
		if _, err := cs[i%2].Put(ctx, app, "jobs", fmt.Sprintf("job-%04d", i), body, client.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Kill the first node while runs are in flight.
	c := cs[1]
	waitUntil(t, 30*time.Second, "runs in flight", func() bool {
		evs, err := c.Events(ctx, app, false, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		running := 0
		for _, ev := range evs {
			if ev.Running {
				running++
			}
		}
		return running > 10
	})
	if err := victim.cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	<-victim.done
	killed := time.Now()
	waitUntil(t, 3*time.Minute, "every job done and the outbox empty", func() bool {
		evs, err := c.Events(ctx, app, false, 0, 1)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs) == 0 && countOpenJobs(t, c, app) == 0
	})
	t.Logf("every job done %v after the kill", time.Since(killed).Round(time.Second))
	if dead, err := c.Events(ctx, app, true, 0, 10); err != nil || len(dead) > 0 {
		t.Fatalf("dead events after the drain: %v %+v", err, dead)
	}
}
