package access_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

// grantJS lets the owner write documents that carry their own channels,
// grants and members, so each test states exactly what is granted.
const grantJS = `
export function docs(doc, oldDoc, user, ctx) {
  ctx.requireOwner();
  return { channels: doc.channels, grant: doc.grant, members: doc.members };
}
`

const notReadable = "no channel of this document is granted to you"

// reader is what one actor must see of the "docs" database.
type reader struct {
	who  engine.Actor
	sees []string // sorted ids of kind "doc"
}

// checkReads checks every read path for every reader: Get of each id,
// Query and Scan (several page sizes), Changes and History.
func (en *env) checkReads(app string, all []string, readers []reader) {
	en.t.Helper()
	t := en.t
	for _, r := range readers {
		name := r.who.User
		if name == "" {
			name = "anonymous"
		}
		for _, id := range all {
			raw, err := en.e.Get(en.ctx, r.who, app, "docs", id)
			if slices.Contains(r.sees, id) {
				if err != nil {
					t.Fatalf("%s Get %s: %v, want the document", name, id, err)
				}
				if got := object(t, raw)["_id"]; got != id {
					t.Fatalf("%s Get %s = %s", name, id, raw)
				}
			} else {
				wantForbidden(t, err, notReadable, name+" Get "+id)
			}
			h, err := en.e.History(en.ctx, r.who, app, "docs", id)
			if slices.Contains(r.sees, id) {
				if err != nil || len(h) == 0 {
					t.Fatalf("%s History %s: %v %v", name, id, h, err)
				}
			} else if err == nil {
				t.Fatalf("%s History %s = %v, want it refused", name, id, h)
			}
		}
		for _, limit := range []int{1, 2, 3, 100} {
			got := en.pageAll(r.who, app, limit, true)
			if !slices.Equal(got, r.sees) {
				t.Fatalf("%s Query (limit %d) = %q, want %q", name, limit, got, r.sees)
			}
		}
		everything := r.who.User == "alice" || r.who.Admin
		got := en.pageAll(r.who, app, 2, false)
		if everything {
			got = onlyDocs(got) // the owner also scans the grant documents
		}
		if !slices.Equal(got, r.sees) {
			t.Fatalf("%s Scan = %q, want %q", name, got, r.sees)
		}
		for _, db := range []string{"", "docs"} {
			c, err := en.e.Changes(en.ctx, r.who, app, db, 0, 1000)
			if err != nil {
				t.Fatalf("%s Changes: %v", name, err)
			}
			var changed []string
			for _, e := range c.Changes {
				if !slices.Contains(changed, e.ID) {
					changed = append(changed, e.ID)
				}
			}
			if everything {
				changed = onlyDocs(changed)
			}
			if !slices.Equal(sorted(changed), r.sees) {
				t.Fatalf("%s Changes(%q) list %q, want %q", name, db, sorted(changed), r.sees)
			}
			if seq := en.lastSeq(app); c.Last != seq {
				t.Fatalf("%s Changes: last %d, want %d", name, c.Last, seq)
			}
		}
	}
}

// onlyDocs keeps the ids of kind "doc" (they start with "d").
func onlyDocs(ids []string) []string {
	var out []string
	for _, id := range ids {
		if id[0] == 'd' {
			out = append(out, id)
		}
	}
	return out
}

// pageAll pages through Query (kind == "doc") or Scan with limit, and
// checks that no page is short while there is more to come.
func (en *env) pageAll(a engine.Actor, app string, limit int, query bool) []string {
	en.t.Helper()
	var out []string
	after := ""
	for range 1000 {
		var p appcode.Page
		var err error
		if query {
			p, err = en.e.Query(en.ctx, a, app, "docs", "kind", json.RawMessage(`"doc"`), limit, after)
		} else {
			p, err = en.e.Scan(en.ctx, a, app, "docs", limit, after)
		}
		if err != nil {
			en.t.Fatalf("%s page after %q: %v", a.User, after, err)
		}
		out = append(out, ids(en.t, p.Docs)...)
		if p.Next == "" {
			return out
		}
		if len(p.Docs) != limit {
			en.t.Fatalf("%s: a page of %d documents (limit %d) with more to come", a.User, len(p.Docs), limit)
		}
		after = p.Next
	}
	en.t.Fatal("pagination does not end")
	return nil
}

