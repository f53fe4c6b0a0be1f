package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/auth"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/internal/pgtest"
	"github.com/handoff-run/handoff/store/postgres"
)

// nodesAccessJS gates database d: a "grant" document gives carol its
// channels, any other document is in its channel.
const nodesAccessJS = `export function d(doc) {
	if (doc.kind === "grant") return { grant: { users: { carol: doc.channels } } };
	return { channels: [doc.channel] };
}`

// nodesBackendJS writes, for each document put in "in", a document of the
// same id in "out" naming the code version that ran and the secret KEY it
// read.
func nodesBackendJS(version string) string {
	return `export async function onChange(event, ctx) {
	if (event.dbName !== "in") return;
	await ctx.db.put({ _id: event.docId, code: "` + version + `", secret: ctx.secrets.KEY ?? null }, { db: "out" });
}`
}

// node is one handoff server: an engine on its own PostgreSQL store.
func newNode(t *testing.T, dbURL string) *engine.Engine {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := postgres.Open(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := engine.New(st, engine.Options{
		Code:      jsapp.New(jsapp.Options{}),
		SecretKey: testSecretKey,
	})
	t.Cleanup(e.Close) // before the store closes: cleanups run last first
	return e
}

// twoNodes starts two engines on one fresh PostgreSQL database, with the
// admin and the given users made through the first.
func twoNodes(t *testing.T, users ...string) (a, b *engine.Engine, admin engine.Actor) {
	t.Helper()
	dbURL := pgtest.Fresh(t, 8)
	a, b = newNode(t, dbURL), newNode(t, dbURL)
	ctx := context.Background()
	tok, err := a.Bootstrap(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if admin, err = a.Authenticate(ctx, tok); err != nil {
		t.Fatal(err)
	}
	for _, u := range users {
		if _, err := a.AddUser(ctx, admin, u); err != nil {
			t.Fatal(err)
		}
	}
	return a, b, admin
}

// eventually polls cond until it returns nil, or fails the test with its
// last error after the deadline.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %v", what, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestNodesSeeEachOthersChanges runs two engines on one PostgreSQL
// database, as two `handoff serve` nodes. Every change made through A (a
// deploy, a secret, a member's role, the public flag, a grant given by a
// document, a new app) reaches B's caches: B runs the new handlers with
// the new secrets and answers with the new permissions, as one node on
// the embedded store does.
func TestNodesSeeEachOthersChanges(t *testing.T) {
	t.Parallel()
	a, b, admin := twoNodes(t, "alice", "bob", "carol")
	ctx := context.Background()
	alice, bob, carol, anon := engine.Actor{User: "alice"}, engine.Actor{User: "bob"}, engine.Actor{User: "carol"}, engine.Actor{}
	const app = "alice/app"
	if _, err := a.CreateApp(ctx, admin, app, false); err != nil {
		t.Fatal(err)
	}
	if err := a.AddMember(ctx, alice, app, "bob", engine.RoleEditor); err != nil {
		t.Fatal(err)
	}
	if err := a.SetSecret(ctx, alice, app, "KEY", []byte("s1")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Deploy(ctx, alice, app, nodesAccessJS, nodesBackendJS("v1")); err != nil {
		t.Fatal(err)
	}
	grant, err := a.Put(ctx, alice, app, "d", "grant", []byte(`{"kind":"grant","channels":["c"]}`), appcode.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Put(ctx, alice, app, "d", "doc", []byte(`{"channel":"c"}`), appcode.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	stApp, err := a.Store().App(ctx, "alice", "app")
	if err != nil {
		t.Fatal(err)
	}
	// B's watcher keeps the latest seq of the app it heard of and, once
	// armed, reads as carol on B as each commit is announced.
	type read struct {
		seq int64
		err error
	}
	var bSeq atomic.Int64
	var armed atomic.Bool
	reads := make(chan read, 1000)
	b.Store().Watch(func(id, seq int64) {
		if id != stApp.ID {
			return
		}
		if armed.Load() {
			_, err := b.Get(ctx, carol, app, "d", "doc")
			select {
			case reads <- read{seq, err}:
			default:
			}
		}
		bSeq.Store(seq)
	})
	// synced waits until B heard of a commit made through A now. B's
	// store tells it of settings and grant changes in commit order with
	// the commits, so by then B heard of every change made before.
	synced := func() {
		t.Helper()
		w, err := a.Put(ctx, alice, app, "sync", "s", []byte(`{}`), appcode.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eventually(t, "B did not hear of a commit", func() error {
			if bSeq.Load() < w.Seq {
				return fmt.Errorf("B heard of seq %d, not %d", bSeq.Load(), w.Seq)
			}
			return nil
		})
	}

	// Only B runs handlers, so what they write tells which code and
	// which secrets B holds.
	if err := b.Start(ctx); err != nil {
		t.Fatal(err)
	}

	// handled puts a document in "in" through A and waits for B's
	// handler to answer it in "out".
	n := 0
	handled := func() (code, secret string) {
		t.Helper()
		n++
		id := fmt.Sprint("j", n)
		if _, err := a.Put(ctx, alice, app, "in", id, []byte(`{}`), appcode.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		var out struct{ Code, Secret string }
		eventually(t, "B's onChange did not handle "+id, func() error {
			raw, err := a.Get(ctx, alice, app, "out", id)
			if err == nil {
				err = json.Unmarshal(raw, &out)
			}
			return err
		})
		return out.Code, out.Secret
	}
	// until runs handled until its answer is the one wanted: B may take
	// a moment to hear of A's change, but it must hear of it.
	until := func(what, code, secret string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			c, s := handled()
			if c == code && s == secret {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: B's handler still runs code %s with secret %q; want %s with %q", what, c, s, code, secret)
			}
		}
	}
	until("the first deploy", "v1", "s1")

	// B has read everything once, so its caches are warm.
	if _, err := b.Get(ctx, bob, app, "in", "j1"); err != nil {
		t.Fatalf("bob, an editor, reads on B: %v", err)
	}
	if _, err := b.Put(ctx, bob, app, "scratch", "x", []byte(`{}`), appcode.PutOptions{}); err != nil {
		t.Fatalf("bob, an editor, writes on B: %v", err)
	}
	if _, err := b.Get(ctx, carol, app, "d", "doc"); err != nil {
		t.Fatalf("carol, granted c, reads on B: %v", err)
	}
	if _, err := b.Get(ctx, anon, app, "in", "j1"); !errs.Is(err, errs.Unauthorized) && !errs.Is(err, errs.Forbidden) {
		t.Fatalf("anonymous reads the private app on B: %v", err)
	}

	// A deploys: B runs the new onChange.
	if _, err := a.Deploy(ctx, alice, app, nodesAccessJS, nodesBackendJS("v2")); err != nil {
		t.Fatal(err)
	}
	until("after A deployed v2", "v2", "s1")

	// A changes the secret: B's handlers read the new value.
	if err := a.SetSecret(ctx, alice, app, "KEY", []byte("s2")); err != nil {
		t.Fatal(err)
	}
	until("after A set the secret", "v2", "s2")

	// A rolls back: B runs the old code again.
	if err := a.Rollback(ctx, alice, app, 1); err != nil {
		t.Fatal(err)
	}
	until("after A rolled back", "v1", "s2")

	// A takes bob's editor role: B refuses his writes, and his reads once
	// he is no member at all.
	if err := a.AddMember(ctx, alice, app, "bob", "viewer"); err != nil {
		t.Fatal(err)
	}
	if err := a.RemoveMember(ctx, alice, app, "bob", engine.RoleEditor); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B lets bob write after A took his editor role", func() error {
		_, err := b.Put(ctx, bob, app, "scratch", "x2", []byte(`{}`), appcode.PutOptions{})
		if errs.Is(err, errs.Forbidden) {
			return nil
		}
		return fmt.Errorf("bob's write gave %v", err)
	})
	if _, err := b.Get(ctx, bob, app, "in", "j1"); err != nil {
		t.Fatalf("bob, still a member, reads on B: %v", err)
	}
	if err := a.RemoveMember(ctx, alice, app, "bob", ""); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B lets bob read after A removed him", func() error {
		_, err := b.Get(ctx, bob, app, "in", "j1")
		if errs.Is(err, errs.Forbidden) {
			return nil
		}
		return fmt.Errorf("bob's read gave %v", err)
	})

	// A makes the app public: B lets anonymous readers in.
	if err := a.SetPublic(ctx, alice, app, true); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B refuses anonymous readers of the app A made public", func() error {
		_, err := b.Get(ctx, anon, app, "in", "j1")
		return err
	})

	// A revokes carol's grant by a write: by the time B's feed hears of
	// the commit, B's permission check no longer lets her read. First B
	// hears of every change so far, so nothing else drops its caches.
	synced()
	if _, err := b.Get(ctx, carol, app, "d", "doc"); err != nil {
		t.Fatalf("carol, granted c, reads on B: %v", err) // and B caches her grants
	}
	armed.Store(true)
	w, err := a.Put(ctx, alice, app, "d", "grant", []byte(`{"kind":"grant","channels":[]}`), appcode.PutOptions{IfRev: grant.Rev})
	if err != nil {
		t.Fatal(err)
	}
	for heard := false; !heard; {
		select {
		case r := <-reads:
			if r.seq < w.Seq {
				continue
			}
			if !errs.Is(r.err, errs.Forbidden) {
				t.Fatalf("when B heard of the revoke, carol's read on B gave %v; want forbidden", r.err)
			}
			heard = true
		case <-time.After(15 * time.Second):
			t.Fatal("B did not hear of the revoke")
		}
	}
	armed.Store(false)

	// A revokes alice's device: B refuses what it signs.
	k, err := auth.NewDeviceKey("alice", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddDevice(ctx, alice, "laptop", k.Public(), ""); err != nil {
		t.Fatal(err)
	}
	signed := func(e *engine.Engine) error {
		cred := strings.TrimPrefix(k.Sign("GET", "/v1/apps", nil, time.Now()), auth.SchemeDevice+" ")
		_, err := e.AuthenticateDevice(ctx, cred, "GET", "/v1/apps", nil)
		return err
	}
	if err := signed(b); err != nil {
		t.Fatalf("B refuses alice's device: %v", err)
	}
	if err := a.RevokeDevice(ctx, alice, "laptop"); err != nil {
		t.Fatal(err)
	}
	if err := signed(b); !errs.Is(err, errs.Unauthorized) {
		t.Fatalf("B accepts a device A revoked: %v", err)
	}

	// A creates and deploys an app B never saw: B runs its handlers,
	// onChange and the scheduled one.
	const later = "alice/later"
	if _, err := a.CreateApp(ctx, alice, later, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Deploy(ctx, alice, later, "", `export const config = { scheduled: { interval: "1s" } };
export async function onChange(event, ctx) {
	if (event.dbName === "in") await ctx.db.put({ _id: event.docId }, { db: "out" });
}
export async function scheduled(event, ctx) {
	await ctx.db.put({ _id: "tick-" + event.scheduledTime }, { db: "ticks" });
}`); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Put(ctx, alice, later, "in", "x", []byte(`{}`), appcode.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "B did not run onChange of the app A deployed", func() error {
		_, err := a.Get(ctx, alice, later, "out", "x")
		return err
	})
	eventually(t, "B did not run the scheduled handler of the app A deployed", func() error {
		p, err := a.Scan(ctx, alice, later, "ticks", 1, "")
		if err == nil && len(p.Docs) == 0 {
			err = fmt.Errorf("no tick")
		}
		return err
	})
}

// TestNodesFeedAcrossNodes: a reader following an app's changes on node B
// sees every commit made on node A, once, in commit order, and only what
// it may read.
func TestNodesFeedAcrossNodes(t *testing.T) {
	t.Parallel()
	a, b, admin := twoNodes(t, "alice", "carol")
	ctx := context.Background()
	alice, carol := engine.Actor{User: "alice"}, engine.Actor{User: "carol"}
	const app = "alice/feed"
	if _, err := a.CreateApp(ctx, admin, app, false); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Deploy(ctx, alice, app, nodesAccessJS, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Put(ctx, alice, app, "d", "grant", []byte(`{"kind":"grant","channels":["c"]}`), appcode.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	feeds := map[string]*engine.Feed{}
	for name, who := range map[string]engine.Actor{"alice": alice, "carol": carol} {
		f, err := b.Follow(ctx, who, app, "d", 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		feeds[name] = f
	}
	// 40 writes from 4 goroutines on A; every other one in channel c.
	const n = 40
	errc := make(chan error, 4)
	for g := range 4 {
		go func() {
			for i := g; i < n; i += 4 {
				body := fmt.Sprintf(`{"channel":%q,"i":%d}`, map[bool]string{true: "c", false: "x"}[i%2 == 0], i)
				if _, err := a.Put(ctx, alice, app, "d", fmt.Sprint("doc", i), []byte(body), appcode.PutOptions{}); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}()
	}
	for range 4 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	read := func(f *engine.Feed, want int) []engine.Entry {
		t.Helper()
		var got []engine.Entry
		deadline := time.Now().Add(15 * time.Second)
		for len(got) < want && time.Now().Before(deadline) {
			c, err := f.Next(ctx, 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, c.Changes...)
		}
		return got
	}
	all := read(feeds["alice"], n+1)
	if len(all) != n+1 {
		t.Fatalf("alice's feed on B gave %d changes, want %d", len(all), n+1)
	}
	seen := map[string]bool{}
	for i, e := range all {
		if i > 0 && e.Seq <= all[i-1].Seq {
			t.Fatalf("feed out of order: seq %d after %d", e.Seq, all[i-1].Seq)
		}
		if seen[e.ID] {
			t.Fatalf("%s delivered twice", e.ID)
		}
		seen[e.ID] = true
	}
	mine := read(feeds["carol"], n/2)
	if len(mine) != n/2 {
		t.Fatalf("carol's feed on B gave %d changes, want the %d in channel c", len(mine), n/2)
	}
	for _, e := range mine {
		var d struct{ Channel string }
		if err := json.Unmarshal(e.Doc, &d); err != nil || d.Channel != "c" {
			t.Fatalf("carol saw %s (%s), outside her channel", e.ID, e.Doc)
		}
	}
}

// TestNodesAcceptASignedRequestOnce: a device-signed request used on one
// node is refused by every other, as one node refuses it the second time.
func TestNodesAcceptASignedRequestOnce(t *testing.T) {
	t.Parallel()
	a, b, _ := twoNodes(t, "alice")
	ctx := context.Background()
	k, err := auth.NewDeviceKey("alice", "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.AddDevice(ctx, engine.Actor{User: "alice"}, "laptop", k.Public(), ""); err != nil {
		t.Fatal(err)
	}
	cred := strings.TrimPrefix(k.Sign("GET", "/v1/apps", nil, time.Now()), auth.SchemeDevice+" ")
	if _, err := a.AuthenticateDevice(ctx, cred, "GET", "/v1/apps", nil); err != nil {
		t.Fatalf("A refuses a fresh signed request: %v", err)
	}
	for name, e := range map[string]*engine.Engine{"A": a, "B": b} {
		if _, err := e.AuthenticateDevice(ctx, cred, "GET", "/v1/apps", nil); !errs.Is(err, errs.Unauthorized) {
			t.Errorf("%s accepts a signed request used on A: %v", name, err)
		}
	}
	fresh := strings.TrimPrefix(k.Sign("GET", "/v1/apps", nil, time.Now()), auth.SchemeDevice+" ")
	if _, err := b.AuthenticateDevice(ctx, fresh, "GET", "/v1/apps", nil); err != nil {
		t.Fatalf("B refuses a newly signed request: %v", err)
	}
}

// TestNodesWriteOnStaleHeads: a node remembers the heads it wrote and
// decides its next writes on them without reading, but another node may
// have moved them since. Whatever the stale head would have decided (an
// ifRev conflict, an existing document, not found, a refusal by
// access.js, or a plain update on an old base), the write is decided on
// the real head, as on one node.
func TestNodesWriteOnStaleHeads(t *testing.T) {
	t.Parallel()
	a, b, admin := twoNodes(t, "alice")
	ctx := context.Background()
	alice := engine.Actor{User: "alice"}
	const app = "alice/app"
	if _, err := a.CreateApp(ctx, admin, app, false); err != nil {
		t.Fatal(err)
	}
	// A locked document can only be deleted.
	if _, err := a.Deploy(ctx, alice, app, `export function d(doc, was) {
	if (!doc._deleted && was && was.locked) throw { forbidden: "locked" };
	return { channels: ["c"] };
}`, ""); err != nil {
		t.Fatal(err)
	}
	put := func(e *engine.Engine, body string, o appcode.PutOptions) (appcode.WriteResult, error) {
		return e.Put(ctx, alice, app, "d", "x", []byte(body), o)
	}
	mustPut := func(e *engine.Engine, body string, o appcode.PutOptions) appcode.WriteResult {
		t.Helper()
		r, err := put(e, body, o)
		if err != nil {
			t.Fatalf("put %s: %v", body, err)
		}
		return r
	}
	r1 := mustPut(a, `{"n":1}`, appcode.PutOptions{})
	r2 := mustPut(b, `{"n":2}`, appcode.PutOptions{IfRev: r1.Rev})
	// A last wrote r1; the real head is r2.
	r3 := mustPut(a, `{"n":3}`, appcode.PutOptions{IfRev: r2.Rev})
	if _, err := put(a, `{"n":0}`, appcode.PutOptions{IfRev: r2.Rev}); errs.CodeOf(err) != errs.Conflict {
		t.Fatalf("put on the stale ifRev %s = %v, want conflict", r2.Rev, err)
	}
	if _, err := b.Delete(ctx, alice, app, "d", "x", r3.Rev); err != nil {
		t.Fatal(err)
	}
	// A last wrote r3, live; the document is deleted.
	r5 := mustPut(a, `{"n":5}`, appcode.PutOptions{IfAbsent: true})
	if r5.Existing || !strings.HasPrefix(r5.Rev, "5-") {
		t.Fatalf("ifAbsent put after another node's delete = %+v, want a new rev 5-…", r5)
	}
	r6 := mustPut(b, `{"n":6}`, appcode.PutOptions{})
	// A last wrote r5; an update without ifRev goes on top of r6.
	r7 := mustPut(a, `{"n":7}`, appcode.PutOptions{})
	if !strings.HasPrefix(r7.Rev, "7-") || r7.Seq != r6.Seq+1 {
		t.Fatalf("update after another node's = %+v, want rev 7-… at seq %d", r7, r6.Seq+1)
	}
	if _, err := b.Delete(ctx, alice, app, "d", "x", ""); err != nil {
		t.Fatal(err)
	}
	// A last wrote r7, live; the document is deleted.
	if _, err := a.Delete(ctx, alice, app, "d", "x", ""); errs.CodeOf(err) != errs.NotFound {
		t.Fatalf("delete of a document another node deleted = %v, want not_found", err)
	}
	r9 := mustPut(a, `{"locked":true}`, appcode.PutOptions{})
	if _, err := put(a, `{"n":10}`, appcode.PutOptions{}); errs.CodeOf(err) != errs.Forbidden {
		t.Fatalf("put on a locked document = %v, want forbidden", err)
	}
	if _, err := b.Delete(ctx, alice, app, "d", "x", r9.Rev); err != nil {
		t.Fatal(err)
	}
	// A last wrote r9, locked; the document is deleted, so A may write it.
	mustPut(a, `{"n":11}`, appcode.PutOptions{})
	hist, err := b.History(ctx, alice, app, "d", "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 11 {
		t.Fatalf("history has %d revisions, want 11: %+v", len(hist), hist)
	}
}
