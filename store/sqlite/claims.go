package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/handoff-run/handoff/store"
)

// One process owns a SQLite file, so event leases live in memory: a claim
// costs a read, not a durable write, which keeps commit → onChange fast.
// After a crash there are no leases, and every unsettled event is due
// again: at least once. The runs that were in flight count (runs.go).
type leases struct {
	mu   sync.Mutex
	apps map[int64]map[int64]lease // app -> seq -> its lease
	// scans are per app claim cursors: while an app is not in full mode,
	// every live event at or below its cursor is held, so a claim reads
	// only the events above it and skips no held ones on the way.
	scans map[int64]*claimScan
	// claim holds ClaimEvents' prepared statements; the claim runs under
	// mu, so they are guarded by it too.
	claim claimStmts
	// settling marks the held events whose outcome is queued for the
	// writer: their runs are over, so they do not hold back an exclusive
	// claim, though they stay held until the outcome is written.
	settling map[int64]map[int64]bool
	// acking marks the settling events whose outcome is an ack: they are
	// as good as gone, so the next event of their document may be
	// claimed before the ack is written. Should the process die first,
	// the acked event runs again after its successor: at least once.
	acking map[int64]map[int64]bool
	// busy counts, per app and document, the held events that are not
	// being acked: the documents a claim must pass over. Kept as leases
	// come and go (hold, drop, ack), so a claim does not rebuild it from
	// every lease of the app.
	busy map[int64]map[docKey]int
	// runs are the runs in flight and their file (runs.go).
	runs *runs
}

// lease is a claim's hold on an event, with the attempts the event had
// when claimed and its document.
type lease struct {
	until    time.Time
	attempts int
	doc      docKey
}

// docKey names a document of an app.
type docKey struct{ db, id string }

// mark records in m[app] that seq is in the state m stands for.
func mark(m *map[int64]map[int64]bool, app, seq int64) {
	appMap(m, app)[seq] = true
}

// appMap returns (*m)[app], making the maps it needs.
func appMap[K comparable, V any](m *map[int64]map[K]V, app int64) map[K]V {
	if *m == nil {
		*m = map[int64]map[K]V{}
	}
	a := (*m)[app]
	if a == nil {
		a = map[K]V{}
		(*m)[app] = a
	}
	return a
}

// claimStmts are prepared once: SQLite parses a statement each time it
// is run from text, and the claim runs after every commit.
type claimStmts struct {
	due   *sql.Stmt         // the seqs of due events, in commit order
	above *sql.Stmt         // events above the cursor, in commit order
	later *sql.Stmt         // is any live event not yet due?
	byIn  map[int]*sql.Stmt // full events for n seqs (IN with n params)
}

func (l *leases) held(app int64) map[int64]lease { return appMap(&l.apps, app) }

// hold leases seq to a claim.
func (l *leases) hold(app, seq int64, le lease) {
	l.drop(app, seq)
	l.held(app)[seq] = le
	l.busyAdd(app, le.doc, 1)
}

// drop ends seq's lease and forgets that it was being acked.
func (l *leases) drop(app, seq int64) {
	held := l.held(app)
	if le, ok := held[seq]; ok && !l.acking[app][seq] {
		l.busyAdd(app, le.doc, -1)
	}
	delete(held, seq)
	delete(l.acking[app], seq)
}

// ack marks a held event as being acked: its document is free again.
func (l *leases) ack(app, seq int64) {
	le, ok := l.held(app)[seq]
	if !ok || l.acking[app][seq] {
		return
	}
	mark(&l.acking, app, seq)
	l.busyAdd(app, le.doc, -1)
}

func (l *leases) busyAdd(app int64, doc docKey, n int) {
	m := appMap(&l.busy, app)
	if m[doc] += n; m[doc] <= 0 {
		delete(m, doc)
	}
}

// claimScan is one app's claim cursor. full means an event at or below
// cursor may be due and unheld (at start, after a lease expired, a retry
// was scheduled or a dead event replayed): the next claim scans from the
// start, as before, until it sees that nothing is waiting to fall due.
type claimScan struct {
	cursor int64
	full   bool
}

func (l *leases) scan(app int64) *claimScan {
	if l.scans == nil {
		l.scans = map[int64]*claimScan{}
	}
	c := l.scans[app]
	if c == nil {
		c = &claimScan{full: true}
		l.scans[app] = c
	}
	return c
}

// release ends a lease. written is set when its outcome is in the
// database, which ends the run too. rescan is set when the event may
// still be in the outbox and due again (a retry, or an outcome that was
// not written).
func (l *leases) release(app, seq int64, written, rescan bool) {
	l.mu.Lock()
	l.drop(app, seq)
	delete(l.settling[app], seq)
	if written {
		l.runs.settled(runKey{app, seq})
	}
	if rescan {
		l.scan(app).full = true
	}
	l.mu.Unlock()
}

