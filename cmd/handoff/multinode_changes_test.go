package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/handoff-run/handoff/client"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/auth"
)

// TestNodesAgreeOnEveryChange runs two `handoff serve` nodes on one
// PostgreSQL database and makes each kind of change through node A: a
// deploy and a rollback, a member added, a grant given by a document, a
// token rotated, a device revoked. Each must take effect on node B, and
// B's changes feed must carry A's writes. Effects are polled for, with a
// deadline far above the milliseconds they take.
func TestNodesAgreeOnEveryChange(t *testing.T) {
	t.Parallel() // its own servers and database
	nodesAgree(t, []string{"--postgres", freshPostgres(t, 8)}, false)
}

// TestNodesAgreeOnEveryChangeTwoDatabases is the same on two databases:
// the app is placed in the second, and node A moves it to the first
// midway, so node B must follow it there.
func TestNodesAgreeOnEveryChangeTwoDatabases(t *testing.T) {
	t.Parallel() // its own servers and databases
	nodesAgree(t, []string{"--postgres", freshPostgres(t, 8), "--postgres", freshPostgres(t, 8)}, true)
}

func nodesAgree(t *testing.T, pgArgs []string, move bool) {
	env := "HANDOFF_ADMIN_TOKEN=two-nodes-admin-token-0123456789"
	const adminTok = "two-nodes-admin-token-0123456789"
	a := startServerArgs(t, t.TempDir(), pgArgs, env)
	b := startServerArgs(t, t.TempDir(), pgArgs, env)
	ctx := context.Background()
	adminA, adminB := client.New(a.url, adminTok), client.New(b.url, adminTok)
	alice, err := adminA.AddUser(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := adminA.AddUser(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	const app = "alice/crew"
	aliceA, aliceB := client.New(a.url, alice.Token), client.New(b.url, alice.Token)
	bobB := client.New(b.url, bob.Token)
	if move { // the first app goes to the first database, the next to the second
		if _, err := aliceA.CreateApp(ctx, "alice/first", false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := aliceA.CreateApp(ctx, app, false); err != nil {
		t.Fatal(err)
	}

	// B's feed, open before A writes anything.
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	seen := make(chan client.Entry, 100)
	go aliceB.Follow(fctx, app, "", 0, func(e client.Entry) error { seen <- e; return nil })

	onB := func(what string, ok func() error) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			err := ok()
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s, made through node A, did not take effect on node B: %v", what, err)
			}
			time.Sleep(10 * time.Millisecond) // polling for an outcome
		}
	}
	wantCode := func(err error, code errs.Code) error {
		var e *errs.Error
		if errors.As(err, &e) && e.Code == code {
			return nil
		}
		return fmt.Errorf("got %v, want %s", err, code)
	}

	// A deploy: v1 refuses documents without "ok"; then v2 opens every
	// write, then a rollback to v1 closes them again.
	v1, err := aliceA.Deploy(ctx, app, `export default function (doc) { if (!doc.ok) throw { forbidden: "not ok" }; return { channels: doc.channels || [] } }`, "")
	if err != nil {
		t.Fatal(err)
	}
	onB("a deploy", func() error {
		_, err := aliceB.Put(ctx, app, "docs", "probe", json.RawMessage(`{}`), client.PutOptions{})
		return wantCode(err, errs.Forbidden)
	})
	if _, err := aliceA.Deploy(ctx, app, `export default function (doc) { return { channels: doc.channels || [] } }`, ""); err != nil {
		t.Fatal(err)
	}
	onB("a second deploy", func() error {
		_, err := aliceB.Put(ctx, app, "docs", "probe", json.RawMessage(`{}`), client.PutOptions{})
		return err
	})
	if err := aliceA.Activate(ctx, app, v1.Version); err != nil {
		t.Fatal(err)
	}
	onB("a rollback", func() error {
		_, err := aliceB.Put(ctx, app, "docs", "probe2", json.RawMessage(`{}`), client.PutOptions{})
		return wantCode(err, errs.Forbidden)
	})

	if move {
		if from, err := aliceA.MoveApp(ctx, app, 0); err != nil || from != 1 {
			t.Fatalf("moving %s to database 0 = from %d, %v; want from 1", app, from, err)
		}
	}

	// A member, then a grant: bob reads the app, then a document.
	if _, err := aliceA.Put(ctx, app, "docs", "secret", json.RawMessage(`{"ok":true,"channels":["crew"]}`), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, before := bobB.Get(ctx, app, "docs", "secret")
	if err := aliceA.AddMember(ctx, app, "bob", "viewer"); err != nil {
		t.Fatal(err)
	}
	onB("a member added", func() error {
		// A member, but not granted the document's channel: refused for
		// that reason now, not for not being a member.
		_, err := bobB.Get(ctx, app, "docs", "secret")
		var e *errs.Error
		if errors.As(err, &e) && e.Code == errs.Forbidden && strings.Contains(e.Message, "none of its channels") {
			return nil
		}
		return fmt.Errorf("got %v (before: %v)", err, before)
	})
	if _, err := aliceA.Deploy(ctx, app, `export default function (doc) {
  if (!doc.ok) throw { forbidden: "not ok" };
  return { channels: doc.channels || [], grant: doc.crew ? { users: { bob: ["crew"] } } : undefined };
}`, ""); err != nil {
		t.Fatal(err)
	}
	onB("the deploy before the grant", func() error {
		_, err := aliceB.Put(ctx, app, "docs", "probe3", json.RawMessage(`{"ok":true,"crew":false}`), client.PutOptions{})
		return err
	})
	if _, err := aliceA.Put(ctx, app, "docs", "grant", json.RawMessage(`{"ok":true,"crew":true}`), client.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	onB("a grant", func() error {
		_, err := bobB.Get(ctx, app, "docs", "secret")
		return err
	})

	// A device revoked on A stops signing on B.
	key, err := auth.NewDeviceKey("bob", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.New(a.url, bob.Token).AddDevice(ctx, key, ""); err != nil {
		t.Fatal(err)
	}
	laptopB := client.New(b.url, "", client.WithDevice(key))
	onB("a device added", func() error { _, err := laptopB.WhoAmI(ctx); return err })
	if err := client.New(a.url, bob.Token).RevokeDevice(ctx, "laptop"); err != nil {
		t.Fatal(err)
	}
	onB("a device revoked", func() error {
		_, err := laptopB.WhoAmI(ctx)
		return wantCode(err, errs.Unauthorized)
	})

	// A token rotated on A stops working on B.
	if _, err := adminA.RotateToken(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	onB("a token rotated", func() error {
		_, err := bobB.WhoAmI(ctx)
		return wantCode(err, errs.Unauthorized)
	})
	if _, err := adminB.WhoAmI(ctx); err != nil {
		t.Fatalf("the admin on node B: %v", err)
	}

	// B's feed carried A's writes, in order.
	want := []string{"secret", "grant"}
	var got []string
	deadline := time.After(20 * time.Second)
	for len(got) < len(want) {
		select {
		case e := <-seen:
			if e.ID == "secret" || e.ID == "grant" {
				got = append(got, e.ID)
			}
		case <-deadline:
			t.Fatalf("node B's feed carried %v of node A's writes %v", got, want)
		}
	}
	if got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("node B's feed carried %v, want %v in that order", got, want)
	}
}
