package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"sync"

	"github.com/handoff-run/handoff/store"
)

// maxBatch bounds one group commit, so a flood of writers cannot make one
// transaction (and its latency) grow without limit.
const maxBatch = 512

// commitReq is one unit of the writer's queue: a document write, or an
// op on other tables (event outcomes, logs) that rides along in the same
// group commit instead of paying for its own fsync.
type commitReq struct {
	ctx context.Context
	w   *store.Write
	op  func(tx *sql.Tx) error
	// ack, when set, deletes one settled event with a prepared statement.
	ack  *eventKey
	done chan commitRes // nil for ops nobody waits for
	// after runs once the op's transaction committed or failed.
	after func(error)
}

type eventKey struct{ app, seq int64 }

type commitRes struct {
	seq int64
	err error
}

// Commit queues w for the writer and waits until it is durable.
func (s *Store) Commit(ctx context.Context, w *store.Write) (int64, error) {
	req := &commitReq{ctx: ctx, w: w, done: make(chan commitRes, 1)}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return 0, errClosed
	}
	select {
	case s.writes <- req:
	case <-ctx.Done():
		s.closeMu.RUnlock()
		return 0, ctx.Err()
	}
	s.closeMu.RUnlock()
	// Once queued, the write may commit: wait for the answer even if ctx
	// ends, so the caller never reports a failure for a committed write.
	res := <-req.done
	return res.seq, res.err
}

// writer owns the write connection and the in-memory copies of what it
// wrote last (sequence numbers, known databases), which save a read per
// write. They are dropped whenever a transaction rolls back.
type writer struct {
	db *sql.DB
	// watchers hear of each commit (Store.Watch); set before writes start.
	watchers *watchers
	// grants is this transaction's grant accounting (store.GrantTally):
	// grant_counts moves once per grant at its end. grantWrites are the
	// writes of each app that changed their document's grants, told if
	// the app's grants changed.
	grants      store.GrantTally
	grantWrites map[int64][]*store.Write
	seqs        map[int64]int64
	dbs         map[dbKey]bool
	stmts       map[string]*sql.Stmt
	// txStmts are stmts bound to the open transaction, each made once per
	// transaction rather than once per statement run.
	txStmts map[string]*sql.Stmt
	cur     *sql.Tx
	dirty   map[int64]bool
	newDBs  []dbKey
	// heads is the store's cache of committed heads; staged are the heads
	// this transaction wrote, cached once it commits.
	heads  *heads
	staged map[store.DocKey]*head
	order  []*head
	// recent is the store's memory of unclaimed events; events are this
	// transaction's, added once it commits.
	recent *recentEvents
	events []recentEvent
}

type dbKey struct {
	app int64
	db  string
}

const (
	sqlHead    = `SELECT rev, has_grants FROM docs WHERE app_id = ? AND db = ? AND id = ?`
	sqlAppSeq  = `SELECT seq FROM apps WHERE id = ?`
	sqlSetSeq  = `UPDATE apps SET seq = ? WHERE id = ?`
	sqlAddDB   = `INSERT OR IGNORE INTO dbs (app_id, name) VALUES (?, ?)`
	sqlLedger  = `INSERT INTO revisions (app_id, seq, db, id, rev, deleted, body, time, user, device, handler, path, channels, prev_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlNewHead = `INSERT INTO docs (app_id, db, id, rev, deleted, body, seq, time, channels, has_grants) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	// sqlSaveHead takes its arguments in sqlNewHead's order.
	sqlSaveHead = `UPDATE docs SET rev = ?4, deleted = ?5, body = ?6, seq = ?7, time = ?8, channels = ?9, has_grants = ?10
		WHERE app_id = ?1 AND db = ?2 AND id = ?3`
	sqlDropGrants = `DELETE FROM grants WHERE app_id = ? AND db = ? AND doc_id = ?`
	sqlDocGrants  = `SELECT kind, principal, channel FROM grants WHERE app_id = ? AND db = ? AND doc_id = ?`
	sqlCountAdd   = `INSERT INTO grant_counts (app_id, kind, principal, channel, n) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (app_id, kind, principal, channel) DO UPDATE SET n = n + excluded.n RETURNING n`
	sqlCountDrop = `DELETE FROM grant_counts WHERE app_id = ? AND kind = ? AND principal = ? AND channel = ? AND n <= 0`
	sqlAddEvent  = `INSERT INTO events (app_id, seq, depth, origin, next_at, db, doc_id) VALUES (?, ?, ?, ?, ?, ?, ?)`
	sqlAddGrant  = `INSERT INTO grants (app_id, db, doc_id, kind, principal, channel) VALUES (?, ?, ?, ?, ?, ?)`
	// sqlAckEvents deletes a transaction's settled events of one app in
	// one statement; ? is a JSON array of seqs.
	sqlAckEvents = `DELETE FROM events WHERE app_id = ? AND seq IN (SELECT value FROM json_each(?))`
)

