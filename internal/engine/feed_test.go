package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/feed"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/sqlite"
)

// Tests of the live feed (docs/architecture.md, "The live feed"): Follow/Feed.Next and
// FollowQuery/QueryFeed.Next on a real SQLite store.

var (
	feedAdmin = engine.Actor{User: engine.AdminUser, Admin: true}
	feedAlice = engine.Actor{User: "alice"} // owns every app here
	feedBob   = engine.Actor{User: "bob"}
	feedCarol = engine.Actor{User: "carol"}
	feedDave  = engine.Actor{User: "dave"}
	feedAnon  = engine.Actor{}
)

type feedEnv struct {
	t   *testing.T
	ctx context.Context
	e   *engine.Engine
}

// newFeedEnv opens an engine with the access runtime (unless o sets
// another) and the users alice, bob, carol and dave.
func newFeedEnv(t *testing.T, o engine.Options) *feedEnv {
	t.Helper()
	// The feed does not care whether a commit reached the disk.
	st, err := sqlite.OpenUnsynced(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newFeedEnvOn(t, st, o)
}

// newFeedEnvOn is newFeedEnv on the store st.
func newFeedEnvOn(t *testing.T, st store.Store, o engine.Options) *feedEnv {
	t.Helper()
	if o.Code == nil {
		o.Code = jsapp.New(jsapp.Options{})
	}
	en := &feedEnv{t: t, ctx: context.Background(), e: engine.New(st, o)}
	if _, err := en.e.Bootstrap(en.ctx, ""); err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{"alice", "bob", "carol", "dave"} {
		if _, err := en.e.AddUser(en.ctx, feedAdmin, u); err != nil {
			t.Fatal(err)
		}
	}
	return en
}

func (en *feedEnv) app(ref string, public bool) {
	en.t.Helper()
	if _, err := en.e.CreateApp(en.ctx, feedAdmin, ref, public); err != nil {
		en.t.Fatal(err)
	}
	// The access deadline is a CPU budget, not the subject here: -race
	// beside parallel tests can make one small call take past 100ms.
	if err := en.e.SetAccessTimeout(en.ctx, feedAdmin, ref, 10*time.Second); err != nil {
		en.t.Fatal(err)
	}
}

func (en *feedEnv) put(a engine.Actor, app, db, id, body string) appcode.WriteResult {
	en.t.Helper()
	r, err := en.e.Put(en.ctx, a, app, db, id, []byte(body), appcode.PutOptions{})
	if err != nil {
		en.t.Fatalf("put %s/%s: %v", db, id, err)
	}
	return r
}

func (en *feedEnv) follow(a engine.Actor, app, db string, since int64) *engine.Feed {
	en.t.Helper()
	f, err := en.e.Follow(en.ctx, a, app, db, since)
	if err != nil {
		en.t.Fatalf("Follow(%s, %q, %d): %v", a.User, db, since, err)
	}
	en.t.Cleanup(f.Close)
	return f
}

// drain reads f until it has read past seq until, and returns the
// entries it got. It fails the test after 30 s.
func drain(t *testing.T, f *engine.Feed, until int64) []engine.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out []engine.Entry
	for f.Since() < until {
		c, err := f.Next(ctx, time.Second)
		if err != nil {
			t.Fatalf("feed at %d (want %d): %v", f.Since(), until, err)
		}
		if c.Last != f.Since() {
			t.Fatalf("page last %d, feed since %d", c.Last, f.Since())
		}
		out = append(out, c.Changes...)
	}
	return out
}

// nextEntries waits for the next non-empty page.
func nextEntries(t *testing.T, f *engine.Feed) []engine.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		c, err := f.Next(ctx, time.Second)
		if err != nil {
			t.Fatalf("feed at %d: %v", f.Since(), err)
		}
		if len(c.Changes) > 0 {
			return c.Changes
		}
	}
}

// wantSeqs checks that entries are exactly the seqs from..to, in order.
func wantSeqs(t *testing.T, what string, entries []engine.Entry, from, to int64) {
	t.Helper()
	if int64(len(entries)) != to-from+1 {
		t.Fatalf("%s: %d entries, want %d (seqs %d..%d)", what, len(entries), to-from+1, from, to)
	}
	for i, e := range entries {
		if e.Seq != from+int64(i) {
			t.Fatalf("%s: entry %d has seq %d, want %d", what, i, e.Seq, from+int64(i))
		}
	}
}

func ids(entries []engine.Entry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.ID
	}
	return out
}

