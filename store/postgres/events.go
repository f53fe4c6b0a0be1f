package postgres

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoff-run/handoff/store"
)

// Event leases live in the events table (lease_until, lease_owner), so
// every node sharing the database sees them: a claim takes due, unleased
// events with FOR UPDATE SKIP LOCKED, so two nodes claiming at once never
// get the same event and never wait for each other. A node that dies
// keeps its leases until they run out; then any node claims the events
// again (at least once). Times are the callers' clocks (the engine's), in
// nanoseconds, as everywhere in this store.

var eventCols = store.EventCols("r.writer_user, r.writer_device, r.writer_handler")

// claimCols is eventCols with the attempts and the running mark as the
// claim found them (picked p), before a Claim.Start marked the run.
var claimCols = strings.NewReplacer("e.attempts", "p.attempts", "e.running", "p.running").Replace(eventCols)

const eventJoins = `
	JOIN revisions r ON r.app_id = e.app_id AND r.seq = e.seq
	LEFT JOIN revisions o ON o.app_id = e.app_id AND o.seq = r.prev_seq AND r.prev_seq > 0`

// sqlClaim leases up to $3 due events ($2 is now) of app $1 to node $5
// until $4, lowest seq first, and returns them with their revisions.
// Candidates come from two small indexes, so a claim costs the same
// however many events wait or are leased: the lowest free ones
// (events_free) and the lowest whose lease ran out (events_lease_end).
// Each side offers more than $3, and at least 200 more, for those other
// nodes' claims (of up to 100) hold at the same moment: SKIP LOCKED
// passes them over, and a claim that comes back short must have seen
// every due event no other claim held.
//
// gate keeps a candidate c to the head of its document: ClaimEvents
// passes over an event while an earlier live event of its document
// exists (running, leased or backing off, on any node), one probe of
// events_by_doc each. The events behind a head are few (a document's
// writes during one run), so the scan stays short.
//
// Every later step touches only the rows picked: each candidate is
// locked through a LATERAL lookup of its key (kept a nested loop, in seq
// order, by OFFSET 0), the update finds them by key, and each revision
// is a key lookup. The update matches by seq, not by the locked row's
// ctid: a row another transaction changed since this statement's
// snapshot is locked in its newest version, which only a match by key
// (rechecked on that version) finds.
func claimSQL(gate string) string {
	return `WITH cand AS (
		(SELECT seq FROM events c WHERE app_id = $1 AND NOT dead AND lease_until = 0 AND next_at <= $2` + gate + `
		ORDER BY seq LIMIT 2 * $3 + 200)
		UNION ALL
		(SELECT seq FROM events c WHERE app_id = $1 AND NOT dead AND lease_until > 0 AND lease_until <= $2 AND next_at <= $2` + gate + `
		ORDER BY seq LIMIT 2 * $3 + 200)
	), picked AS (
		SELECT ev.seq, ev.attempts, ev.running FROM (SELECT seq FROM cand ORDER BY seq OFFSET 0) c,
		LATERAL (SELECT seq, attempts, running FROM events WHERE app_id = $1 AND seq = c.seq
			AND NOT dead AND next_at <= $2 AND lease_until <= $2
			FOR UPDATE SKIP LOCKED OFFSET 0) ev
		LIMIT $3
	), e AS (
		UPDATE events SET lease_until = $4, lease_owner = $5,
			attempts = attempts + (CASE WHEN $6 AND NOT running THEN 1 ELSE 0 END), running = running OR $6
		WHERE app_id = $1 AND seq = ANY(ARRAY(SELECT seq FROM picked))
		RETURNING *
	)
	SELECT ` + claimCols + ` FROM e
	JOIN picked p ON p.seq = e.seq
	CROSS JOIN LATERAL (SELECT * FROM revisions WHERE app_id = $1 AND seq = e.seq OFFSET 0) r
	LEFT JOIN LATERAL (SELECT * FROM revisions WHERE app_id = $1 AND seq = r.prev_seq AND r.prev_seq > 0 OFFSET 0) o ON true
	ORDER BY e.seq`
}

// earlierOfDoc is the condition "an earlier live event of candidate c's
// document exists", with more conditions on that event.
func earlierOfDoc(more string) string {
	return `EXISTS (SELECT 1 FROM events p WHERE p.app_id = $1 AND p.db = c.db AND p.doc_id = c.doc_id
			AND p.seq < c.seq AND NOT p.dead` + more + `)`
}