// ClaimEvents: an exclusive claim leases only while no lease of the app
// is live; see store.Events. One process owns the file, so the leases in
// memory are all there are.
func (s *Store) ClaimEvents(ctx context.Context, c store.Claim) ([]store.Event, error) {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	if c.Exclusive {
		for seq, l := range s.leases.held(c.AppID) {
			if l.until.After(c.Now) && !s.leases.settling[c.AppID][seq] {
				return nil, nil
			}
		}
	}
	return s.claim(ctx, c.AppID, c.Now, c.Limit, c.Lease, c.Exclusive)
}

// claim is ClaimEvents, after the check of an exclusive claim, under
// s.leases.mu.
//
// Out of full mode every live event at or below the cursor is held, so
// the only earlier live events of a document above it are held ones and
// ones above the cursor: memory tells which documents those are. An
// event behind one of them is left for the database's claim (full mode),
// which passes over it.
func (s *Store) claim(ctx context.Context, appID int64, now time.Time, limit int, d time.Duration, exclusive bool) ([]store.Event, error) {
	held := s.leases.held(appID)
	sc := s.leases.scan(appID)
	for seq, l := range held {
		if !l.until.After(now) {
			s.leases.drop(appID, seq)
			delete(s.leases.settling[appID], seq)
			sc.full = true
		}
	}
	var pick []int64
	var err error
	if !sc.full {
		free := s.leases.docGate(appID, exclusive)
		evs, ok := s.recent.above(appID, sc.cursor, now.UnixNano(), limit, func(ev *store.Event) bool {
			if !free(docKey{ev.Rev.DB, ev.Rev.ID}) {
				sc.full = true
				return false
			}
			return true
		})
		if ok {
			for _, ev := range evs {
				s.leases.hold(appID, ev.Seq, lease{now.Add(d), ev.Attempts, docKey{ev.Rev.DB, ev.Rev.ID}})
			}
			if len(evs) > 0 {
				sc.cursor = evs[len(evs)-1].Seq
			}
			return evs, nil
		}
		if !sc.full {
			pick, err = s.seqsAbove(ctx, appID, now, limit, sc, s.leases.docGate(appID, exclusive))
			if err != nil {
				return nil, err
			}
		}
	}
	if sc.full {
		// Choose by seq alone first: the held events are usually the oldest
		// due ones (up to concurrency × batch of them), and reading their
		// revisions only to skip them cost more than the rest of the claim.
		if pick, err = s.dueSeqs(ctx, appID, now, limit, held, sc, exclusive); err != nil {
			return nil, err
		}
	}
	if len(pick) == 0 {
		return nil, nil
	}
	st, err := s.eventsIn(len(pick))
	if err != nil {
		return nil, err
	}
	args := make([]any, 0, 1+len(pick))
	args = append(args, appID)
	for _, seq := range pick {
		args = append(args, seq)
	}
	rows, err := st.QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	out, err := scanEvents(appID, rows)
	if err != nil {
		return nil, err
	}
	for i := range out {
		ev := &out[i]
		// A run that started and never settled, though its lease ran out:
		// it was interrupted. The attempt counts.
		if n, ok := s.leases.runs.live[runKey{appID, ev.Seq}]; ok {
			ev.Interrupted, ev.Attempts = true, max(ev.Attempts, n)
		}
		s.leases.hold(appID, ev.Seq, lease{now.Add(d), ev.Attempts, docKey{ev.Rev.DB, ev.Rev.ID}})
	}
	s.recent.passed(appID, pick[len(pick)-1])
	if !sc.full {
		sc.cursor = max(sc.cursor, pick[len(pick)-1])
	}
	return out, nil
}

// docGate returns the test of the fast claim path's documents: free
// reports whether no live event of the document is held (but for acks
// under way) or already picked, and counts the document as picked. An
// exclusive claim runs what it takes one after another: every document
// is free. Called with l.mu held.
func (l *leases) docGate(app int64, exclusive bool) (free func(docKey) bool) {
	if exclusive {
		return func(docKey) bool { return true }
	}
	busy := l.busy[app]
	var picked map[docKey]bool
	return func(k docKey) bool {
		if busy[k] > 0 || picked[k] {
			return false
		}
		if picked == nil {
			picked = map[docKey]bool{}
		}
		picked[k] = true
		return true
	}
}

