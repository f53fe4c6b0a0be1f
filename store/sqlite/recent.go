package sqlite

import (
	"sync"
	"time"

	"github.com/handoff-run/handoff/store"
)

// Most events are claimed a moment after their commit, while the writer
// still has everything onChange needs in hand: the revision it wrote and
// the head it replaced. recentEvents keeps those events, so a claim in
// commit order reads them from memory instead of joining events with the
// ledger twice. The outbox table stays the truth: whenever memory cannot
// tell for sure that it holds every event in question, the claim asks the
// database.
const (
	recentMax      = 16384    // events, across apps
	recentBytesMax = 64 << 20 // their bodies, across apps
)

type recentEvents struct {
	mu    sync.Mutex
	apps  map[int64]*appRecent
	n     int // events held, across apps
	bytes int // their bodies' sizes
}

// appRecent holds one app's events in seq order: every event this process
// committed with a seq above covered that no claim has handed out yet.
// Those are live, unleased and never attempted, whatever mode the app's
// claims are in; an event handed out once, and later released, is the
// database's to hand out again. covered is -1 until the first event.
type appRecent struct {
	evs     []store.Event
	covered int64
}

// recentEvent is an event the writer committed; hole marks one it could
// not build in full, which only the database can hand out.
type recentEvent struct {
	ev   store.Event
	hole bool
}

func eventBytes(ev *store.Event) int {
	n := len(ev.Rev.Body)
	if ev.Old != nil {
		n += len(ev.Old.Body)
	}
	return n
}

func (r *recentEvents) app(id int64) *appRecent {
	if r.apps == nil {
		r.apps = map[int64]*appRecent{}
	}
	ar := r.apps[id]
	if ar == nil {
		ar = &appRecent{covered: -1}
		r.apps[id] = ar
	}
	return ar
}

// add records events the writer just committed, in seq order per app.
// Events committed before this process opened the file are older than the
// first one recorded, hence at or below covered. An event that a claim
// took from the database in the moment between its commit and this call
// is at or below covered too, and stays the database's.
func (r *recentEvents) add(evs []recentEvent) {
	if len(evs) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, re := range evs {
		ev := re.ev
		ar := r.app(ev.AppID)
		if ar.covered < 0 {
			ar.covered = ev.Seq - 1
		}
		if ev.Seq <= ar.covered {
			continue
		}
		if re.hole || eventBytes(&ev) > store.HeadCacheBodyMax {
			r.forget(ar, len(ar.evs))
			ar.covered = ev.Seq
			continue
		}
		ar.evs = append(ar.evs, ev)
		r.n++
		r.bytes += eventBytes(&ev)
		for r.n > recentMax || r.bytes > recentBytesMax {
			r.shed()
		}
	}
}

// passed tells memory that a claim from the database handed out events up
// to seq: memory answers only above it from now on.
func (r *recentEvents) passed(app, seq int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ar := r.app(app)
	if seq <= ar.covered {
		return
	}
	i := 0
	for i < len(ar.evs) && ar.evs[i].Seq <= seq {
		i++
	}
	r.forget(ar, i)
	ar.covered = seq
}

// forget drops the app's first n events.
func (r *recentEvents) forget(ar *appRecent, n int) {
	for i := range n {
		r.bytes -= eventBytes(&ar.evs[i])
	}
	r.n -= n
	if n == len(ar.evs) {
		ar.evs = nil // let a drained backlog's array go
		return
	}
	k := copy(ar.evs, ar.evs[n:])
	clear(ar.evs[k:])
	ar.evs = ar.evs[:k]
}

// shed forgets the older half of the biggest backlog, which nobody is
// claiming fast enough; the database answers for those events.
func (r *recentEvents) shed() {
	var big *appRecent
	for _, ar := range r.apps {
		if big == nil || len(ar.evs) > len(big.evs) {
			big = ar
		}
	}
	drop := max(1, len(big.evs)/2)
	big.covered = big.evs[drop-1].Seq
	r.forget(big, drop)
}

// above hands out up to limit of the app's events above cursor, in seq
// order, forgetting them and the ones at or below it. ok is false when
// memory cannot answer for certain: events above cursor may be missing,
// or one of them is not due by now or refused by take (the database's
// claim handles all three).
func (r *recentEvents) above(app, cursor int64, now int64, limit int, take func(*store.Event) bool) (evs []store.Event, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ar := r.apps[app]
	if ar == nil || ar.covered < 0 || cursor < ar.covered {
		return nil, false
	}
	i := 0
	for i < len(ar.evs) && ar.evs[i].Seq <= cursor {
		i++
	}
	r.forget(ar, i)
	for _, ev := range ar.evs[:min(limit, len(ar.evs))] {
		if ev.NextAt.UnixNano() > now || !take(&ev) {
			return nil, false
		}
		evs = append(evs, ev)
	}
	// Handed out: from now on the database answers for them.
	r.forget(ar, len(evs))
	return evs, true
}

// earliest returns the earliest NextAt of the app's events above cursor,
// with ok false when memory cannot answer for all of them.
func (r *recentEvents) earliest(app, cursor int64) (at time.Time, found, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ar := r.apps[app]
	if ar == nil || ar.covered < 0 || cursor < ar.covered {
		return time.Time{}, false, false
	}
	for _, ev := range ar.evs {
		if ev.Seq > cursor && (!found || ev.NextAt.Before(at)) {
			at, found = ev.NextAt, true
		}
	}
	return at, found, true
}

// eventOf builds the event of a write the writer applied. It is a hole
// when the replaced head came from the database, without its body.
func eventOf(wr *store.Write, seq int64, cur, next *head) recentEvent {
	ev := store.Event{AppID: wr.AppID, Seq: seq, Depth: wr.Event.Depth, Origin: wr.Event.Origin, NextAt: time.Unix(0, wr.Event.NextAt.UnixNano()),
		Rev: store.Revision{Doc: next.doc, Writer: wr.Writer, Path: wr.Path}}
	ev.Rev.HasGrants = false
	if cur.doc.Rev != "" && !cur.doc.Deleted {
		if cur.doc.Body == nil {
			return recentEvent{ev: ev, hole: true}
		}
		ev.Old = &store.Revision{Doc: store.Doc{DB: wr.DB, ID: wr.ID, Rev: cur.doc.Rev, Seq: cur.doc.Seq, Body: cur.doc.Body}}
	}
	return recentEvent{ev: ev}
}