var sqlClaim = claimSQL(`
		AND NOT ` + earlierOfDoc(""))

// sqlClaimExclusive is sqlClaim that picks nothing while any live event
// of the app is leased (an exclusive ClaimEvents). The caller holds the app's
// claim lock, so the check and the lease are one step across nodes. It
// takes a document's due events together, in order, for they run one
// after another; only an earlier event backing off holds one back.
var sqlClaimExclusive = claimSQL(`
		AND NOT EXISTS (SELECT 1 FROM events WHERE app_id = $1 AND NOT dead AND lease_until > $2)
		AND NOT ` + earlierOfDoc(" AND p.next_at > $2"))

// sqlClaimLock serialises exclusive claims of one app across nodes. Taken
// in the claim's transaction, before the claim statement, so the claim's
// snapshot sees the leases of the claim that held the lock before it.
const sqlClaimLock = `SELECT pg_advisory_xact_lock($1::int4, ($2::int8 % 2147483647)::int4)`

// claimLockSpace is the first key of the claim locks ("hc" for handoff
// claims), apart from the migration and index locks.
const claimLockSpace = 0x6863

// sqlClaimPlan plans each claim for the tables as they are: a plan kept
// from when they were empty would scan them once they are not. Every
// join of the claim is a nested loop of key lookups, so the planner is
// spared costing hash joins, merge joins and memoization, which are most
// of the time it spends on each claim. It also sets synchronous_commit, in
// the same statement.
const sqlClaimPlan = `SELECT set_config('synchronous_commit', 'off', true), set_config('plan_cache_mode', 'force_custom_plan', true),
	set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true), set_config('enable_memoize', 'off', true)`

// ClaimEvents does not wait for the WAL flush: other nodes see the lease
// as soon as it commits, and a lease lost in a crash of the database only
// means one more delivery (at least once). The deliverer claims one batch
// after another, so a flush per claim would bound every app's delivery
// rate by the flush time.
// An exclusive claim leases only while no node holds a live lease of the
// app; see store.Events.
// With c.Start it also marks the runs begun (see settle.go for StartEvent's
// own mark, which it spares).
func (s *Store) ClaimEvents(ctx context.Context, c store.Claim) ([]store.Event, error) {
	appID, now, limit, lease, exclusive := c.AppID, c.Now, c.Limit, c.Lease, c.Exclusive
	if limit <= 0 {
		return nil, nil
	}
	// Planning a claim costs several times what running it does, and
	// most claims, made on the wake-up of a commit whose event the commit
	// claimed itself, find nothing due: one look at events_due spares
	// them the planning, and a recent look spares them the round trip.
	if m, fresh := s.dueMemo(appID); fresh && (!m.ok || m.at > now.UnixNano()) {
		return nil, nil
	}
	drops := s.dues.drops(appID)
	at, ok, err := s.nextDue(ctx, appID)
	if s.afterDueRead != nil {
		s.afterDueRead()
	}
	if err != nil || !ok || at > now.UnixNano() {
		if err == nil {
			s.dues.set(appID, drops, dueMemo{at: at, ok: ok, read: time.Now()})
		}
		return nil, err
	}
	var evs []store.Event
	// One implicit transaction, as asyncBatch, whose first statement also
	// sets the claim's planning.
	b := &pgx.Batch{}
	b.Queue(sqlClaimPlan)
	q := sqlClaim
	if exclusive {
		b.Queue(sqlClaimLock, claimLockSpace, appID)
		q = sqlClaimExclusive
	}
	start := c.Start && !c.Exclusive
	b.Queue(q, appID, now.UnixNano(), limit, now.Add(lease).UnixNano(), s.node, start).Query(func(rows pgx.Rows) error {
		var err error
		evs, err = scanEvents(appID, rows, nil)
		for i := range evs {
			evs[i].Started = start && !evs[i].Interrupted
		}
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return nil, err
	}
	return evs, nil
}

// NextEventDue reports when the app's next live event can be claimed:
// its NextAt, or, while it is leased, the end of its lease, when it is
// due again unless its delivery settles first. An event leased to a node
// that died is thus retried on time by the others.
func (s *Store) NextEventDue(ctx context.Context, appID int64) (time.Time, bool, error) {
	if m, fresh := s.dueMemo(appID); fresh {
		if !m.ok {
			return time.Time{}, false, nil
		}
		return fromNanos(m.at), true, nil
	}
	at, ok, err := s.nextDue(ctx, appID)
	if err != nil || !ok {
		return time.Time{}, false, err
	}
	return fromNanos(at), true, nil
}

// nextDue is NextEventDue in nanoseconds, read from events_due: an event
// can be claimed at now only if one is due by now.
func (s *Store) nextDue(ctx context.Context, appID int64) (at int64, ok bool, err error) {
	s.dueReads.Add(1)
	// In the order of events_due, which a generic plan made while the
	// statistics said the table was empty would otherwise trade for a
	// scan and a sort.
	b := &pgx.Batch{}
	b.Queue(sqlKeyPlans)
	b.Queue(sqlNextDue, appID).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&at)
		ok = err == nil
		if noRows(err) {
			return nil
		}
		return err
	})
	return at, ok, s.pool.SendBatch(ctx, b).Close()
}