func newWriter(db *sql.DB) (*writer, error) {
	w := &writer{db: db, staged: map[store.DocKey]*head{}, seqs: map[int64]int64{}, dbs: map[dbKey]bool{}, stmts: map[string]*sql.Stmt{}, txStmts: map[string]*sql.Stmt{}}
	for _, q := range []string{sqlHead, sqlAppSeq, sqlSetSeq, sqlAddDB, sqlLedger, sqlNewHead, sqlSaveHead, sqlDropGrants, sqlAddGrant, sqlAddEvent,
		sqlDocGrants, sqlCountAdd, sqlCountDrop, sqlAckEvents} {
		st, err := db.Prepare(q)
		if err != nil {
			return nil, err
		}
		w.stmts[q] = st
	}
	return w, nil
}

func (w *writer) run(in <-chan *commitReq, stop <-chan struct{}, stopped chan<- struct{}) {
	defer close(stopped)
	defer func() {
		for _, st := range w.stmts {
			st.Close()
		}
	}()
	batch := make([]*commitReq, 0, maxBatch)
	for {
		select {
		case req := <-in:
			batch = append(batch[:0], req)
		case <-stop:
			// Drain what was queued before Close: those callers wait.
			for {
				select {
				case req := <-in:
					w.commit([]*commitReq{req})
				default:
					return
				}
			}
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case req := <-in:
				batch = append(batch, req)
			default:
				break fill
			}
		}
		w.commit(batch)
	}
}

// commit writes a batch in one transaction. If the transaction fails as a
// whole, each write is retried alone so one bad write cannot fail its
// neighbours.
func (w *writer) commit(batch []*commitReq) {
	results := make([]commitRes, len(batch))
	err := w.tx(batch, results)
	if err != nil && len(batch) > 1 {
		for i := range batch {
			one := results[i : i+1]
			if e := w.tx(batch[i:i+1], one); e != nil {
				one[0] = commitRes{err: e}
			}
		}
	} else if err != nil {
		results[0] = commitRes{err: err}
	}
	for i, req := range batch {
		if req.after != nil {
			req.after(results[i].err)
		}
		if req.done != nil {
			req.done <- results[i]
		}
	}
}

// enqueue adds an op to the writer's queue without waiting for it.
func (s *Store) enqueue(op func(tx *sql.Tx) error, after func(error)) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return errClosed
	}
	s.writes <- &commitReq{ctx: context.Background(), op: op, after: after}
	return nil
}

// enqueueWait is enqueue that returns once the op's transaction is over
// and after has run.
func (s *Store) enqueueWait(op func(tx *sql.Tx) error, after func(error)) error {
	req := &commitReq{ctx: context.Background(), op: op, after: after, done: make(chan commitRes, 1)}
	s.closeMu.RLock()
	if s.closed {
		s.closeMu.RUnlock()
		return errClosed
	}
	s.writes <- req
	s.closeMu.RUnlock()
	return (<-req.done).err
}

// enqueueAck queues the deletion of a settled event without waiting.
func (s *Store) enqueueAck(app, seq int64, after func(error)) error {
	s.closeMu.RLock()
	defer s.closeMu.RUnlock()
	if s.closed {
		return errClosed
	}
	s.writes <- &commitReq{ctx: context.Background(), ack: &eventKey{app, seq}, after: after}
	return nil
}

// st returns the prepared statement q bound to the open transaction.
func (w *writer) st(q string) *sql.Stmt {
	if st := w.txStmts[q]; st != nil {
		return st
	}
	st := w.cur.Stmt(w.stmts[q])
	w.txStmts[q] = st
	return st
}

