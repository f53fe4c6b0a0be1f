package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/handoff-run/handoff/client"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
)

// TestAgainstTheRealServer runs the client against the real HTTP API on a
// real store, so the two sides of the contract cannot drift apart.
func TestAgainstTheRealServer(t *testing.T) {
	ctx := context.Background()
	url := realServer(t)
	admin := client.New(url, "hnd_admin", client.WithPath("cli"))
	if id, err := admin.WhoAmI(ctx); err != nil || id.User != engine.AdminUser || !id.Admin {
		t.Fatalf("whoami = %+v, %v", id, err)
	}
	alice, err := admin.AddUser(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AddUser(ctx, "bob"); err != nil {
		t.Fatal(err)
	}
	c := client.New(url, alice.Token, client.WithPath("cli"))
	if info, err := c.CreateApp(ctx, "alice/jobs", false); err != nil || info.Owner != "alice" {
		t.Fatalf("create app = %+v, %v", info, err)
	}
	if err := c.AddMember(ctx, "alice/jobs", "bob", "viewer"); err != nil {
		t.Fatal(err)
	}
	if ms, err := c.Members(ctx, "alice/jobs"); err != nil || len(ms) != 1 || ms[0].User != "bob" {
		t.Fatalf("members = %+v, %v", ms, err)
	}

	id := "team/a job" // a slash and a space survive the trip
	w1, err := c.Put(ctx, "alice/jobs", "jobs", id, json.RawMessage(`{"status":"pending"}`), client.PutOptions{})
	if err != nil || !w1.OK || w1.ID != id {
		t.Fatalf("put = %+v, %v", w1, err)
	}
	w2, err := c.Put(ctx, "alice/jobs", "jobs", id, json.RawMessage(`{"status":"running"}`), client.PutOptions{IfRev: w1.Rev})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Put(ctx, "alice/jobs", "jobs", id, json.RawMessage(`{"status":"done"}`), client.PutOptions{IfRev: w1.Rev})
	if !errs.Is(err, errs.Conflict) {
		t.Fatalf("stale ifRev: %v, want conflict", err)
	}
	ex, err := c.Put(ctx, "alice/jobs", "jobs", "", json.RawMessage(`{"_id":"team/a job","status":"x"}`), client.PutOptions{IfAbsent: true})
	if err != nil || !ex.Existing || ex.Rev != w2.Rev {
		t.Fatalf("ifAbsent on an existing doc = %+v, %v", ex, err)
	}
	doc, err := c.Get(ctx, "alice/jobs", "jobs", id)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil || d["_id"] != id || d["_rev"] != w2.Rev || d["status"] != "running" {
		t.Fatalf("get = %s, %v", doc, err)
	}
	page, err := c.Query(ctx, "alice/jobs", "jobs", "status", json.RawMessage(`"running"`), 0, "")
	if err != nil || len(page.Docs) != 1 || page.Next != "" {
		t.Fatalf("query = %+v, %v", page, err)
	}

	// Bulk, then page through Scan two at a time.
	var docs []json.RawMessage
	for i := range 5 {
		docs = append(docs, json.RawMessage(fmt.Sprintf(`{"_id":"b%d","n":%d}`, i, i)))
	}
	docs = append(docs, json.RawMessage(`{"_id":"bad","_secret":1}`))
	res, err := c.WithPathLabel("import").Bulk(ctx, "alice/jobs", "jobs", docs, client.BulkOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res[:5] {
		if !r.OK || r.ID != fmt.Sprintf("b%d", i) || r.Rev == "" {
			t.Errorf("bulk result %d = %+v", i, r)
		}
	}
	if r := res[5]; r.OK || r.Error == nil || r.Error.Code != errs.Invalid {
		t.Errorf("bulk result of a reserved field = %+v", r)
	}
	var seen []string
	after := ""
	for {
		p, err := c.Scan(ctx, "alice/jobs", "jobs", 2, after)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range p.Docs {
			var v struct {
				ID string `json:"_id"`
			}
			json.Unmarshal(d, &v)
			seen = append(seen, v.ID)
		}
		if p.Next == "" {
			break
		}
		after = p.Next
	}
	if len(seen) != 6 {
		t.Errorf("scan saw %q, want 6 documents", seen)
	}

	if _, err := c.Delete(ctx, "alice/jobs", "jobs", id, w1.Rev); !errs.Is(err, errs.Conflict) {
		t.Fatalf("delete with a stale rev: %v", err)
	}
	if _, err := c.Delete(ctx, "alice/jobs", "jobs", id, w2.Rev); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "alice/jobs", "jobs", id); !errs.Is(err, errs.NotFound) {
		t.Fatalf("get after delete: %v", err)
	}
	h, err := c.History(ctx, "alice/jobs", "jobs", id)
	if err != nil || len(h) != 3 || !h[2].Deleted || h[0].Path != "cli" || h[0].Writer.User != "alice" {
		t.Fatalf("history = %+v, %v", h, err)
	}
	ch, err := c.Changes(ctx, "alice/jobs", "", 0, 0)
	if err != nil || len(ch.Changes) != 8 || ch.Last != ch.Changes[7].Seq {
		t.Fatalf("changes = %d entries, last %d, %v", len(ch.Changes), ch.Last, err)
	}
	if ch.Changes[2].Path != "import" {
		t.Errorf("a bulk write is in the ledger with path %q, want import", ch.Changes[2].Path)
	}
	if dbs, err := c.Databases(ctx, "alice/jobs"); err != nil || len(dbs) != 1 || dbs[0] != "jobs" {
		t.Fatalf("databases = %q, %v", dbs, err)
	}

	// Who may do what comes back as codes.
	bob := client.New(url, "", client.WithPath("cli"))
	if _, err := bob.Put(ctx, "alice/jobs", "jobs", "x", json.RawMessage(`{}`), client.PutOptions{}); !errs.Is(err, errs.Unauthorized) {
		t.Errorf("anonymous write: %v", err)
	}
	if _, err := c.Get(ctx, "alice/nope", "jobs", "x"); !errs.Is(err, errs.NotFound) {
		t.Errorf("unknown app: %v", err)
	}
	if _, err := client.New(url, "hnd_wrong").WhoAmI(ctx); !errs.Is(err, errs.Unauthorized) {
		t.Errorf("wrong token: %v", err)
	}
}