const sqlNextDue = `SELECT greatest(next_at, lease_until) FROM events WHERE app_id = $1 AND NOT dead
	ORDER BY greatest(next_at, lease_until) LIMIT 1`

// StartEvent marks the run in the next flush of acks (settle.go), which
// does not wait for the WAL flush: the mark guards against a crash of
// this node, and PostgreSQL keeps what it committed when a client dies.
// It holds while this node holds the lease.
func (s *Store) StartEvent(ctx context.Context, appID, seq int64) error {
	return s.ack(ctx, appID, seq, true)
}

// SettleEvent does not wait for the WAL flush (the contract lets a
// settlement become durable after it returns: lost in a crash, it costs
// one more delivery once the lease runs out). Acks share transactions;
// see settle.go.
// A retry or a death is recorded only while this node still holds the
// lease: after it ran out and another node took the event, that node's
// outcome counts.
func (s *Store) SettleEvent(ctx context.Context, appID, seq int64, st store.Settlement) error {
	// An ack lets the document's next event run, a retry may be due at
	// once: the memo goes before, for the looks from now on, and after,
	// for a look whose read came before the settlement.
	s.dues.drop(appID)
	defer s.dues.drop(appID)
	if st.Ack {
		return s.ack(ctx, appID, seq, false)
	}
	b := asyncBatch()
	b.Queue(`UPDATE events SET attempts = $3, next_at = $4, dead = $5, last_error = $6, running = false, lease_until = 0, lease_owner = ''
		WHERE app_id = $1 AND seq = $2 AND lease_owner IN ($7, '')`,
		appID, seq, st.Attempts, st.NextAt.UnixNano(), st.Dead, pgText(st.LastError), s.node)
	return s.pool.SendBatch(ctx, b).Close()
}

// RenewEvents does not wait for the WAL flush: a renewal lost in a crash
// of the database ends a lease early, which costs one more delivery.
func (s *Store) RenewEvents(ctx context.Context, appID int64, seqs []int64, until time.Time) error {
	if len(seqs) == 0 {
		return nil
	}
	b := asyncBatch()
	b.Queue(`UPDATE events SET lease_until = $3 WHERE app_id = $1 AND seq = ANY($2::int8[]) AND lease_owner = $4 AND NOT dead`,
		appID, seqs, until.UnixNano(), s.node)
	return s.pool.SendBatch(ctx, b).Close()
}

func (s *Store) ListEvents(ctx context.Context, appID int64, dead bool, afterSeq int64, n int) ([]store.Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+eventCols+` FROM events e`+eventJoins+`
		WHERE e.app_id = $1 AND e.dead = $2 AND e.seq > $3 ORDER BY e.seq LIMIT $4`, appID, dead, afterSeq, limit(n))
	evs, err := scanEvents(appID, rows, err)
	for i := range evs {
		// The mark of a run in flight, from this list's point of view.
		evs[i].Running, evs[i].Interrupted = evs[i].Interrupted, false
	}
	return evs, err
}

func (s *Store) ReplayEvent(ctx context.Context, appID, seq int64, now time.Time) error {
	s.dues.drop(appID) // as SettleEvent
	defer s.dues.drop(appID)
	ct, err := s.pool.Exec(ctx, `UPDATE events SET dead = false, attempts = 0, next_at = $3, last_error = '', running = false, origin = 0, lease_until = 0, lease_owner = ''
		WHERE app_id = $1 AND seq = $2 AND dead`, appID, seq, now.UnixNano())
	if err != nil {
		return err
	}
	if ct.RowsAffected() == 0 {
		return fmt.Errorf("dead event %d: %w", seq, store.ErrNotFound)
	}
	return nil
}

