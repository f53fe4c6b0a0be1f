package engine

// The live feed (docs/architecture.md, "The live feed"): package feed
// keeps each app's latest revisions for its followers; a Feed here shows
// one reader what it may read of them.

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"sync/atomic"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/feed"
	"github.com/handoff-run/handoff/store"
)

// Feed follows the changes of an app (or of one database), filtered by
// what its reader may read.
type Feed struct {
	e      *Engine
	af     *feed.App
	actor  Actor
	ref    string
	appID  int64
	db     string
	since  int64
	closed bool
	// recheck is signalled when the reader may have lost its right to
	// read: a credential revoked, the app's members changed (revoke.go).
	recheck chan struct{}
	// gen is the reader's revocation generation, seen its value at the
	// last check that passed; stale asks for a check before the next
	// page, and checked is when the last one passed.
	gen     *atomic.Uint64
	seen    uint64
	stale   bool
	checked time.Time
}

// checkEvery is how many heartbeats may pass without a check of the
// reader, so a revocation whose word never arrived from another node
// still ends the feed.
const checkEvery = 4

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
	af, err := e.feeds.Open(ctx, app.ID)
	if err != nil {
		return nil, internal(err)
	}
	// A position the app never reached (a reader that kept a seq across a
	// reset of the data) would wait, silently, until the app caught up.
	if last, _ := af.State(); since > last {
		af.Close()
		return nil, errs.New(errs.Invalid, "since %d is past the latest change of %s (%d); start over with since=0", since, appRef, last)
	}
	// The check is done again once the feed is registered: a revocation
	// between the first check and the registration would wake nothing.
	f := &Feed{e: e, af: af, actor: a, ref: appRef, appID: app.ID, db: db, since: since,
		recheck: make(chan struct{}, 1), gen: e.open.gen(a.User), stale: true}
	e.open.add(f)
	if err := f.checkDue(ctx, 0); err != nil {
		f.Close()
		return nil, err
	}
	if f.stale { // the store failed: a feed starts only on a check that passed
		f.Close()
		return nil, errs.New(errs.Unavailable, "could not check your credential for the feed; retry in a moment")
	}
	return f, nil
}

// checkDue asks again, when it is due, whether the feed's reader may
// still read: whether its credential holds and the app still lets it
// read the feed's databases. It is due when a revocation may concern the
// reader, and every checkEvery heartbeats of wait. A store that fails to
// answer leaves the check due for the next time: a blip of the database
// must not end every stream at once.
func (f *Feed) checkDue(ctx context.Context, wait time.Duration) error {
	g := f.gen.Load()
	if !f.stale && g == f.seen && time.Since(f.checked) < checkEvery*wait {
		return nil
	}
	err := f.e.id.Recheck(ctx, f.actor)
	if err == nil {
		_, _, err = f.e.readable(ctx, f.actor, f.ref, f.db, true)
	}
	switch {
	case err == nil:
		f.seen, f.stale, f.checked = g, false, time.Now()
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errs.Is(err, errs.Internal) || errs.Is(err, errs.Unavailable):
		f.stale = true
		return nil
	}
	return err
}

// Close lets the feed go. When the app's last feed closes, the revisions
// kept for its followers are let go too. Close may be called more than
// once; a closed feed must not be read again.
func (f *Feed) Close() {
	if f.closed {
		return
	}
	f.closed = true
	f.e.open.remove(f)
	f.af.Close()
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
		select {
		case <-f.recheck:
			f.stale = true
		default:
		}
		last, wake := f.af.State()
		if last > f.since {
			// Checked after the position is read: a revocation that
			// commits after this check comes before any commit past last.
			if err := f.checkDue(ctx, wait); err != nil {
				return err
			}
			// Grants may have changed since the last page: ask again.
			app, v, err := f.e.readable(ctx, f.actor, f.ref, f.db, true)
			if err != nil {
				return err
			}
			revs, err := f.af.Read(ctx, f.since, last, MaxLimit)
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
			// A heartbeat's turn: check the reader too when it is due, in
			// case word of a revocation on another node was lost.
			return f.checkDue(ctx, wait)
		case <-f.recheck:
			f.stale = true
			if err := f.checkDue(ctx, wait); err != nil {
				return err
			}
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