// writeConcurrently puts n documents with w writers (group commit makes
// it fast) into dbs round robin, and returns the last seq.
func (en *feedEnv) writeConcurrently(app string, n, w int, dbs ...string) int64 {
	en.t.Helper()
	var wg sync.WaitGroup
	errc := make(chan error, w)
	for k := range w {
		wg.Go(func() {
			for i := k; i < n; i += w {
				db := dbs[i%len(dbs)]
				body := fmt.Sprintf(`{"n":%d,"writer":%d}`, i, k)
				if _, err := en.e.Put(en.ctx, feedAlice, app, db, fmt.Sprintf("doc-%d", i%700), []byte(body), appcode.PutOptions{}); err != nil {
					errc <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		en.t.Fatal(err)
	}
	return en.lastSeq(app)
}

func (en *feedEnv) lastSeq(app string) int64 {
	en.t.Helper()
	var last int64
	for {
		c, err := en.e.Changes(en.ctx, feedAlice, app, "", last, engine.MaxLimit)
		if err != nil {
			en.t.Fatal(err)
		}
		if c.Last == last {
			return last
		}
		last = c.Last
	}
}

// TestFeedResumesFromAnySeq: with more revisions than the ring holds, a
// feed opened at any position — behind the ring, at its edge, inside
// it, at the end — delivers every later revision exactly once, in order,
// and then keeps going live.
func TestFeedResumesFromAnySeq(t *testing.T) {
	t.Parallel()
	// A ring of 512 has the same edges as one of 4096, for a fifth of the writes.
	const slots = 512
	en := newFeedEnv(t, engine.Options{FeedLimits: feed.Limits{Slots: slots}})
	const app = "alice/resume"
	en.app(app, false)

	// A live follower reads while the writes land, so the shared ring is
	// filled the way it is in production, one commit batch at a time.
	live := en.follow(feedAlice, app, "", 0)
	const n = 1100 // past the ring's edge and two reads of the store's fetch size
	done := make(chan []engine.Entry)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		var got []engine.Entry
		for live.Since() < n {
			c, err := live.Next(ctx, time.Second)
			if err != nil {
				break
			}
			got = append(got, c.Changes...)
		}
		done <- got
	}()
	last := en.writeConcurrently(app, n, 16, "a", "b")
	if last != n {
		t.Fatalf("last seq %d, want %d", last, n)
	}
	wantSeqs(t, "live follower", <-done, 1, n)

	// The ring holds the latest slots: n-slots is its edge.
	edge := int64(n - slots)
	starts := []int64{0, 1, 2, 499, 500, 501, 1000, edge - 2, edge - 1, edge, edge + 1, edge + 2, n - 100, n - 2, n - 1}
	for s := int64(3); s < n; s += 97 {
		starts = append(starts, s)
	}
	for _, since := range starts {
		f := en.follow(feedAlice, app, "", since)
		wantSeqs(t, fmt.Sprintf("from %d", since), drain(t, f, n), since+1, n)
	}
	// Followers on each side of the ring also read on concurrently, with
	// a db filter, and all stay live.
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[int64][]engine.Entry{}
	for _, since := range []int64{0, edge - 1, n - 10, n} {
		f := en.follow(feedAlice, app, "a", since)
		wg.Go(func() {
			es := drain(t, f, n+20)
			mu.Lock()
			got[since] = es
			mu.Unlock()
		})
	}
	for i := range 20 {
		en.put(feedAlice, app, []string{"a", "b"}[i%2], fmt.Sprintf("new-%d", i), `{}`)
	}
	wg.Wait()
	all := drain(t, en.follow(feedAlice, app, "", 0), n+20)
	wantSeqs(t, "everything", all, 1, n+20)
	for since, es := range got {
		var want []int64
		for _, e := range all[since:] {
			if e.DB == "a" {
				want = append(want, e.Seq)
			}
		}
		var seqs []int64
		for _, e := range es {
			if e.DB != "a" {
				t.Fatalf("db filter a: got an entry of %q", e.DB)
			}
			seqs = append(seqs, e.Seq)
		}
		if !slices.Equal(seqs, want) {
			t.Fatalf("db a from %d: %d entries, want %d", since, len(seqs), len(want))
		}
	}

	// A position the app never reached is refused, not waited for.
	if _, err := en.e.Follow(en.ctx, feedAlice, app, "", n+21); !errs.Is(err, errs.Invalid) {
		t.Fatalf("Follow past the end: %v, want invalid", err)
	}
	if _, err := en.e.Follow(en.ctx, feedAlice, app, "", -1); !errs.Is(err, errs.Invalid) {
		t.Fatalf("Follow(-1): %v, want invalid", err)
	}
}

// TestFeedWithLargeDocuments: the revisions kept for followers are
// bounded in bytes as well as in number; resuming works the same on
// either side of that bound.
func TestFeedWithLargeDocuments(t *testing.T) {
	t.Parallel()
	// A bound of 4 MiB drops revisions as one of 32 MiB does, for an eighth of the writes.
	en := newFeedEnv(t, engine.Options{FeedLimits: feed.Limits{Bytes: 4 << 20}})
	const app = "alice/large"
	en.app(app, false)
	live := en.follow(feedAlice, app, "", 0)
	const n = 60 // 60 x 100 KB: more than the 4 MiB kept
	body := fmt.Sprintf(`{"pad":%q}`, strings.Repeat("x", 100<<10))
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < n; i += 4 {
				if _, err := en.e.Put(en.ctx, feedAlice, app, "big", fmt.Sprintf("d%d", i), []byte(body), appcode.PutOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	got := drain(t, live, n)
	wg.Wait()
	wantSeqs(t, "live", got, 1, n)
	for _, since := range []int64{0, 30, n - 1} {
		es := drain(t, en.follow(feedAlice, app, "", since), n)
		wantSeqs(t, fmt.Sprintf("from %d", since), es, since+1, n)
		for _, e := range es {
			if len(e.Doc) < 100<<10 {
				t.Fatalf("seq %d: a document of %d bytes", e.Seq, len(e.Doc))
			}
		}
	}
}

// TestFeedManyWritersManyFollowers: while writers commit concurrently,
// followers that started before, during and after the writes each see
// every seq exactly once, in order.
func TestFeedManyWritersManyFollowers(t *testing.T) {
	t.Parallel()
	en := newFeedEnv(t, engine.Options{})
	const app = "alice/busy"
	en.app(app, false)
	en.put(feedAlice, app, "a", "first", `{}`)
	const writers, each = 8, 150
	const total = 1 + writers*each

	var wg sync.WaitGroup
	results := make([][]engine.Entry, 6)
	startFollower := func(i int, since int64) {
		f := en.follow(feedAlice, app, "", since)
		wg.Go(func() { results[i] = drain(t, f, total) })
	}
	startFollower(0, 0)
	startFollower(1, 1)
	startFollower(2, 0)

	var wwg sync.WaitGroup
	started := make(chan struct{})
	for w := range writers {
		wwg.Go(func() {
			for i := range each {
				if w == 0 && i == each/2 {
					close(started)
				}
				if _, err := en.e.Put(en.ctx, feedAlice, app, []string{"a", "b", "c"}[i%3], fmt.Sprintf("w%d-%d", w, i%10), []byte(fmt.Sprintf(`{"i":%d}`, i)), appcode.PutOptions{}); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	<-started
	// Followers joining mid-stream: from the start and from now.
	startFollower(3, 0)
	startFollower(4, 1)
	wwg.Wait()
	startFollower(5, 0)
	wg.Wait()
	froms := []int64{1, 2, 1, 1, 2, 1}
	for i, es := range results {
		wantSeqs(t, fmt.Sprintf("follower %d", i), es, froms[i], total)
	}
	// Each revision reads the same through every follower.
	for i := range results[0] {
		a, b := results[0][i], results[5][i]
		if a.ID != b.ID || a.Rev != b.Rev || string(a.Doc) != string(b.Doc) {
			t.Fatalf("seq %d differs between followers: %+v vs %+v", a.Seq, a, b)
		}
	}
}

// TestFeedHeartbeatAndCancel: with nothing to send, Next returns an empty
// page after wait (the heartbeat's turn); it returns ctx's error as soon
// as ctx ends.
func TestFeedHeartbeatAndCancel(t *testing.T) {
	t.Parallel()
	en := newFeedEnv(t, engine.Options{})
	const app = "alice/quiet"
	en.app(app, false)
	en.put(feedAlice, app, "a", "x", `{}`)
	f := en.follow(feedAlice, app, "", 1)
	t0 := time.Now()
	c, err := f.Next(en.ctx, 50*time.Millisecond)
	if err != nil || len(c.Changes) != 0 || c.Last != 1 {
		t.Fatalf("idle Next = %+v, %v; want an empty page at 1", c, err)
	}
	if d := time.Since(t0); d < 40*time.Millisecond || d > 5*time.Second {
		t.Fatalf("idle Next returned after %v, want about 50ms", d)
	}
	// Changes the reader may not see still move the position, and the
	// heartbeat comes on time however many of them go by.
	if err := en.e.AddMember(en.ctx, feedAlice, app, "bob", "viewer"); err != nil {
		t.Fatal(err)
	}
	if _, err := en.e.Deploy(en.ctx, feedAlice, app, `export function secret(doc) { return { channels: ["nobody"] }; }`, ""); err != nil {
		t.Fatal(err)
	}
	bf := en.follow(feedBob, app, "", 0)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			en.e.Put(en.ctx, feedAlice, app, "secret", fmt.Sprintf("s%d", i%5), []byte(`{}`), appcode.PutOptions{})
		}
	})
	for range 3 {
		t0 = time.Now()
		c, err = bf.Next(en.ctx, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range c.Changes {
			if e.DB == "secret" {
				t.Fatalf("bob sees %s/%s", e.DB, e.ID)
			}
		}
		if d := time.Since(t0); d > 5*time.Second {
			t.Fatalf("Next with filtered traffic returned after %v", d)
		}
	}
	// A live query's heartbeat is not held back by changes outside it.
	qf, _, _, err := en.e.FollowQuery(en.ctx, feedAlice, app, "secret", "status", json.RawMessage(`"none"`))
	if err != nil {
		t.Fatal(err)
	}
	defer qf.Close()
	for range 3 {
		t0 = time.Now()
		ch, _, err := qf.Next(en.ctx, 100*time.Millisecond)
		if err != nil || len(ch) != 0 {
			t.Fatalf("query Next = %v, %v", ch, err)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Fatalf("query heartbeat after %v with a busy database, want about 100ms", d)
		}
	}
	close(stop)
	wg.Wait()
	if c := drain(t, bf, en.lastSeq(app)); len(c) != 0 {
		t.Fatalf("bob saw %d secret changes", len(c))
	}

	// Cancelling ends a waiting Next at once.
	f = en.follow(feedAlice, app, "", en.lastSeq(app))
	ctx, cancel := context.WithCancel(en.ctx)
	errc := make(chan error, 1)
	go func() {
		_, err := f.Next(ctx, time.Minute)
		errc <- err
	}()
	time.Sleep(20 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if err != context.Canceled {
			t.Fatalf("cancelled Next: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Next did not return after its context ended")
	}
}

// The access function of the access tests: the owner writes documents
// that carry their own channels and grants.
const feedAccessJS = `
export function docs(doc, oldDoc, user, ctx) {
  ctx.requireOwner();
  return { channels: doc.channels, grant: doc.grant };
}
`

// TestFeedNeverShowsWhatTheReaderMayNotRead: the feed filters by the
// reader's channels like every other read, follows grants as they change
// and refuses readers with no access at all.
func TestFeedNeverShowsWhatTheReaderMayNotRead(t *testing.T) {
	t.Parallel()
	en := newFeedEnv(t, engine.Options{})
	const app = "alice/private"
	en.app(app, false)
	en.e.AddMember(en.ctx, feedAlice, app, "bob", "viewer") // carol: granted, not a member
	if _, err := en.e.Deploy(en.ctx, feedAlice, app, feedAccessJS, ""); err != nil {
		t.Fatal(err)
	}
	en.put(feedAlice, app, "docs", "g-bob", `{"grant":{"users":{"bob":["u:bob"]}}}`)
	en.put(feedAlice, app, "docs", "g-carol", `{"grant":{"users":{"carol":["u:carol","shared"]}}}`)

	// Not a member and no grant: refused; anonymous: unauthorized.
	if _, err := en.e.Follow(en.ctx, feedDave, app, "", 0); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("non-member Follow: %v, want forbidden", err)
	}
	if _, err := en.e.Follow(en.ctx, feedAnon, app, "", 0); !errs.Is(err, errs.Unauthorized) {
		t.Fatalf("anonymous Follow of a private app: %v, want unauthorized", err)
	}
	if _, _, _, err := en.e.FollowQuery(en.ctx, feedDave, app, "docs", "k", json.RawMessage(`1`)); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("non-member FollowQuery: %v, want forbidden", err)
	}

	bob := en.follow(feedBob, app, "", 0)
	carol := en.follow(feedCarol, app, "docs", 0)
	owner := en.follow(feedAlice, app, "", 0)
	en.put(feedAlice, app, "docs", "b1", `{"channels":["u:bob"],"secret":"for bob"}`)
	en.put(feedAlice, app, "docs", "c1", `{"channels":["u:carol"],"secret":"for carol"}`)
	en.put(feedAlice, app, "docs", "both", `{"channels":["u:bob","u:carol"]}`)
	en.put(feedAlice, app, "docs", "none", `{"channels":["nobody"]}`)
	en.put(feedAlice, app, "docs", "s1", `{"channels":["shared"]}`)
	en.put(feedAlice, app, "notes", "n1", `{"text":"ungated"}`) // no access function: members only
	last := en.lastSeq(app)
	if got := ids(drain(t, bob, last)); !slices.Equal(got, []string{"b1", "both", "n1"}) {
		t.Fatalf("bob's feed: %q", got)
	}
	if got := ids(drain(t, carol, last)); !slices.Equal(got, []string{"c1", "both", "s1"}) {
		t.Fatalf("carol's feed: %q", got)
	}
	if got := ids(drain(t, owner, last)); len(got) != 8 {
		t.Fatalf("the owner's feed: %q, want all 8", got)
	}

	// Carol loses "shared" mid-stream: later entries of it never reach
	// her; what she is still granted keeps coming.
	en.put(feedAlice, app, "docs", "g-carol", `{"grant":{"users":{"carol":["u:carol"]}}}`)
	en.put(feedAlice, app, "docs", "s2", `{"channels":["shared"],"secret":"after the revocation"}`)
	en.put(feedAlice, app, "docs", "c2", `{"channels":["u:carol"]}`)
	if got := ids(nextEntries(t, carol)); !slices.Equal(got, []string{"c2"}) {
		t.Fatalf("carol after losing shared: %q", got)
	}
	// Given back, it flows again (from then on).
	en.put(feedAlice, app, "docs", "g-carol", `{"grant":{"users":{"carol":["u:carol","shared"]}}}`)
	en.put(feedAlice, app, "docs", "s3", `{"channels":["shared"]}`)
	if got := ids(nextEntries(t, carol)); !slices.Equal(got, []string{"s3"}) {
		t.Fatalf("carol with shared again: %q", got)
	}
	// Her last grant gone, she may read nothing of the app: her feed ends
	// with forbidden instead of going quiet.
	if _, err := en.e.Delete(en.ctx, feedAlice, app, "docs", "g-carol", ""); err != nil {
		t.Fatal(err)
	}
	en.put(feedAlice, app, "docs", "c3", `{"channels":["u:carol"]}`)
	ctx, cancel := context.WithTimeout(en.ctx, 30*time.Second)
	defer cancel()
	for {
		c, err := carol.Next(ctx, time.Second)
		if errs.Is(err, errs.Forbidden) {
			break
		}
		if err != nil || len(c.Changes) > 0 {
			t.Fatalf("carol without grants: %+v, %v; want forbidden", c, err)
		}
	}
	// Bob's feed never carried anything of carol's.
	if got := ids(drain(t, bob, en.lastSeq(app))); len(got) != 0 {
		t.Fatalf("bob saw %q", got)
	}

	// A live query follows the same rules: a document that becomes
	// unreadable leaves bob's result without showing its new content.
	qf, snap, _, err := en.e.FollowQuery(en.ctx, feedBob, app, "docs", "kind", json.RawMessage(`"job"`))
	if err != nil {
		t.Fatal(err)
	}
	defer qf.Close()
	if len(snap.Docs) != 0 {
		t.Fatalf("bob's snapshot: %s", snap.Docs)
	}
	en.put(feedAlice, app, "docs", "j1", `{"kind":"job","channels":["u:bob"]}`)
	en.put(feedAlice, app, "docs", "j2", `{"kind":"job","channels":["nobody"]}`)
	en.put(feedAlice, app, "docs", "j1", `{"kind":"job","channels":["nobody"],"secret":"moved away"}`)
	var got []engine.QueryChange
	for len(got) < 2 {
		ch, _, err := qf.Next(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ch...)
	}
	if len(got) != 2 || got[0].ID != "j1" || !got[0].Match || got[1].ID != "j1" || got[1].Match || got[1].Doc != nil || got[1].Rev != "" {
		t.Fatalf("bob's live query: %+v", got)
	}
}

// TestFeedRevocationRacesTheFollower: while a follower reads
// concurrently, each round grants a channel, writes to it, revokes it for
// good and writes to it again. Whatever the timing of the follower's
// wake-ups against the writes, it never shows a document of a channel
// revoked before that document was written. (Reads filter by the grants
// in force when they read, so a document written while its channel was
// granted may still be held back if the follower reads it only after the
// revocation.)
func TestFeedRevocationRacesTheFollower(t *testing.T) {
	t.Parallel()
	en := newFeedEnv(t, engine.Options{})
	const app = "alice/flip"
	en.app(app, false)
	if _, err := en.e.Deploy(en.ctx, feedAlice, app, feedAccessJS, ""); err != nil {
		t.Fatal(err)
	}
	en.put(feedAlice, app, "docs", "g", `{"grant":{"users":{"carol":["keep"]}}}`)
	f := en.follow(feedCarol, app, "docs", 0)
	seen := make(chan []string, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var got []string
		for {
			c, err := f.Next(ctx, time.Second)
			if err != nil {
				seen <- append(got, "error: "+err.Error())
				return
			}
			for _, e := range c.Changes {
				got = append(got, e.ID)
				if e.ID == "end" {
					seen <- got
					return
				}
			}
		}
	}()
	const rounds = 200
	for i := range rounds {
		ch := fmt.Sprintf("r%d", i)
		en.put(feedAlice, app, "docs", "g", fmt.Sprintf(`{"grant":{"users":{"carol":["keep",%q]}}}`, ch))
		en.put(feedAlice, app, "docs", fmt.Sprintf("in-%d", i), fmt.Sprintf(`{"channels":[%q]}`, ch))
		en.put(feedAlice, app, "docs", "g", `{"grant":{"users":{"carol":["keep"]}}}`)
		en.put(feedAlice, app, "docs", fmt.Sprintf("out-%d", i), fmt.Sprintf(`{"channels":[%q]}`, ch))
	}
	en.put(feedAlice, app, "docs", "end", `{"channels":["keep"]}`)
	got := <-seen
	ins := 0
	for _, id := range got {
		switch {
		case strings.HasPrefix(id, "out-") || strings.HasPrefix(id, "error"):
			t.Fatalf("carol saw %s, written after its channel was revoked (all: %q)", id, got)
		case strings.HasPrefix(id, "in-"):
			ins++
		}
	}
	t.Logf("carol saw %d of the %d documents written while granted", ins, rounds)
}

// TestFeedOfAPublicApp: an anonymous follower sees the public channels
// only.
func TestFeedOfAPublicApp(t *testing.T) {
	t.Parallel()
	en := newFeedEnv(t, engine.Options{})
	const app = "alice/open"
	en.app(app, true)
	if _, err := en.e.Deploy(en.ctx, feedAlice, app, feedAccessJS, ""); err != nil {
		t.Fatal(err)
	}
	en.put(feedAlice, app, "docs", "g-public", `{"grant":{"public":["news"],"users":{"bob":["u:bob"]}}}`)
	anon := en.follow(feedAnon, app, "", 0)
	dave := en.follow(feedDave, app, "", 0) // a signed-in stranger
	bob := en.follow(feedBob, app, "", 0)
	en.put(feedAlice, app, "docs", "p1", `{"channels":["news"]}`)
	en.put(feedAlice, app, "docs", "x1", `{"channels":["u:bob"]}`)
	en.put(feedAlice, app, "docs", "x2", `{"channels":["staff"]}`)
	en.put(feedAlice, app, "docs", "p2", `{"channels":["news","staff"]}`)
	last := en.lastSeq(app)
	for name, f := range map[string]*engine.Feed{"anonymous": anon, "dave": dave} {
		if got := ids(drain(t, f, last)); !slices.Equal(got, []string{"p1", "p2"}) {
			t.Fatalf("%s on a public app: %q", name, got)
		}
	}
	if got := ids(drain(t, bob, last)); !slices.Equal(got, []string{"p1", "x1", "p2"}) {
		t.Fatalf("bob on a public app: %q", got)
	}
}

// TestLiveQuery: a snapshot, then the changes that enter, stay in or
// leave the result; deletes leave; other documents are not shown.
func TestLiveQuery(t *testing.T) {
	t.Parallel()
	en := newFeedEnv(t, engine.Options{})
	const app = "alice/jobs"
	en.app(app, false)
	en.e.AddMember(en.ctx, feedAlice, app, "bob", "viewer")
	en.put(feedAlice, app, "jobs", "j1", `{"status":"running","meta":{"queue":"a"}}`)
	en.put(feedAlice, app, "jobs", "j2", `{"status":"pending"}`)
	en.put(feedAlice, app, "jobs", "j3", `{"status":"running"}`)
	en.put(feedAlice, app, "other", "o1", `{"status":"running"}`)

	if _, _, _, err := en.e.FollowQuery(en.ctx, feedBob, app, "", "status", json.RawMessage(`"running"`)); !errs.Is(err, errs.Invalid) {
		t.Fatalf("FollowQuery without a db: %v", err)
	}
	if _, _, _, err := en.e.FollowQuery(en.ctx, feedBob, app, "jobs", "status", json.RawMessage(`running`)); !errs.Is(err, errs.Invalid) {
		t.Fatalf("FollowQuery with a bad key: %v", err)
	}
	qf, snap, seq, err := en.e.FollowQuery(en.ctx, feedBob, app, "jobs", "status", json.RawMessage(`"running"`))
	if err != nil {
		t.Fatal(err)
	}
	defer qf.Close()
	if seq != 4 || len(snap.Docs) != 2 {
		t.Fatalf("snapshot at %d: %s", seq, snap.Docs)
	}
	var d0 map[string]any
	json.Unmarshal(snap.Docs[0], &d0)
	if d0["_id"] != "j1" || d0["_rev"] == nil {
		t.Fatalf("snapshot doc: %s", snap.Docs[0])
	}
	nested, _, _, err := en.e.FollowQuery(en.ctx, feedBob, app, "jobs", "meta.queue", json.RawMessage(`"a"`))
	if err != nil {
		t.Fatal(err)
	}
	defer nested.Close()

	j2 := en.put(feedAlice, app, "jobs", "j2", `{"status":"running"}`)                // enters
	en.put(feedAlice, app, "jobs", "j1", `{"status":"running","meta":{"queue":"b"}}`) // stays
	en.put(feedAlice, app, "jobs", "j4", `{"status":"pending"}`)                      // not in it
	en.put(feedAlice, app, "other", "o1", `{"status":"running","v":2}`)               // other db
	en.put(feedAlice, app, "jobs", "j3", `{"status":"done"}`)                         // leaves
	en.e.Delete(en.ctx, feedAlice, app, "jobs", "j1", "")                             // leaves
	en.put(feedAlice, app, "jobs", "j3", `{"status":"done","again":true}`)            // still out
	en.put(feedAlice, app, "jobs", "j5", `{"status":"running"}`)                      // enters

	type step struct {
		id      string
		match   bool
		deleted bool
	}
	want := []step{{"j2", true, false}, {"j1", true, false}, {"j3", false, false}, {"j1", false, true}, {"j5", true, false}}
	var got []engine.QueryChange
	ctx, cancel := context.WithTimeout(en.ctx, 30*time.Second)
	defer cancel()
	for len(got) < len(want) {
		ch, _, err := qf.Next(ctx, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ch...)
	}
	for i, w := range want {
		g := got[i]
		if g.ID != w.id || g.Match != w.match || g.Deleted != w.deleted || g.DB != "jobs" {
			t.Fatalf("change %d = %s match=%v deleted=%v, want %+v (all: %+v)", i, g.ID, g.Match, g.Deleted, w, got)
		}
	}
	if got[0].Rev != j2.Rev || got[0].Seq != j2.Seq {
		t.Fatalf("enter of j2: %+v, want rev %s seq %d", got[0], j2.Rev, j2.Seq)
	}
	// Nothing more: j4, o1 and the second j3 are outside the result.
	if ch, last, err := qf.Next(ctx, 50*time.Millisecond); err != nil || len(ch) != 0 || last != en.lastSeq(app) {
		t.Fatalf("after the last change: %+v at %d, %v", ch, last, err)
	}
	// The nested field: j1 leaves when its queue changes.
	ch, _, err := nested.Next(ctx, time.Second)
	if err != nil || len(ch) != 1 || ch[0].ID != "j1" || ch[0].Match {
		t.Fatalf("meta.queue query: %+v, %v", ch, err)
	}
}

// TestFeedCarriesEveryWritePath: a client put, a CLI put, a delete, an
// onChange handler's write and a scheduled handler's write all reach a
// follower, each with its path.
func TestFeedCarriesEveryWritePath(t *testing.T) {
	t.Parallel()
	b := &appcodetest.Backend{}
	b.Cfg.OnChange.Concurrency = 1
	b.Cfg.OnChange.MaxAttempts = 3
	b.Cfg.OnChange.Timeout = time.Minute
	b.Cfg.Scheduled.Interval = appcode.MinScheduledInterval
	var ticked sync.Once
	b.OnChange = func(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
		if ev.DB != "jobs" || ev.Deleted {
			return nil
		}
		_, err := hc.Put(ctx, "results", ev.DocID, json.RawMessage(`{"from":"onChange"}`), appcode.PutOptions{})
		return err
	}
	b.Scheduled = func(ctx context.Context, ev appcode.TickEvent, hc appcode.HandlerContext) error {
		var err error
		ticked.Do(func() {
			_, err = hc.Put(ctx, "ticks", "tick", json.RawMessage(fmt.Sprintf(`{"at":%d}`, ev.ScheduledTime)), appcode.PutOptions{})
		})
		return err
	}
	en := newFeedEnv(t, engine.Options{Code: appcodetest.Compiler{B: b, Access: jsapp.New(jsapp.Options{}).CompileAccess}})
	const app = "alice/paths"
	en.app(app, false)
	if _, err := en.e.Deploy(en.ctx, feedAlice, app, "", "// backend in Go"); err != nil {
		t.Fatal(err)
	}
	f := en.follow(feedAlice, app, "", 0)
	if err := en.e.Start(en.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(en.e.Close)

	http := feedAlice
	cli := feedAlice
	cli.Path = "cli"
	en.put(http, app, "jobs", "j1", `{"status":"pending"}`)
	en.put(cli, app, "notes", "n1", `{}`)
	if _, err := en.e.Delete(en.ctx, feedAlice, app, "notes", "n1", ""); err != nil {
		t.Fatal(err)
	}

	type seen struct{ db, id, path string }
	want := map[seen]bool{
		{"jobs", "j1", "http"}:         false,
		{"notes", "n1", "cli"}:         false,
		{"notes", "n1", "http"}:        false, // the delete
		{"results", "j1", "onChange"}:  false,
		{"ticks", "tick", "scheduled"}: false,
	}
	deleted := false
	ctx, cancel := context.WithTimeout(en.ctx, 30*time.Second)
	defer cancel()
	for missing := len(want); missing > 0; {
		c, err := f.Next(ctx, time.Second)
		if err != nil {
			t.Fatalf("still waiting for %v: %v", want, err)
		}
		for _, e := range c.Changes {
			k := seen{e.DB, e.ID, e.Path}
			done, ok := want[k]
			if !ok || done {
				t.Fatalf("unexpected change %+v", e)
			}
			want[k] = true
			missing--
			if e.DB == "notes" && e.Path == "http" {
				deleted = e.Deleted
			}
			if e.Path == "onChange" && e.Writer.Handler != "onChange" || e.Path == "scheduled" && e.Writer.Handler != "scheduled" {
				t.Fatalf("handler write without its handler: %+v", e)
			}
		}
	}
	if !deleted {
		t.Fatal("the delete did not come as a deletion")
	}
}

// changeReads counts the reads of an app's ledger that reach the store.
type changeReads struct {
	store.Store
	n *atomic.Int64
}

func (c changeReads) Changes(ctx context.Context, appID int64, db string, since int64, limit int) ([]store.Revision, error) {
	c.n.Add(1)
	return c.Store.Changes(ctx, appID, db, since, limit)
}

// TestFeedLimitsBoundTheRing: Options.FeedLimits sizes the ring the
// followers share. With four slots, a follower that starts inside the
// last four revisions reads from the ring; one from before reads the
// store.
func TestFeedLimitsBoundTheRing(t *testing.T) {
	t.Parallel()
	st, err := sqlite.OpenUnsynced(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	var reads atomic.Int64
	en := newFeedEnvOn(t, changeReads{st, &reads}, engine.Options{FeedLimits: feed.Limits{Slots: 4}})
	const app = "alice/small"
	en.app(app, false)
	live := en.follow(feedAlice, app, "", 0)
	var last int64
	for i := range 10 {
		last = en.put(feedAlice, app, "d", fmt.Sprint("doc-", i), `{}`).Seq
		wantSeqs(t, "live", drain(t, live, last), last, last)
	}
	from := func(since int64) int64 {
		t.Helper()
		before := reads.Load()
		wantSeqs(t, fmt.Sprintf("from %d", since), drain(t, en.follow(feedAlice, app, "", since), last), since+1, last)
		return reads.Load() - before
	}
	if n := from(last - 4); n != 0 {
		t.Fatalf("a follower inside the ring of 4 read the store %d times", n)
	}
	if n := from(last - 5); n == 0 {
		t.Fatal("a follower from before the ring of 4 never read the store")
	}
}
