package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// The live feed (docs/architecture.md, "The live feed"). The store tells the hub of each commit (an
// app and its new seq) from its writer, without blocking it; the first
// subscriber to need the new revisions reads them once into a ring that
// every subscriber of the app shares. A subscriber that fell behind the
// ring reads its backlog from the store, so resuming from any seq misses
// nothing and repeats nothing.
const (
	ringSize  = 4096
	ringBytes = 32 << 20 // and at most this much document body per app
	fetchSize = 500
)

type feedHub struct {
	mu   sync.Mutex
	apps map[int64]*appFeed
}

type appFeed struct {
	id int64

	mu        sync.Mutex
	last      int64         // the app's latest committed seq
	wake      chan struct{} // closed when last moves
	followers int           // open Feeds; the ring is let go at 0

	// ring holds the app's latest revisions, n of them from head (a
	// circular buffer that grows to ringSize slots), without gaps, and
	// bytes of document bodies at most ringBytes.
	ringMu sync.RWMutex
	ring   []store.Revision
	head   int
	n      int
	bytes  int
}

func (e *Engine) feedOf(ctx context.Context, appID int64) (*appFeed, error) {
	// Register first, then read the latest seq: a commit that lands in
	// between is either told to the registered feed or seen by LastSeq,
	// never lost (a feed created with a stale position would sleep
	// through a change until the next commit).
	e.feeds.mu.Lock()
	af := e.feeds.apps[appID]
	if af == nil {
		af = &appFeed{id: appID, wake: make(chan struct{})}
		if e.feeds.apps == nil {
			e.feeds.apps = map[int64]*appFeed{}
		}
		e.feeds.apps[appID] = af
	}
	e.feeds.mu.Unlock()
	last, err := e.st.LastSeq(ctx, appID)
	if err != nil {
		return nil, internal(err)
	}
	af.advance(last)
	return af, nil
}

// notify is the store's commit callback: it must not block the writer.
func (e *Engine) notify(appID, seq int64) {
	e.feeds.mu.Lock()
	af := e.feeds.apps[appID]
	e.feeds.mu.Unlock()
	if af == nil {
		return // nobody follows this app
	}
	af.advance(seq)
}

// advance moves the feed's latest seq forward and wakes its followers.
func (af *appFeed) advance(seq int64) {
	af.mu.Lock()
	if seq > af.last {
		af.last = seq
		close(af.wake)
		af.wake = make(chan struct{})
	}
	af.mu.Unlock()
}

func (af *appFeed) state() (int64, <-chan struct{}) {
	af.mu.Lock()
	defer af.mu.Unlock()
	return af.last, af.wake
}

// read returns revisions after since, up to limit, from the ring when it
// holds them and from the store otherwise.
func (af *appFeed) read(ctx context.Context, st store.Store, since, upTo int64, limit int) ([]store.Revision, error) {
	// Every follower of the app wakes on the same commit: all but the
	// first find the ring already filled and copy from it together.
	af.ringMu.RLock()
	revs, ok := af.fromRing(since, upTo, limit)
	af.ringMu.RUnlock()
	if ok {
		return revs, nil
	}
	af.ringMu.Lock()
	if revs, ok = af.fromRing(since, upTo, limit); !ok {
		if err := af.fill(ctx, st, since, upTo); err != nil {
			af.ringMu.Unlock()
			return nil, err
		}
		revs, ok = af.fromRing(since, upTo, limit)
	}
	af.ringMu.Unlock()
	if ok {
		return revs, nil
	}
	// Behind the ring: read the backlog directly, without holding up the
	// followers that are live.
	return st.Changes(ctx, af.id, "", since, limit)
}

// fromRing copies the revisions after since (up to limit) when the ring
// holds every one of them up to upTo. The caller holds ringMu.
func (af *appFeed) fromRing(since, upTo int64, limit int) ([]store.Revision, bool) {
	n := af.n
	if n == 0 || af.at(0).Seq > since+1 || af.at(n-1).Seq < upTo {
		return nil, false
	}
	// Seqs have no gaps, so the position is an index; check it anyway.
	i := int(since + 1 - af.at(0).Seq)
	if i >= n || af.at(i).Seq != since+1 {
		return nil, false
	}
	out := make([]store.Revision, min(limit, n-i))
	for k := range out {
		out[k] = *af.at(i + k)
	}
	return out, true
}

// at is the ring's i-th revision, oldest first.
func (af *appFeed) at(i int) *store.Revision {
	return &af.ring[(af.head+i)%len(af.ring)]
}

