package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/handoff-run/handoff/store"
)

var eventCols = store.EventCols("r.user, r.device, r.handler")

const eventFrom = ` FROM events e
	JOIN revisions r ON r.app_id = e.app_id AND r.seq = e.seq
	LEFT JOIN revisions o ON o.app_id = e.app_id AND o.seq = r.prev_seq AND r.prev_seq > 0`

func (s *Store) NextEventDue(ctx context.Context, appID int64) (time.Time, bool, error) {
	s.leases.mu.Lock()
	held := s.leases.held(appID)
	n := len(held)
	sc := s.leases.scan(appID)
	full, cursor := sc.full, sc.cursor
	s.leases.mu.Unlock()
	if !full {
		// Out of full mode no live event at or below the cursor is unheld:
		// the answer is among the events above it, which memory usually
		// holds, and which are few.
		if at, found, ok := s.recent.earliest(appID, cursor); ok {
			return at, found, nil
		}
		var at sql.NullInt64
		if err := s.reads.firstAbove.QueryRowContext(ctx, appID, cursor).Scan(&at); err != nil {
			return time.Time{}, false, err
		}
		if !at.Valid {
			return time.Time{}, false, nil
		}
		return time.Unix(0, at.Int64), true, nil
	}
	// Skip past leased events: they are someone's work already.
	rows, err := s.rdb.QueryContext(ctx, `SELECT seq, next_at FROM events WHERE app_id = ? AND dead = 0 ORDER BY next_at LIMIT ?`, appID, n+1)
	if err != nil {
		return time.Time{}, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var seq, at int64
		if err := rows.Scan(&seq, &at); err != nil {
			return time.Time{}, false, err
		}
		s.leases.mu.Lock()
		_, busy := s.leases.held(appID)[seq]
		s.leases.mu.Unlock()
		if !busy {
			return time.Unix(0, at), true, nil
		}
	}
	return time.Time{}, false, rows.Err()
}

// StartEvent records the run in the runs file (runs.go) before it begins.
func (s *Store) StartEvent(ctx context.Context, appID, seq int64) error {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	l, ok := s.leases.held(appID)[seq]
	if !ok {
		return fmt.Errorf("event %d is not leased: %w", seq, store.ErrNotFound)
	}
	return s.leases.runs.start(runKey{appID, seq}, l.attempts+1)
}

func (s *Store) SettleEvent(ctx context.Context, appID, seq int64, st store.Settlement) error {
	// The lease ends once the outcome is in the database, so the event is
	// never claimed again in between.
	release := func(err error) { s.leases.release(appID, seq, err == nil, err != nil || !st.Ack) }
	s.leases.mu.Lock()
	if l, ok := s.leases.runs.live[runKey{appID, seq}]; ok && !st.Ack && st.Attempts < l {
		// The run is given back: it must not count if the process dies
		// before the outcome is written.
		if err := s.leases.runs.void(runKey{appID, seq}); err != nil {
			s.leases.mu.Unlock()
			return err
		}
	}
	if _, ok := s.leases.held(appID)[seq]; ok {
		mark(&s.leases.settling, appID, seq)
		if st.Ack {
			s.leases.ack(appID, seq)
		}
	}
	s.leases.mu.Unlock()
	if st.Ack {
		return s.enqueueAck(appID, seq, release)
	}
	// Other outcomes are rare, and may be due at once (a run given back):
	// the caller may claim the event again as soon as this returns.
	return s.enqueueWait(func(tx *sql.Tx) error {
		_, err := tx.Exec(`UPDATE events SET attempts = ?, next_at = ?, dead = ?, last_error = ?, running = 0 WHERE app_id = ? AND seq = ?`,
			st.Attempts, st.NextAt.UnixNano(), st.Dead, st.LastError, appID, seq)
		return err
	}, release)
}

// RenewEvents moves the ends of leases in memory: one process owns the
// file, so nobody else could take the events anyway but this process
// after a lease ends.
func (s *Store) RenewEvents(ctx context.Context, appID int64, seqs []int64, until time.Time) error {
	s.leases.mu.Lock()
	defer s.leases.mu.Unlock()
	held := s.leases.held(appID)
	for _, seq := range seqs {
		if l, ok := held[seq]; ok {
			l.until = until
			held[seq] = l
		}
	}
	return nil
}

