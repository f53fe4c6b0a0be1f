package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/handoff-run/handoff/store"
)

// notifyChannel is where commits are announced, with the payload
// "appID:seq". NOTIFY channels are per database, so nodes on other
// databases of the same server do not hear them.
const notifyChannel = "handoff_commits"

// maxBatch bounds one group commit, so a flood of writers cannot make one
// transaction (and its latency) grow without limit.
const maxBatch = 512

var errClosed = errors.New("postgres store is closed")

const (
	// sqlLockHeads locks the heads of one database of the batch in the
	// order of $3, sorted; the batch runs it for its databases in name
	// order. Every batch, on any node, locks in that one order, so two
	// never deadlock. The LATERAL subqueries are kept from being
	// flattened into joins (by the locking clause, by OFFSET 0): each key
	// is one primary-key lookup, whatever the size of the table or the
	// state of its statistics.
	sqlLockHeads = `SELECT d.id, d.rev, d.has_grants FROM unnest($3::text[]) AS k(id),
		LATERAL (SELECT id, rev, has_grants FROM docs WHERE app_id = $1 AND db = $2 AND id = k.id FOR UPDATE) d`
	sqlDocGrants = `SELECT k.id, g.kind, g.principal, g.channel FROM unnest($3::text[]) AS k(id),
		LATERAL (SELECT kind, principal, channel FROM grants WHERE app_id = $1 AND db = $2 AND doc_id = k.id OFFSET 0) g`

	// sqlGenericPlans: the batch's statements take arrays, which would
	// have PostgreSQL plan them again on every run; one generic plan per
	// connection serves every batch. Made while a table's statistics say
	// it is empty, a generic plan would scan it for each key: without
	// scans and bitmaps, each row is found through its key. A scan that
	// is left (of the sequence, in handoff_take_seqs) then looks so
	// costly that PostgreSQL would compile it (JIT), for milliseconds.
	sqlGenericPlans = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
		set_config('enable_bitmapscan', 'off', true), set_config('jit', 'off', true)`
	sqlAddDB = `INSERT INTO dbs (app_id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING`
	// The batch's rows arrive as one array per column, unnested in the
	// select list: unnest(a, b, …) in FROM costs far more per statement.
	// Column n is each row's place among the batch's seqs, from 1.
	sqlLedger = `INSERT INTO revisions (app_id, seq, db, id, rev, deleted, body, time, writer_user, writer_device, writer_handler, path, channels, prev_seq)
		SELECT $1, s.a[r.n], r.db, r.id, r.rev, r.deleted, r.body, r.time, r.wu, r.wd, r.wh, r.path, r.channels, r.prev_seq
		FROM (SELECT unnest($3::text[]) AS db, unnest($4::text[]) AS id, unnest($5::text[]) AS rev, unnest($6::bool[]) AS deleted,
			unnest($7::text[]) AS body, unnest($8::int8[]) AS time, unnest($9::text[]) AS wu, unnest($10::text[]) AS wd,
			unnest($11::text[]) AS wh, unnest($12::text[]) AS path, unnest($13::text[]) AS channels, unnest($14::int8[]) AS prev_seq,
			unnest($15::int8[]) AS n) r, ` + batchSeqs
	// sqlNewHeads inserts the heads of documents that had none. Another
	// node may have created one since they were read: the primary key
	// then fails the batch, which is run again against the new head.
	// A body whose text jsonb takes as it is comes once, as body_text,
	// with a null body ($8): documents are most of a batch's bytes.
	sqlNewHeads = `INSERT INTO docs (app_id, db, id, rev, deleted, body_text, body, seq, time, channels, has_grants)
		SELECT $1, h.db, h.id, h.rev, h.deleted, h.body_text, coalesce(h.body, h.body_text)::jsonb, s.a[h.n], h.time, h.channels, h.has_grants
		FROM (SELECT unnest($3::text[]) AS db, unnest($4::text[]) AS id, unnest($5::text[]) AS rev, unnest($6::bool[]) AS deleted,
			unnest($7::text[]) AS body_text, unnest($8::text[]) AS body, unnest($9::int8[]) AS n, unnest($10::int8[]) AS time,
			unnest($11::text[]) AS channels, unnest($12::bool[]) AS has_grants) h, ` + batchSeqs
	// sqlSaveHeads overwrites heads the batch locked; an upsert, so each
	// row is found through the primary key.
	sqlSaveHeads = sqlNewHeads + ` ON CONFLICT (app_id, db, id) DO UPDATE SET rev = excluded.rev, deleted = excluded.deleted,
		body_text = excluded.body_text, body = excluded.body, seq = excluded.seq, time = excluded.time,
		channels = excluded.channels, has_grants = excluded.has_grants`
	sqlAddEvents = `INSERT INTO events (app_id, seq, depth, next_at, origin, db, doc_id)
		SELECT $1, s.a[e.n], e.depth, e.next_at, e.origin, e.db, e.doc_id
		FROM (SELECT unnest($3::int8[]) AS n, unnest($4::int4[]) AS depth, unnest($5::int8[]) AS next_at,
			unnest($6::int8[]) AS origin, unnest($7::text[]) AS db, unnest($8::text[]) AS doc_id) e, ` + batchSeqs
	// sqlAddClaimedEvents is sqlAddEvents where a row with a lease end
	// ($9) is leased to node $10 and its run marked begun, unless an
	// earlier live event of its document exists. It returns each row's seq
	// and whether it was claimed. The earlier event is looked for through a
	// LATERAL with LIMIT, one probe of events_by_doc per row: an EXISTS here
	// may be planned as a hash of every live event of the app, built once
	// per reference to it.
	sqlAddClaimedEvents = `INSERT INTO events (app_id, seq, depth, next_at, origin, db, doc_id, lease_until, lease_owner, running, attempts)
		SELECT $1, s.a[e.n], e.depth, e.next_at, e.origin, e.db, e.doc_id, c.until, c.owner, c.until > 0, (c.until > 0)::int
		FROM (SELECT unnest($3::int8[]) AS n, unnest($4::int4[]) AS depth, unnest($5::int8[]) AS next_at,
			unnest($6::int8[]) AS origin, unnest($7::text[]) AS db, unnest($8::text[]) AS doc_id, unnest($9::int8[]) AS until) e
		CROSS JOIN ` + batchSeqs + `
		LEFT JOIN LATERAL (SELECT true AS held FROM events p WHERE p.app_id = $1 AND p.db = e.db AND p.doc_id = e.doc_id AND NOT p.dead LIMIT 1) h ON true,
		LATERAL (SELECT CASE WHEN h.held IS NULL THEN e.until ELSE 0 END AS until,
			CASE WHEN h.held IS NULL AND e.until > 0 THEN $10 ELSE '' END AS owner) c
		RETURNING seq, lease_until > 0`
	sqlDropGrants = `DELETE FROM grants WHERE app_id = $1 AND db = $2 AND doc_id = $3`
	sqlAddGrants  = `INSERT INTO grants (app_id, db, doc_id, kind, principal, channel)
		SELECT $1, unnest($2::text[]), unnest($3::text[]), unnest($4::text[]), unnest($5::text[]), unnest($6::text[])`
	// sqlCountGrants moves each grant's count by the batch's net change
	// ($5); the keys are distinct, as one statement may touch a row once.
	sqlCountGrants = `INSERT INTO grant_counts (app_id, kind, principal, channel, n)
		SELECT $1, unnest($2::text[]), unnest($3::text[]), unnest($4::text[]), unnest($5::int8[])
		ON CONFLICT (app_id, kind, principal, channel) DO UPDATE SET n = grant_counts.n + excluded.n
		RETURNING kind, principal, channel, n`
	// A grant vanishes when its last document lets go of it.
	sqlCountGone = `DELETE FROM grant_counts WHERE app_id = $1 AND kind = $2 AND principal = $3 AND channel = $4 AND n <= 0`
	// sqlNotify runs after COMMIT, in a transaction of its own: the
	// batch's last seq is in the session (handoff_take_seqs).
	sqlNotify = `SELECT pg_notify('` + notifyChannel + `', $1::int8::text || ':' || current_setting('handoff.last'))`
)

// commitReq is one Commit waiting for its app's batch.
type commitReq struct {
	w    *store.Write
	done chan commitRes
	// taken and dropped are guarded by committer.mu: a batch took the
	// write (it may commit), or its caller gave up before that.
	taken, dropped bool
}

type commitRes struct {
	seq int64
	err error
}

// committer queues each app's Commits. One goroutine per app with writes
// waiting takes everything queued and writes it in one transaction: one
// WAL flush, two round trips and one set of statements for the batch,
// instead of for each write.
type committer struct {
	mu      sync.Mutex
	queues  map[int64][]*commitReq
	running map[int64]bool
	closed  bool
	wg      sync.WaitGroup
}

// Commit queues w for its app's next batch and waits until the batch is
// durable. See store.Documents.
func (s *Store) Commit(ctx context.Context, w *store.Write) (int64, error) {
	c := &s.commits
	req := &commitReq{w: w, done: make(chan commitRes, 1)}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return 0, errClosed
	}
	c.queues[w.AppID] = append(c.queues[w.AppID], req)
	if !c.running[w.AppID] {
		c.running[w.AppID] = true
		c.wg.Add(1)
		go s.runBatches(w.AppID)
	}
	c.mu.Unlock()
	select {
	case res := <-req.done:
		return res.seq, res.err
	case <-ctx.Done():
	}
	c.mu.Lock()
	if !req.taken {
		req.dropped = true
		c.mu.Unlock()
		return 0, ctx.Err()
	}
	c.mu.Unlock()
	// Once in a batch the write may commit: wait for the answer, so a
	// committed write is never reported failed.
	res := <-req.done
	return res.seq, res.err
}

// closeCommits refuses new Commits and waits for the queued ones.
func (s *Store) closeCommits() {
	c := &s.commits
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.wg.Wait()
}

// runBatches commits app's queue batch after batch until it is empty.
func (s *Store) runBatches(app int64) {
	c := &s.commits
	defer c.wg.Done()
	for {
		c.mu.Lock()
		q := c.queues[app]
		var batch []*commitReq
		i := 0
		for ; i < len(q) && len(batch) < maxBatch; i++ {
			if !q[i].dropped {
				q[i].taken = true
				batch = append(batch, q[i])
			}
		}
		if i == len(q) {
			delete(c.queues, app)
		} else {
			c.queues[app] = q[i:]
		}
		if len(batch) == 0 {
			delete(c.running, app)
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
		s.commitBatch(app, batch)
	}
}

// commitBatch writes a batch in one transaction and answers each caller.
// If the transaction fails as a whole before it could have committed,
// each write is tried alone, so one bad write cannot fail its neighbours.
func (s *Store) commitBatch(app int64, batch []*commitReq) {
	results := make([]commitRes, len(batch))
	retry, err := s.commitRetrying(app, batch, results)
	if err != nil && retry && len(batch) > 1 {
		for i := range batch {
			if _, err := s.commitRetrying(app, batch[i:i+1], results[i:i+1]); err != nil {
				results[i] = commitRes{err: err}
			}
		}
	} else if err != nil {
		for i := range results {
			results[i] = commitRes{err: err}
		}
	}
	var last int64
	grants := false
	for i, r := range results {
		last = max(last, r.seq)
		grants = grants || (r.err == nil && batch[i].w.GrantsChanged)
	}
	if last > 0 {
		s.committedEvents(app, batch, results)
		s.watch.committed(app, last, grants)
	}
	for i, req := range batch {
		req.done <- results[i]
	}
}

// errNewDocRace is a batch that created a document another node created
// since the batch read its head.
var errNewDocRace = errors.New("postgres store: a new document was created by another node meanwhile")

// maxRaces bounds the runs of one batch lost to errNewDocRace; each run
// sees the heads the previous one missed, so one more is nearly always
// enough.
const maxRaces = 8

// commitRetrying runs commitTx again while it loses a race to create a
// document, or finds a head it trusted moved (expect.go): the next run
// reads the heads and checks the batch against them.
func (s *Store) commitRetrying(app int64, batch []*commitReq, results []commitRes) (retry bool, err error) {
	trust := true
	for range maxRaces {
		retry, err = s.commitTx(app, batch, results, trust)
		if !errors.Is(err, errNewDocRace) && !errors.Is(err, errHeadsMoved) {
			return retry, err
		}
		// The next run reads the heads that proved other than expected.
		trust = false
		clear(results)
	}
	return retry, err
}

// docKey is one document of a batch.
type docKey struct{ db, id string }

func (k docKey) less(o docKey) int {
	if c := strings.Compare(k.db, o.db); c != 0 {
		return c
	}
	return strings.Compare(k.id, o.id)
}

// docState is a document's head as the batch goes: read from the
// database, then moved by each write the batch accepts.
type docState struct {
	rev       string
	found     bool // the database has a head, so the batch updates it
	hasGrants bool
	grants    []store.Grant
	// dbGrants are the grants the database holds for it, which the
	// batch replaces with grants, those of its last accepted write.
	dbGrants []store.Grant
	last     int // index in accepted of the last write to it; -1 if none
}

// commitTx writes batch in one transaction, filling results. It reports
// retry when the transaction surely did not commit, so its writes may be
// tried again.
func (s *Store) commitTx(app int64, batch []*commitReq, results []commitRes, trust bool) (retry bool, err error) {
	ctx := context.Background()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Release()
	c := conn.Conn()
	defer endTx(ctx, c)

	keys, states := batchDocs(batch)
	var opening *pgx.Batch // what opens the transaction instead of round trip 1
	var accepted, grantWrites []int
	if trust {
		opening, accepted, grantWrites = s.trustHeads(app, batch, keys, states, results)
	}
	if opening == nil {
		// Round trip 1: lock every head of the batch and read their grants.
		if err := c.SendBatch(ctx, queueLocks(app, keys, states)).Close(); err != nil {
			return true, err
		}
		accepted, grantWrites = checkWrites(batch, states, results)
	}
	grants := &pgx.Batch{}
	tally := queueGrants(grants, app, keys, states)
	if len(accepted) == 0 {
		for _, k := range keys {
			s.hints.drop(store.DocKey{App: app, DB: k.db, ID: k.id}) // their heads moved
		}
		return false, nil
	}

	// Round trip 2: take the seqs, write everything, commit, announce.
	t := s.queueWrites(app, batch, accepted, keys, states, grants)
	if opening != nil {
		opening.QueuedQueries = append(opening.QueuedQueries, t.b.QueuedQueries...)
		t.b = opening
	}
	if retry, err = t.send(ctx, c); err != nil {
		if opening != nil && headsMoved(err) {
			return true, errHeadsMoved
		}
		return retry, err
	}
	if opening != nil {
		s.trustedCommits.Add(1)
	}
	// A lost announcement only delays other nodes until their next poll.
	for _, k := range t.newDBs {
		s.dbs.Store(k, struct{}{})
	}
	for _, i := range accepted {
		batch[i].w.GrantsChanged = false
	}
	for _, i := range grantWrites {
		batch[i].w.GrantsChanged = tally.Moved(app)
	}
	for j, i := range accepted {
		seq := t.seqs[j]
		results[i] = commitRes{seq: seq}
		if ev := batch[i].w.Event; ev != nil {
			ev.Claimed = t.claimed[seq]
		}
	}
	s.hintHeads(app, batch, accepted, keys, states, t.seqs)
	return false, nil
}

// endTx ends the transaction of a refused or failed batch here rather
// than have the pool throw the connection away.
func endTx(ctx context.Context, c *pgx.Conn) {
	if st := c.PgConn().TxStatus(); st != 'I' && !c.IsClosed() {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if _, rerr := c.Exec(rctx, "ROLLBACK"); rerr != nil {
			c.Close(rctx)
		}
		cancel()
	}
}

// batchDocs lists the documents batch writes, sorted, each with a state
// to hold its head.
func batchDocs(batch []*commitReq) ([]docKey, map[docKey]*docState) {
	states := map[docKey]*docState{}
	var keys []docKey
	for _, r := range batch {
		k := docKey{r.w.DB, r.w.ID}
		if states[k] == nil {
			states[k] = &docState{last: -1}
			keys = append(keys, k)
		}
	}
	slices.SortFunc(keys, docKey.less)
	return keys, states
}

// queueLocks opens the batch's transaction and queues, database by
// database, the locking read of its heads and the read of their grants
// into states.
func queueLocks(app int64, keys []docKey, states map[docKey]*docState) *pgx.Batch {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(sqlGenericPlans)
	for start := 0; start < len(keys); {
		db := keys[start].db
		end := start
		for end < len(keys) && keys[end].db == db {
			end++
		}
		ids := make([]string, 0, end-start)
		for _, k := range keys[start:end] {
			ids = append(ids, k.id)
		}
		start = end
		b.Queue(sqlLockHeads, app, db, ids).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				k := docKey{db: db}
				var rev string
				var has bool
				if err := rows.Scan(&k.id, &rev, &has); err != nil {
					return err
				}
				if st := states[k]; st != nil {
					st.rev, st.found, st.hasGrants = rev, true, has
				}
			}
			return rows.Err()
		})
		b.Queue(sqlDocGrants, app, db, ids).Query(func(rows pgx.Rows) error {
			for rows.Next() {
				k := docKey{db: db}
				var g store.Grant
				if err := rows.Scan(&k.id, &g.Kind, &g.Principal, &g.Channel); err != nil {
					return err
				}
				if st := states[k]; st != nil {
					st.grants = append(st.grants, g)
				}
			}
			return rows.Err()
		})
	}
	return b
}

// checkWrites checks each write against its head, earlier writes of the
// batch included, and notes the writes that change their document's
// grants. It refuses the others in results and returns the indexes in
// batch of both, in batch order.
func checkWrites(batch []*commitReq, states map[docKey]*docState, results []commitRes) (accepted, grantWrites []int) {
	for _, st := range states {
		st.dbGrants = st.grants
	}
	for i, r := range batch {
		w := r.w
		st := states[docKey{w.DB, w.ID}]
		if w.BaseRev != st.rev {
			results[i] = commitRes{err: store.ErrHeadMoved}
			continue
		}
		st.rev, st.last = w.Rev, len(accepted)
		accepted = append(accepted, i)
		grants := w.Grants
		if w.Deleted {
			grants = nil
		}
		if !store.SameGrants(st.grants, grants) {
			grantWrites = append(grantWrites, i)
		}
		st.grants, st.hasGrants = grants, len(grants) > 0
	}
	return accepted, grantWrites
}

// writeTrip is the second round trip of a batch: the statements that
// write its accepted writes, and what their callbacks learn as it runs.
type writeTrip struct {
	b         *pgx.Batch
	n         int64   // the accepted writes
	seqs      []int64 // the batch's seqs, once taken
	committed bool    // COMMIT succeeded
	newDBs    []dbKey // databases the batch creates
	// claimed are the seqs of the events claimed for their committers,
	// known once the batch has run.
	claimed map[int64]bool
}

// queueWrites queues the second round trip: take the seqs, write the
// databases, ledger, heads, grants and events, commit, announce.
func (s *Store) queueWrites(app int64, batch []*commitReq, accepted []int, keys []docKey, states map[docKey]*docState, grants *pgx.Batch) *writeTrip {
	t := &writeTrip{b: &pgx.Batch{}, n: int64(len(accepted))}
	t.b.Queue(sqlTakeSeqs, app, t.n).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&t.seqs)
		if noRows(err) {
			return fmt.Errorf("app %d: %w", app, store.ErrNotFound)
		}
		return err
	})
	for _, i := range accepted {
		k := dbKey{app, batch[i].w.DB}
		if _, ok := s.dbs.Load(k); !ok && !slices.Contains(t.newDBs, k) {
			t.newDBs = append(t.newDBs, k)
			t.b.Queue(sqlAddDB, app, k.db)
		}
	}
	queueLedger(t.b, app, t.n, batch, accepted)
	queueHeads(t.b, app, t.n, batch, accepted, keys, states)
	t.b.QueuedQueries = append(t.b.QueuedQueries, grants.QueuedQueries...)
	t.claimed = queueEvents(t.b, app, t.n, batch, accepted, s.node)
	t.b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error {
		if ct.String() != "COMMIT" {
			return fmt.Errorf("commit of %d writes ended in %s", t.n, ct)
		}
		t.committed = true
		return nil
	})
	// The announcement runs after COMMIT, in its own transaction: it is
	// sent only once the writes are durable, and it does not hold
	// PostgreSQL's cluster-wide NOTIFY lock across the WAL flush, which
	// would serialise every commit of every app.
	t.b.Queue(sqlNotify, app)
	return t
}

// send runs the trip on c. An error means the batch did not commit, or
// may not have: retry reports that it surely did not.
func (t *writeTrip) send(ctx context.Context, c *pgx.Conn) (retry bool, err error) {
	// Once sent the batch may commit: wait for the answer whatever
	// happens to the callers.
	err = c.SendBatch(ctx, t.b).Close()
	var pe *pgconn.PgError
	refused := errors.As(err, &pe) // by the server, not by a callback here
	idle := !c.IsClosed() && c.PgConn().TxStatus() == 'I'
	if err != nil && !t.committed && len(t.seqs) > 0 && idle && !refused {
		// The pipeline stopped reading early, but the transaction ended
		// without failing: only COMMIT ends it so.
		t.committed = true
	}
	if err != nil && !t.committed {
		// A failed statement aborts the transaction, which then cannot
		// commit; so does a COMMIT the server refused (a deferred check
		// failed), which leaves the connection idle. A lost connection
		// leaves the outcome unknown.
		aborted := !c.IsClosed() && c.PgConn().TxStatus() == 'E' || refused && idle
		if aborted && refused && pe.Code == uniqueViolation && pe.ConstraintName == "docs_pkey" {
			return true, errNewDocRace
		}
		return aborted, err
	}
	return false, nil
}

// hintHeads remembers the head each document of a committed batch now
// has (seqs are the batch's), and forgets those whose every write was
// refused: their heads moved.
func (s *Store) hintHeads(app int64, batch []*commitReq, accepted []int, keys []docKey, states map[docKey]*docState, seqs []int64) {
	for _, k := range keys {
		hk := store.DocKey{App: app, DB: k.db, ID: k.id}
		if st := states[k]; st.last >= 0 {
			s.hints.putCommitted(hk, committedHead(batch[accepted[st.last]].w, seqs[st.last], st.hasGrants), st.grants)
		} else {
			s.hints.drop(hk) // every write to it was refused: its head moved
		}
	}
}