// push adds the newest revision to the ring, dropping the oldest ones
// when it is full.
func (af *appFeed) push(r store.Revision) {
	switch {
	case af.n < len(af.ring):
		*af.at(af.n) = r
		af.n++
	case len(af.ring) < ringSize:
		// Grow. The revisions must lie from index 0 for append to keep
		// their order; they do unless bytes dropped some from the front.
		if af.head != 0 {
			flat := make([]store.Revision, af.n, min(2*af.n, ringSize))
			for i := range flat {
				flat[i] = *af.at(i)
			}
			af.ring, af.head = flat, 0
		}
		af.ring = append(af.ring, r)
		af.n++
	default:
		af.drop()
		*af.at(af.n) = r
		af.n++
	}
	af.bytes += len(r.Body)
	for af.bytes > ringBytes && af.n > 1 {
		af.drop()
	}
}

// drop forgets the oldest revision of the ring.
func (af *appFeed) drop() {
	old := af.at(0)
	af.bytes -= len(old.Body)
	*old = store.Revision{}
	af.head = (af.head + 1) % len(af.ring)
	af.n--
}

// release forgets the whole ring.
func (af *appFeed) release() {
	af.ring, af.head, af.n, af.bytes = nil, 0, 0, 0
}

// fill reads the revisions up to upTo into the ring, continuing from its
// end. The caller holds ringMu.
func (af *appFeed) fill(ctx context.Context, st store.Store, since, upTo int64) error {
	// A ring left far behind (nobody read while many commits landed) is
	// dropped rather than caught up revision by revision: followers that
	// far back read the store directly anyway.
	if af.n > 0 && upTo-af.at(af.n-1).Seq > ringSize {
		af.release()
	}
	for {
		var end int64
		if af.n > 0 {
			end = af.at(af.n - 1).Seq
		} else {
			end = max(since, upTo-fetchSize)
		}
		if end >= upTo {
			return nil
		}
		revs, err := st.Changes(ctx, af.id, "", end, fetchSize)
		if err != nil {
			return err
		}
		if len(revs) == 0 {
			return nil
		}
		for _, r := range revs {
			af.push(r)
		}
	}
}

// Feed follows the changes of an app (or of one database), filtered by
// what its reader may read.
type Feed struct {
	e      *Engine
	af     *appFeed
	actor  Actor
	ref    string
	db     string
	since  int64
	closed bool
}

// Follow opens a feed of the app's changes after since; db "" follows
// every database.
func (e *Engine) Follow(ctx context.Context, a Actor, appRef, db string, since int64) (*Feed, error) {
	app, _, err := e.readable(ctx, a, appRef, db, true)
	if err != nil {
		return nil, err
	}
	if since < 0 {
		return nil, errs.New(errs.Invalid, "since must be 0 or a sequence number from the feed")
	}
	af, err := e.feedOf(ctx, app.ID)
	if err != nil {
		return nil, err
	}
	// A position the app never reached (a reader that kept a seq across a
	// reset of the data) would wait, silently, until the app caught up.
	if last, _ := af.state(); since > last {
		return nil, errs.New(errs.Invalid, "since %d is past the latest change of %s (%d); start over with since=0", since, appRef, last)
	}
	af.mu.Lock()
	af.followers++
	af.mu.Unlock()
	return &Feed{e: e, af: af, actor: a, ref: appRef, db: db, since: since}, nil
}

// Close lets the feed go. When the app's last feed closes, the revisions
// kept for its followers are let go too. Close may be called more than
// once; a closed feed must not be read again.
func (f *Feed) Close() {
	if f.closed {
		return
	}
	f.closed = true
	af := f.af
	af.mu.Lock()
	af.followers--
	idle := af.followers == 0
	af.mu.Unlock()
	if idle {
		af.ringMu.Lock()
		af.release()
		af.ringMu.Unlock()
	}
}

// Since is the seq the feed has delivered up to.
func (f *Feed) Since() int64 { return f.since }

// Next waits for changes after the feed's position and returns those the
// reader may see, in commit order. It returns an empty page after wait
// with nothing new to show (a heartbeat's turn), and ctx's error when ctx
// ends.
func (f *Feed) Next(ctx context.Context, wait time.Duration) (Changes, error) {
	c := Changes{Changes: []Entry{}}
	err := f.scan(ctx, wait, func(r store.Revision, visible bool) bool {
		if visible {
			c.Changes = append(c.Changes, entry(r))
		}
		return visible
	})
	if err != nil {
		return Changes{}, err
	}
	c.Last = f.since
	return c, nil
}

// scan waits for revisions after the feed's position and hands each one
// of the feed's database to take, in commit order, with whether the
// reader may see it. It returns once a page had a revision take kept, or
// after wait, or with ctx's error; the position moves past every
// revision handed over.
func (f *Feed) scan(ctx context.Context, wait time.Duration, take func(r store.Revision, visible bool) bool) error {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		last, wake := f.af.state()
		if last > f.since {
			// Grants may have changed since the last page: ask again.
			app, v, err := f.e.readable(ctx, f.actor, f.ref, f.db, true)
			if err != nil {
				return err
			}
			revs, err := f.af.read(ctx, f.e.st, f.since, last, MaxLimit)
			if err != nil {
				return internal(err)
			}
			kept := false
			for _, r := range revs {
				if r.Seq > last {
					// Committed after the view was taken: a grant revoked
					// in between must apply to it, so it waits for the
					// next round and a fresh view.
					break
				}
				if (f.db == "" || r.DB == f.db) && take(r, v.sees(app, r.DB, r.Channels)) {
					kept = true
				}
				f.since = r.Seq
			}
			if kept {
				return nil
			}
			if len(revs) > 0 {
				continue
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return nil
		case <-wake:
		}
	}
}