func TestReadsFollowChannelsAndGrants(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/reads"
	en.app(app, false)
	en.member(app, "bob", "viewer")
	en.member(app, "carol", "staff")
	en.member(app, "dave", "viewer")
	en.deploy(app, grantJS)

	put := func(id, body string) { en.put(alice, app, "docs", id, body) }
	put("d-bob", `{"kind":"doc","channels":["cb"]}`)
	put("d-staff", `{"kind":"doc","channels":["cs"]}`)
	put("d-rev", `{"kind":"doc","channels":["cr"]}`)
	put("d-pub", `{"kind":"doc","channels":["cp"]}`)
	put("d-none", `{"kind":"doc","channels":[]}`)
	put("d-nokey", `{"kind":"doc"}`)
	put("d-multi", `{"kind":"doc","channels":["cx","cb"]}`)
	put("g-users", `{"kind":"grant","grant":{"users":{"bob":["cb"]}}}`)
	put("g-users2", `{"kind":"grant","grant":{"users":{"bob":["cb"],"carol":["cz"]}}}`)
	put("g-roles", `{"kind":"grant","grant":{"roles":{"staff":["cs"],"reviewer":["cr"]}}}`)
	put("g-members", `{"kind":"grant","members":{"reviewer":["dave"]}}`)
	put("g-public", `{"kind":"grant","grant":{"public":["cp"]}}`)
	all := []string{"d-bob", "d-multi", "d-nokey", "d-none", "d-pub", "d-rev", "d-staff"}

	en.checkReads(app, all, []reader{
		{alice, all},
		{admin, all},
		{bob, []string{"d-bob", "d-multi", "d-pub"}},
		{carol, []string{"d-pub", "d-staff"}},
		{dave, []string{"d-pub", "d-rev"}},
	})
	// A private app: no reads for non-members and anonymous readers.
	_, err := en.e.Get(en.ctx, erin, app, "docs", "d-pub")
	wantForbidden(t, err, "not a member", "non-member Get")
	_, err = en.e.Get(en.ctx, anon, app, "docs", "d-pub")
	wantCode(t, err, errs.Unauthorized, "anonymous Get")
	_, err = en.e.Changes(en.ctx, anon, app, "", 0, 10)
	wantCode(t, err, errs.Unauthorized, "anonymous Changes")

	// Grants are the union over live documents: bob keeps cb while one
	// granting document lives, and loses it with the last one.
	en.del(alice, app, "docs", "g-users")
	en.checkReads(app, all, []reader{{bob, []string{"d-bob", "d-multi", "d-pub"}}})
	put("g-users2", `{"kind":"grant","grant":{"users":{"carol":["cz"]}}}`)
	en.checkReads(app, all, []reader{{bob, []string{"d-pub"}}})
	put("g-users", `{"kind":"grant","grant":{"users":{"bob":["cb"]}}}`)
	en.checkReads(app, all, []reader{{bob, []string{"d-bob", "d-multi", "d-pub"}}})
	en.del(alice, app, "docs", "g-users")
	en.checkReads(app, all, []reader{{bob, []string{"d-pub"}}})

	// Updating the granting document to drop a role's grant revokes it.
	put("g-roles", `{"kind":"grant","grant":{"roles":{"reviewer":["cr"]}}}`)
	en.checkReads(app, all, []reader{
		{carol, []string{"d-pub"}},
		{dave, []string{"d-pub", "d-rev"}},
	})
	// Deleting the document that gave dave the role revokes what the role reads.
	en.del(alice, app, "docs", "g-members")
	en.checkReads(app, all, []reader{{dave, []string{"d-pub"}}})
	// Public grants go the same way.
	put("g-public", `{"kind":"grant"}`)
	en.checkReads(app, all, []reader{
		{bob, nil}, {carol, nil}, {dave, nil}, {alice, all},
	})

	// A document moved into a granted channel: History shows bob only the
	// revisions he may read.
	put("g-users", `{"kind":"grant","grant":{"users":{"bob":["cb"]}}}`)
	put("d-move", `{"kind":"doc","channels":["cx"],"step":1}`)
	put("d-move", `{"kind":"doc","channels":["cb"],"step":2}`)
	put("d-move", `{"kind":"doc","channels":["cx"],"step":3}`)
	put("d-move", `{"kind":"doc","channels":["cb"],"step":4}`)
	h, err := en.e.History(en.ctx, bob, app, "docs", "d-move")
	if err != nil {
		t.Fatal(err)
	}
	var steps []float64
	for _, e := range h {
		steps = append(steps, object(t, e.Doc)["step"].(float64))
	}
	if !slices.Equal(steps, []float64{2, 4}) {
		t.Fatalf("bob's History of d-move shows steps %v, want [2 4]", steps)
	}
	if h, _ := en.e.History(en.ctx, alice, app, "docs", "d-move"); len(h) != 4 {
		t.Fatalf("the owner's History of d-move has %d revisions", len(h))
	}
	// A delete is seen by whoever could read the document.
	en.del(alice, app, "docs", "d-move")
	c, err := en.e.Changes(en.ctx, bob, app, "docs", 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if last := c.Changes[len(c.Changes)-1]; last.ID != "d-move" || !last.Deleted {
		t.Fatalf("bob's last change = %+v, want the delete of d-move", last)
	}
}

func TestPublicAppReads(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/open"
	en.app(app, true)
	en.member(app, "carol", "viewer")
	en.deploy(app, grantJS)
	put := func(id, body string) { en.put(alice, app, "docs", id, body) }
	put("d-open", `{"kind":"doc","channels":["open"]}`)
	put("d-closed", `{"kind":"doc","channels":["closed"]}`)
	put("d-none", `{"kind":"doc","channels":[]}`)
	put("g-public", `{"kind":"grant","grant":{"public":["open"]}}`)
	put("g-bob", `{"kind":"grant","grant":{"users":{"bob":["closed"]}}}`)
	all := []string{"d-closed", "d-none", "d-open"}
	en.checkReads(app, all, []reader{
		{anon, []string{"d-open"}},
		{erin, []string{"d-open"}},
		{carol, []string{"d-open"}},
		{bob, []string{"d-closed", "d-open"}},
		{alice, all},
	})
	// Anonymous readers never get user or role grants, only public ones.
	put("g-public", `{"kind":"grant"}`)
	en.checkReads(app, all, []reader{{anon, nil}, {bob, []string{"d-closed"}}})
}

// A user may read a document when one of its channels is granted to
// them, directly or through a role (docs/apps.md); only `public` is
// limited to app members. A direct grant, or a role given by a document's members,
// must reach a user who is not a member of a private app.
func TestGrantsReachNonMembers(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/invite"
	en.app(app, false)
	en.deploy(app, grantJS)
	put := func(id, body string) { en.put(alice, app, "docs", id, body) }
	put("d-erin", `{"kind":"doc","channels":["ce"]}`)
	put("d-team", `{"kind":"doc","channels":["team"]}`)
	put("d-pub", `{"kind":"doc","channels":["cp"]}`)
	put("g-erin", `{"kind":"grant","grant":{"users":{"erin":["ce"]},"public":["cp"]}}`)
	put("g-team", `{"kind":"grant","members":{"crew":["dave"]},"grant":{"roles":{"crew":["team"]}}}`)
	if _, err := en.e.Get(en.ctx, erin, app, "docs", "d-erin"); err != nil {
		t.Errorf("erin, granted channel ce directly, Get d-erin: %v", err)
	}
	if _, err := en.e.Get(en.ctx, dave, app, "docs", "d-team"); err != nil {
		t.Errorf("dave, given role crew by a document, Get d-team: %v", err)
	}
	if _, err := en.e.Get(en.ctx, bob, app, "docs", "d-erin"); err == nil {
		t.Errorf("bob, granted nothing, reads d-erin")
	}
}

func TestPaginationSkipsFilteredDocuments(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/pages"
	en.app(app, false)
	en.member(app, "bob", "viewer")
	en.deploy(app, grantJS)
	visible := map[int]bool{0: true, 1: true, 2: true, 10: true, 23: true, 24: true, 25: true, 26: true, 39: true}
	var want, all []string
	var bodies []string
	for i := range 40 {
		id := fmt.Sprintf("d%02d", i)
		ch := "hidden"
		if visible[i] {
			ch = "seen"
			want = append(want, id)
		}
		all = append(all, id)
		bodies = append(bodies, fmt.Sprintf(`{"kind":"doc","channels":[%q]}`, ch))
	}
	var wg sync.WaitGroup
	var failed atomic.Bool
	for i := range all {
		wg.Go(func() {
			if _, err := en.try(alice, app, "docs", all[i], bodies[i]); err != nil {
				failed.Store(true)
			}
		})
	}
	wg.Wait()
	if failed.Load() {
		t.Fatal("a put failed")
	}
	en.put(alice, app, "docs", "grant", `{"kind":"grant","grant":{"users":{"bob":["seen"]}}}`)
	for _, limit := range []int{1, 2, 3, 4, 5, 9, 10} {
		if got := en.pageAll(bob, app, limit, true); !slices.Equal(got, want) {
			t.Fatalf("Query limit %d = %q, want %q", limit, got, want)
		}
		if got := en.pageAll(bob, app, limit, false); !slices.Equal(got, want) {
			t.Fatalf("Scan limit %d = %q, want %q", limit, got, want)
		}
	}
	// A page that ends on the last visible document says there is no next
	// page, even with hidden documents after it.
	p, err := en.e.Query(en.ctx, bob, app, "docs", "kind", json.RawMessage(`"doc"`), 9, "")
	if err != nil || len(p.Docs) != 9 || p.Next != "" {
		t.Fatalf("a page holding every visible doc: %d docs, next %q, %v", len(p.Docs), p.Next, err)
	}

	// Changes: pages are full while there is more, and last advances past
	// filtered entries to the end of the feed.
	end := en.lastSeq(app)
	for _, limit := range []int{1, 2, 4, 1000} {
		var seen []string
		var since int64
		for {
			c, err := en.e.Changes(en.ctx, bob, app, "docs", since, limit)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range c.Changes {
				if e.ID != "grant" {
					seen = append(seen, e.ID)
				}
			}
			if c.Last < since {
				t.Fatalf("Changes last went back from %d to %d", since, c.Last)
			}
			if len(c.Changes) < limit {
				if c.Last != end {
					t.Fatalf("limit %d: a short page (%d) ends at last %d, want %d", limit, len(c.Changes), c.Last, end)
				}
				break
			}
			since = c.Last
		}
		if !slices.Equal(sorted(seen), want) {
			t.Fatalf("Changes limit %d = %q, want %q", limit, sorted(seen), want)
		}
	}
	// Hidden entries at the end of the feed: last still reaches the end.
	for i := range 5 {
		en.put(alice, app, "docs", fmt.Sprintf("z%d", i), `{"kind":"doc","channels":["hidden"]}`)
	}
	c, err := en.e.Changes(en.ctx, bob, app, "docs", end, 3)
	if err != nil || len(c.Changes) != 0 || c.Last != en.lastSeq(app) {
		t.Fatalf("Changes over hidden entries = %+v, %v; want none and last %d", c, err, en.lastSeq(app))
	}
}

// A grant change must reach readers that were reading while it
// committed: a revoke must not leave a reader with the channel, and a new
// grant must not stay invisible, until some later write changes grants.
func TestGrantChangesUnderConcurrentReads(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	const app = "alice/revoke"
	en.app(app, false)
	en.member(app, "bob", "viewer")
	en.deploy(app, grantJS)
	en.put(alice, app, "docs", "d", `{"kind":"doc","channels":["cb"]}`)
	const rounds = 300
	var stale, missed int
	for range rounds {
		en.put(alice, app, "docs", "g", `{"kind":"grant","grant":{"users":{"bob":["cb"]}}}`)
		readWhile(en, func() { en.del(alice, app, "docs", "g") })
		if _, err := en.e.Get(en.ctx, bob, app, "docs", "d"); err == nil {
			stale++
		}
		readWhile(en, func() {
			en.put(alice, app, "docs", "g", `{"kind":"grant","grant":{"users":{"bob":["cb"]}}}`)
		})
		if _, err := en.e.Get(en.ctx, bob, app, "docs", "d"); err != nil {
			missed++
		}
		en.del(alice, app, "docs", "g")
	}
	if stale > 0 || missed > 0 {
		t.Fatalf("of %d rounds: %d revoked grants still read afterwards, %d new grants not seen afterwards", rounds, stale, missed)
	}
}

// readWhile has bob read d in a loop on three goroutines while change runs.
func readWhile(en *env, change func()) {
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for !stop.Load() {
				en.e.Get(en.ctx, bob, "alice/revoke", "docs", "d")
			}
		})
	}
	change()
	stop.Store(true)
	wg.Wait()
}