func (w *writer) tx(batch []*commitReq, results []commitRes) (err error) {
	tx, err := w.db.Begin()
	if err != nil {
		return err
	}
	w.cur = tx
	defer func() {
		for q, st := range w.txStmts {
			st.Close()
			delete(w.txStmts, q)
		}
		w.cur = nil
		if err != nil {
			tx.Rollback()
			w.seqs = map[int64]int64{}
			w.newDBs = w.newDBs[:0]
		}
		clear(w.staged)
		w.order = w.order[:0]
		clear(w.events)
		w.events = w.events[:0]
	}()
	w.dirty = map[int64]bool{}
	w.grants = store.GrantTally{}
	w.grantWrites = map[int64][]*store.Write{}
	w.newDBs = w.newDBs[:0]
	acks := map[int64][]int64{}
	for i, req := range batch {
		if req.ack != nil {
			acks[req.ack.app] = append(acks[req.ack.app], req.ack.seq)
			continue
		}
		if req.op != nil {
			if err = req.op(tx); err != nil {
				return err
			}
			continue
		}
		results[i], err = w.apply(tx, req.w)
		if err != nil {
			return err
		}
	}
	for app, seqs := range acks {
		b, _ := json.Marshal(seqs)
		if _, err := w.st(sqlAckEvents).Exec(app, string(b)); err != nil {
			return err
		}
	}
	if err := w.countGrants(); err != nil {
		return err
	}
	for app := range w.dirty {
		if _, err := w.st(sqlSetSeq).Exec(w.seqs[app], app); err != nil {
			return err
		}
	}
	w.heads.forget(w.order)
	if err := tx.Commit(); err != nil {
		return err
	}
	for _, k := range w.newDBs {
		w.dbs[k] = true
	}
	w.heads.put(w.order)
	w.recent.add(w.events)
	// Who may read what changes before anyone hears of the commit: a
	// follower woken by it must not read with the grants of before.
	for _, app := range w.grants.MovedApps() {
		w.watchers.notifyGrants(app)
	}
	for app := range w.dirty {
		w.watchers.notify(app, w.seqs[app])
	}
	return nil
}

// apply writes one revision inside tx. A head that moved is an answer for
// that write, not a failure of the batch.
func (w *writer) apply(tx *sql.Tx, wr *store.Write) (commitRes, error) {
	k := store.DocKey{App: wr.AppID, DB: wr.DB, ID: wr.ID}
	cur, err := w.current(k, wr.BaseRev == "")
	if err != nil {
		return commitRes{}, err
	}
	if cur.doc.Rev != wr.BaseRev {
		return commitRes{err: store.ErrHeadMoved}, nil
	}
	seq, ok := w.seqs[wr.AppID]
	if !ok {
		if err := w.st(sqlAppSeq).QueryRow(wr.AppID).Scan(&seq); err != nil {
			return commitRes{}, err
		}
		w.seqs[wr.AppID] = seq
	}
	seq++
	var body any
	if !wr.Deleted {
		body = string(wr.Body)
	}
	t := wr.Time.UnixNano()
	channels := channelsJSON(wr.Channels)
	grants := wr.Grants
	if wr.Deleted {
		grants = nil
	}
	// The head goes first: for a document the writer takes to be new, its
	// insert is the check that nobody created it meanwhile, and a failed
	// statement leaves the transaction as it was.
	saveHead := sqlSaveHead
	if cur.doc.Rev == "" {
		saveHead = sqlNewHead
	}
	if _, err := w.st(saveHead).Exec(wr.AppID, wr.DB, wr.ID, wr.Rev, wr.Deleted, body, seq, t,
		channels, len(grants) > 0); err != nil {
		if saveHead == sqlNewHead && isUnique(err) {
			return commitRes{err: store.ErrHeadMoved}, nil
		}
		return commitRes{}, err
	}
	w.seqs[wr.AppID] = seq
	w.dirty[wr.AppID] = true
	if dk := (dbKey{wr.AppID, wr.DB}); !w.dbs[dk] {
		if _, err := w.st(sqlAddDB).Exec(wr.AppID, wr.DB); err != nil {
			return commitRes{}, err
		}
		w.newDBs = append(w.newDBs, dk)
	}
	if _, err := w.st(sqlLedger).Exec(wr.AppID, seq, wr.DB, wr.ID, wr.Rev, wr.Deleted, body, t,
		wr.Writer.User, wr.Writer.Device, wr.Writer.Handler, wr.Path, channels, wr.PrevSeq); err != nil {
		return commitRes{}, err
	}
	wr.GrantsChanged = false // a retry alone decides again
	if cur.doc.HasGrants || len(grants) > 0 {
		if err := w.replaceGrants(wr, cur, grants); err != nil {
			return commitRes{}, err
		}
	}
	if ev := wr.Event; ev != nil {
		if _, err := w.st(sqlAddEvent).Exec(wr.AppID, seq, ev.Depth, ev.Origin, ev.NextAt.UnixNano(), wr.DB, wr.ID); err != nil {
			return commitRes{}, err
		}
	}
	h := headOf(wr, seq, grants)
	w.staged[k] = h
	w.order = append(w.order, h)
	if wr.Event != nil {
		w.events = append(w.events, eventOf(wr, seq, cur, h))
	}
	return commitRes{seq: seq}, nil
}