func (s *Store) ListEvents(ctx context.Context, appID int64, dead bool, afterSeq int64, limit int) ([]store.Event, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+eventCols+eventFrom+`
		WHERE e.app_id = ? AND e.dead = ? AND e.seq > ? ORDER BY e.seq LIMIT ?`, appID, dead, afterSeq, limit)
	if err != nil {
		return nil, err
	}
	evs, err := scanEvents(appID, rows)
	// A run in flight counts already, though only the runs file says so.
	s.leases.mu.Lock()
	for i := range evs {
		if n, ok := s.leases.runs.live[runKey{appID, evs[i].Seq}]; ok && !evs[i].Dead {
			evs[i].Attempts = max(evs[i].Attempts, n)
			evs[i].Running = true
		}
		evs[i].Interrupted = false
	}
	s.leases.mu.Unlock()
	return evs, err
}

func (s *Store) ReplayEvent(ctx context.Context, appID, seq int64, now time.Time) error {
	// The attempts start over: no earlier run of it may count on open.
	s.leases.mu.Lock()
	err := s.leases.runs.void(runKey{appID, seq})
	s.leases.mu.Unlock()
	if err != nil {
		return err
	}
	res, err := s.wdb.ExecContext(ctx, `UPDATE events SET dead = 0, attempts = 0, next_at = ?, last_error = '', running = 0, origin = 0 WHERE app_id = ? AND seq = ? AND dead = 1`,
		now.UnixNano(), appID, seq)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("dead event %d: %w", seq, store.ErrNotFound)
	}
	s.leases.mu.Lock()
	s.leases.scan(appID).full = true
	s.leases.mu.Unlock()
	return nil
}

func (s *Store) EventApps(ctx context.Context) ([]int64, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT DISTINCT app_id FROM events WHERE dead = 0`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

func (s *Store) SaveTick(ctx context.Context, appID int64, t store.Tick) error {
	_, err := s.wdb.ExecContext(ctx, `INSERT INTO ticks (app_id, planned, started, duration, error) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (app_id) DO UPDATE SET planned = excluded.planned, started = excluded.started,
		duration = excluded.duration, error = excluded.error`,
		appID, t.Planned.UnixNano(), t.Started.UnixNano(), int64(t.Duration), t.Error)
	return err
}

func (s *Store) LastTick(ctx context.Context, appID int64) (*store.Tick, error) {
	var t store.Tick
	var planned, started, dur int64
	err := s.rdb.QueryRowContext(ctx, `SELECT planned, started, duration, error FROM ticks WHERE app_id = ?`, appID).
		Scan(&planned, &started, &dur, &t.Error)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	t.Planned, t.Started, t.Duration = time.Unix(0, planned), time.Unix(0, started), time.Duration(dur)
	return &t, nil
}

func scanEvents(appID int64, rows *sql.Rows) ([]store.Event, error) {
	defer rows.Close()
	var out []store.Event
	for rows.Next() {
		ev := store.Event{AppID: appID}
		var next, t int64
		var body, ch sql.NullString
		var oSeq sql.NullInt64
		var oRev, oBody sql.NullString
		var oDeleted sql.NullBool
		r := &ev.Rev
		if err := rows.Scan(&ev.Seq, &ev.Depth, &ev.Origin, &ev.Attempts, &next, &ev.Dead, &ev.LastError, &ev.Interrupted,
			&r.DB, &r.ID, &r.Rev, &r.Deleted, &body, &t, &r.Writer.User, &r.Writer.Device, &r.Writer.Handler, &r.Path, &ch,
			&oSeq, &oRev, &oDeleted, &oBody); err != nil {
			return nil, err
		}
		ev.NextAt = time.Unix(0, next)
		r.Seq, r.Time, r.Channels = ev.Seq, time.Unix(0, t), parseChannels(ch)
		if body.Valid {
			r.Body = []byte(body.String)
		}
		if oSeq.Valid && !oDeleted.Bool {
			ev.Old = &store.Revision{Doc: store.Doc{DB: r.DB, ID: r.ID, Rev: oRev.String, Seq: oSeq.Int64, Body: []byte(oBody.String)}}
		}
		out = append(out, ev)
	}
	return out, rows.Err()
}