func (s *Store) EventApps(ctx context.Context) ([]int64, error) {
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT app_id FROM events WHERE NOT dead ORDER BY app_id`)
	if err != nil {
		return nil, err
	}
	return collect(rows, pgx.RowTo[int64])
}

func (s *Store) SaveTick(ctx context.Context, appID int64, t store.Tick) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO ticks (app_id, planned, started, duration, error) VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (app_id) DO UPDATE SET planned = excluded.planned, started = excluded.started,
		duration = excluded.duration, error = excluded.error`,
		appID, t.Planned.UnixNano(), t.Started.UnixNano(), int64(t.Duration), pgText(t.Error))
	return err
}

func (s *Store) LastTick(ctx context.Context, appID int64) (*store.Tick, error) {
	var t store.Tick
	var planned, started, dur int64
	err := s.pool.QueryRow(ctx, `SELECT planned, started, duration, error FROM ticks WHERE app_id = $1`, appID).
		Scan(&planned, &started, &dur, &t.Error)
	if noRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	t.Planned, t.Started, t.Duration = fromNanos(planned), fromNanos(started), time.Duration(dur)
	return &t, nil
}

// AcquireTick gives the app's tick planned at planned to the first node
// that asks for it; see store.Events. The lease row only moves forward:
// a node asking for a tick older than the latest given gets false, and
// the node holding a tick gets true again if it asks again. A later tick
// is refused while the row's hold_until, which ReleaseTick zeroes, is
// past the later tick's planned time: the earlier tick still runs.
func (s *Store) AcquireTick(ctx context.Context, appID int64, planned time.Time, node string, hold time.Time) (bool, error) {
	rows, err := s.pool.Query(ctx, `INSERT INTO tick_leases (app_id, planned, node, hold_until) VALUES ($1, $2, $3, $4)
		ON CONFLICT (app_id) DO UPDATE SET planned = excluded.planned, node = excluded.node, hold_until = excluded.hold_until
		WHERE (tick_leases.planned < excluded.planned AND tick_leases.hold_until <= excluded.planned)
			OR (tick_leases.planned = excluded.planned AND tick_leases.node = excluded.node)
		RETURNING true`, appID, planned.UnixNano(), node, hold.UnixNano())
	if err != nil {
		return false, err
	}
	got, err := collect(rows, pgx.RowTo[bool])
	return len(got) > 0, err
}

// ReleaseTick ends the hold of a tick; see store.Events.
func (s *Store) ReleaseTick(ctx context.Context, appID int64, planned time.Time, node string) error {
	_, err := s.pool.Exec(ctx, `UPDATE tick_leases SET hold_until = 0 WHERE app_id = $1 AND planned = $2 AND node = $3`,
		appID, planned.UnixNano(), node)
	return err
}

func scanEvents(appID int64, rows pgx.Rows, err error) ([]store.Event, error) {
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row pgx.CollectableRow) (store.Event, error) {
		ev := store.Event{AppID: appID}
		var next, t int64
		var body, ch *string
		var oSeq *int64
		var oRev, oBody *string
		var oDeleted *bool
		r := &ev.Rev
		if err := row.Scan(&ev.Seq, &ev.Depth, &ev.Origin, &ev.Attempts, &next, &ev.Dead, &ev.LastError, &ev.Interrupted,
			&r.DB, &r.ID, &r.Rev, &r.Deleted, &body, &t, &r.Writer.User, &r.Writer.Device, &r.Writer.Handler, &r.Path, &ch,
			&oSeq, &oRev, &oDeleted, &oBody); err != nil {
			return ev, err
		}
		ev.NextAt = fromNanos(next)
		r.Seq, r.Time, r.Channels = ev.Seq, fromNanos(t), parseChannels(ch)
		if body != nil {
			r.Body = []byte(*body)
		}
		if oSeq != nil && !*oDeleted {
			o := store.Revision{Doc: store.Doc{DB: r.DB, ID: r.ID, Rev: *oRev, Seq: *oSeq}}
			if oBody != nil {
				o.Body = []byte(*oBody)
			}
			ev.Old = &o
		}
		return ev, nil
	})
}