// seqsAbove returns up to limit seqs of events above the cursor, all due,
// unheld and free by the gate. Meeting one that is dead, not yet due or
// not free switches the app to full mode instead. Called with leases.mu
// held.
func (s *Store) seqsAbove(ctx context.Context, appID int64, now time.Time, limit int, sc *claimScan, free func(docKey) bool) ([]int64, error) {
	c := &s.leases.claim
	if c.above == nil {
		st, err := s.rdb.PrepareContext(ctx, `SELECT seq, dead, next_at, db, doc_id FROM events WHERE app_id = ? AND seq > ? ORDER BY seq LIMIT ?`)
		if err != nil {
			return nil, err
		}
		c.above = st
	}
	rows, err := c.above.QueryContext(ctx, appID, sc.cursor, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var pick []int64
	for rows.Next() {
		var seq, at int64
		var dead bool
		var k docKey
		if err := rows.Scan(&seq, &dead, &at, &k.db, &k.id); err != nil {
			return nil, err
		}
		if dead || at > now.UnixNano() || !free(k) {
			sc.full = true
			return nil, nil
		}
		pick = append(pick, seq)
	}
	return pick, rows.Err()
}

// dueSeqs returns up to limit seqs of due, live events that nobody holds,
// in commit order, passing over the events of a document behind an
// earlier live one (for an exclusive claim, behind one backing off).
// Called with leases.mu held.
//
// When the scan reached the end of the due events, passed over none for
// its document, and no live event waits to fall due, every live event it
// passed is held or picked: the app leaves full mode with its cursor at
// the last seq seen.
func (s *Store) dueSeqs(ctx context.Context, appID int64, now time.Time, limit int, held map[int64]lease, sc *claimScan, exclusive bool) ([]int64, error) {
	c := &s.leases.claim
	if c.due == nil {
		// The unary + keeps dead and next_at out of the index choice: the
		// primary key already yields seqs in order, so the scan stops once
		// limit are picked, past the held and waiting ones on the way,
		// which are few, where events_due would sort the whole backlog of
		// due events on every claim. Per row, prev (the latest earlier
		// live event of the document) and backoff (is one of those not
		// due yet?) are probes of events_by_doc.
		st, err := s.rdb.PrepareContext(ctx, `SELECT e.seq,
			(SELECT max(p.seq) FROM events p WHERE p.app_id = e.app_id AND p.db = e.db AND p.doc_id = e.doc_id AND p.dead = 0 AND p.seq < e.seq),
			EXISTS (SELECT 1 FROM events p WHERE p.app_id = e.app_id AND p.db = e.db AND p.doc_id = e.doc_id AND p.dead = 0 AND p.seq < e.seq AND p.next_at > ?2)
			FROM events e WHERE e.app_id = ?1 AND +e.dead = 0 AND +e.next_at <= ?2 ORDER BY e.seq`)
		if err != nil {
			return nil, err
		}
		c.due = st
	}
	rows, err := c.due.QueryContext(ctx, appID, now.UnixNano())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var pick []int64
	last, behind, end := int64(0), false, true
	for {
		if len(pick) == limit {
			end = false
			break
		}
		if !rows.Next() {
			break
		}
		var seq int64
		var prev sql.NullInt64
		var backoff bool
		if err := rows.Scan(&seq, &prev, &backoff); err != nil {
			return nil, err
		}
		last = seq
		if _, busy := held[seq]; busy {
			continue
		}
		// An earlier event of the document still to run, or running. An
		// ack under way counts as done (see leases.acking).
		wait := backoff
		if !exclusive && prev.Valid && !s.leases.acking[appID][prev.Int64] {
			wait = true
		}
		if wait {
			behind = true
			continue
		}
		pick = append(pick, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if end && !behind {
		// The scan saw every due event, in order, up to last, and none
		// after it: each is held or picked now, and no held one is above
		// last. Leave full mode if no live event waits to fall due.
		if c.later == nil {
			st, err := s.rdb.PrepareContext(ctx, `SELECT 1 FROM events WHERE app_id = ? AND dead = 0 AND next_at > ? LIMIT 1`)
			if err != nil {
				return nil, err
			}
			c.later = st
		}
		var one int
		switch err := c.later.QueryRowContext(ctx, appID, now.UnixNano()).Scan(&one); {
		case errors.Is(err, sql.ErrNoRows):
			sc.full, sc.cursor = false, max(last, sc.cursor)
		case err != nil:
			return nil, err
		}
	}
	return pick, nil
}

// eventsIn returns the statement reading n events by seq. Called with
// leases.mu held.
func (s *Store) eventsIn(n int) (*sql.Stmt, error) {
	c := &s.leases.claim
	if st := c.byIn[n]; st != nil {
		return st, nil
	}
	st, err := s.rdb.Prepare(`SELECT ` + eventCols + eventFrom + `
		WHERE e.app_id = ? AND e.dead = 0 AND e.seq IN (?` + strings.Repeat(", ?", n-1) + `) ORDER BY e.seq`)
	if err != nil {
		return nil, err
	}
	if c.byIn == nil {
		c.byIn = map[int]*sql.Stmt{}
	}
	c.byIn[n] = st
	return st, nil
}