// current returns the head a write must find: this transaction's own
// earlier write of the document, a cached head, or the database's. A head
// from the database has grants nil: replaceGrants reads them if needed.
// When the write takes the document to be new (assumeNew) and neither
// holds it, the database is not asked: the head's insert will fail if
// the document exists.
func (w *writer) current(k store.DocKey, assumeNew bool) (*head, error) {
	if h := w.staged[k]; h != nil {
		return h, nil
	}
	if h := w.heads.get(k); h != nil {
		return h, nil
	}
	h := &head{key: k}
	if assumeNew {
		return h, nil
	}
	err := w.st(sqlHead).QueryRow(k.App, k.DB, k.ID).Scan(&h.doc.Rev, &h.doc.HasGrants)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, err
	}
	return h, nil
}

// channelsJSON stores channels as a JSON array; nil stays NULL so "no
// access function" and "no channels" remain distinguishable.
func channelsJSON(ch []string) any {
	if ch == nil {
		return nil
	}
	b, _ := json.Marshal(ch)
	return string(b)
}

func parseChannels(s sql.NullString) []string {
	if !s.Valid {
		return nil
	}
	ch := []string{}
	_ = json.Unmarshal([]byte(s.String), &ch)
	return ch
}

// replaceGrants swaps a document's grants for new ones and notes the
// change to grant_counts, the number of live documents giving each grant,
// which countGrants writes at the end of the transaction. The counts make
// reads of who may see what cost the number of distinct grants, not of
// documents.
func (w *writer) replaceGrants(wr *store.Write, cur *head, grants []store.Grant) error {
	old := cur.grants
	if old == nil && cur.doc.HasGrants {
		rows, err := w.st(sqlDocGrants).Query(wr.AppID, wr.DB, wr.ID)
		if err != nil {
			return err
		}
		for rows.Next() {
			var g store.Grant
			if err := rows.Scan(&g.Kind, &g.Principal, &g.Channel); err != nil {
				rows.Close()
				return err
			}
			old = append(old, g)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	if !w.grants.Replace(wr.AppID, old, grants) {
		return nil // the common case: a document keeps its grants
	}
	if cur.doc.HasGrants {
		if _, err := w.st(sqlDropGrants).Exec(wr.AppID, wr.DB, wr.ID); err != nil {
			return err
		}
	}
	for _, g := range grants {
		if _, err := w.st(sqlAddGrant).Exec(wr.AppID, wr.DB, wr.ID, g.Kind, g.Principal, g.Channel); err != nil {
			return err
		}
	}
	w.grantWrites[wr.AppID] = append(w.grantWrites[wr.AppID], wr)
	return nil
}

// countGrants applies the transaction's net changes to grant_counts. An
// app whose set of grants changed (a count left or reached zero) has all
// its writes that changed grants marked GrantsChanged: which one made the
// difference does not matter to the caches it clears.
func (w *writer) countGrants() error {
	for _, d := range w.grants.Deltas() {
		var n int64
		if err := w.st(sqlCountAdd).QueryRow(d.App, d.Kind, d.Principal, d.Channel, d.Delta).Scan(&n); err != nil {
			return err
		}
		if n <= 0 {
			if _, err := w.st(sqlCountDrop).Exec(d.App, d.Kind, d.Principal, d.Channel); err != nil {
				return err
			}
		}
		w.grants.Counted(d, n)
	}
	for _, app := range w.grants.MovedApps() {
		for _, wr := range w.grantWrites[app] {
			wr.GrantsChanged = true
		}
	}
	return nil
}

// watchers are the Store.Watch and WatchGrants callbacks.
type watchers struct {
	mu     sync.RWMutex
	fns    []func(appID, seq int64)
	grants []func(appID int64)
}

func (ws *watchers) addGrants(fn func(appID int64)) {
	ws.mu.Lock()
	ws.grants = append(ws.grants, fn)
	ws.mu.Unlock()
}

func (ws *watchers) notifyGrants(app int64) {
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	for _, fn := range ws.grants {
		fn(app)
	}
}

func (ws *watchers) add(fn func(appID, seq int64)) {
	ws.mu.Lock()
	ws.fns = append(ws.fns, fn)
	ws.mu.Unlock()
}

func (ws *watchers) notify(app, seq int64) {
	ws.mu.RLock()
	defer ws.mu.RUnlock()
	for _, fn := range ws.fns {
		fn(app, seq)
	}
}