// QueryFeed follows the documents of one database whose field equals a
// key: a snapshot, then each change that enters, stays in or leaves the
// result.
type QueryFeed struct {
	*Feed
	path    []string
	match   func(v any) bool // does the field's value belong in the result
	members map[string]bool
}

// QueryChange is one change of a live query; Match tells whether the
// document is (still) in the result.
type QueryChange struct {
	Entry
	Match bool `json:"match"`
}

// maxSnapshot bounds a live query's first answer.
const maxSnapshot = 10_000

// FollowQuery opens a live query by a field's value and returns its
// snapshot: the matching documents as of Seq; the feed continues after
// Seq.
func (e *Engine) FollowQuery(ctx context.Context, a Actor, appRef, db, field string, key json.RawMessage) (*QueryFeed, appcode.Page, int64, error) {
	if key == nil {
		key = json.RawMessage{}
	}
	return e.FollowSelect(ctx, a, appRef, db, Selector{Field: field, Key: key})
}

// FollowSelect is FollowQuery for any selector: a key, a range or a
// prefix.
func (e *Engine) FollowSelect(ctx context.Context, a Actor, appRef, db string, sel Selector) (*QueryFeed, appcode.Page, int64, error) {
	if err := ValidDB(db); err != nil {
		return nil, appcode.Page{}, 0, err
	}
	app, _, err := e.readable(ctx, a, appRef, db, false)
	if err != nil {
		return nil, appcode.Page{}, 0, err
	}
	// The position is read before the snapshot, so every commit after it
	// reaches the feed; the snapshot may already show some of them, and
	// the client keeps the newer rev.
	seq, err := e.st.LastSeq(ctx, app.ID)
	if err != nil {
		return nil, appcode.Page{}, 0, internal(err)
	}
	snap := appcode.Page{Docs: []json.RawMessage{}}
	members := map[string]bool{}
	after := ""
	for len(snap.Docs) < maxSnapshot {
		p, err := e.Select(ctx, a, appRef, db, sel, MaxLimit, after)
		if err != nil {
			return nil, appcode.Page{}, 0, err
		}
		snap.Docs = append(snap.Docs, p.Docs...)
		for _, d := range p.Docs {
			var head struct {
				ID string `json:"_id"`
			}
			json.Unmarshal(d, &head)
			members[head.ID] = true
		}
		if after = p.Next; after == "" {
			break
		}
	}
	f, err := e.Follow(ctx, a, appRef, db, seq)
	if err != nil {
		return nil, appcode.Page{}, 0, err
	}
	match, err := sel.matcher()
	if err != nil {
		f.Close()
		return nil, appcode.Page{}, 0, err
	}
	return &QueryFeed{Feed: f, path: strings.Split(sel.Field, "."), match: match, members: members}, snap, seq, nil
}

// Next returns the changes that touch the query's result, and the seq
// it has read up to. It returns no changes after wait with nothing to
// show (a heartbeat's turn), however many other changes went by.
//
// A member of the result that becomes unreadable to the reader (moved to
// a channel it is not granted, or its grant revoked) leaves the result:
// its change carries only seq, id, db and time, never the document.
func (q *QueryFeed) Next(ctx context.Context, wait time.Duration) ([]QueryChange, int64, error) {
	var out []QueryChange
	err := q.scan(ctx, wait, func(r store.Revision, visible bool) bool {
		if !visible {
			if !q.members[r.ID] {
				return false
			}
			delete(q.members, r.ID)
			out = append(out, QueryChange{Entry: Entry{Seq: r.Seq, ID: r.ID, DB: r.DB, Time: r.Time.UTC()}})
			return true
		}
		en := entry(r)
		match := !en.Deleted && q.matches(en.Doc)
		was := q.members[en.ID]
		if match {
			q.members[en.ID] = true
		} else {
			delete(q.members, en.ID)
		}
		if match || was {
			out = append(out, QueryChange{Entry: en, Match: match})
			return true
		}
		return false
	})
	if err != nil {
		return nil, q.since, err
	}
	return out, q.since, nil
}

func (q *QueryFeed) matches(doc json.RawMessage) bool {
	var v any
	if decodeJSON(doc, &v) != nil {
		return false
	}
	for _, p := range q.path {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if v, ok = m[p]; !ok {
			return false
		}
	}
	return q.match(v)
}

func decodeJSON(b []byte, v any) error {
	return json.NewDecoder(bytes.NewReader(b)).Decode(v)
}
