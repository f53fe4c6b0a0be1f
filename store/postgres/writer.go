package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/handoff-run/handoff/store"
)

// notifyChannel is where commits are announced, with the payload
// "appID:seq". NOTIFY channels are per database, so nodes on other
// databases of the same server do not hear them.
const notifyChannel = "handoff_commits"

const (
	sqlLockHead  = `SELECT rev, has_grants FROM docs WHERE app_id = $1 AND db = $2 AND id = $3 FOR UPDATE`
	sqlDocGrants = `SELECT kind, principal, channel FROM grants WHERE app_id = $1 AND db = $2 AND doc_id = $3`
	sqlNextSeq   = `UPDATE apps SET seq = seq + 1 WHERE id = $1 RETURNING seq`
	// curSeq is the seq the transaction just took: statements of one
	// pipeline cannot pass results to each other, but they see the row
	// the transaction updated.
	curSeq      = `(SELECT seq FROM apps WHERE id = $1)`
	sqlAddDB    = `INSERT INTO dbs (app_id, name) VALUES ($1, $2) ON CONFLICT DO NOTHING`
	sqlLedger   = `INSERT INTO revisions (app_id, seq, db, id, rev, deleted, body, time, writer_user, writer_device, writer_handler, path, channels, prev_seq) VALUES ($1, ` + curSeq + `, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`
	sqlNewHead  = `INSERT INTO docs (app_id, db, id, rev, deleted, body_text, body, seq, time, channels, has_grants) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, ` + curSeq + `, $8, $9, $10)`
	sqlSaveHead = `UPDATE docs SET rev = $4, deleted = $5, body_text = $6, body = $7::jsonb, seq = ` + curSeq + `, time = $8, channels = $9, has_grants = $10 WHERE app_id = $1 AND db = $2 AND id = $3`
	// A grant vanishes when its last document lets go of it: drop the
	// count if this was the last, else decrement it.
	sqlCountDrop  = `DELETE FROM grant_counts WHERE app_id = $1 AND kind = $2 AND principal = $3 AND channel = $4 AND n <= 1`
	sqlCountDown  = `UPDATE grant_counts SET n = n - 1 WHERE app_id = $1 AND kind = $2 AND principal = $3 AND channel = $4`
	sqlDropGrants = `DELETE FROM grants WHERE app_id = $1 AND db = $2 AND doc_id = $3`
	sqlAddGrant   = `INSERT INTO grants (app_id, db, doc_id, kind, principal, channel) VALUES ($1, $2, $3, $4, $5, $6)`
	sqlCountUp    = `INSERT INTO grant_counts (app_id, kind, principal, channel, n) VALUES ($1, $2, $3, $4, 1)
		ON CONFLICT (app_id, kind, principal, channel) DO UPDATE SET n = grant_counts.n + 1 RETURNING n`
	sqlAddEvent = `INSERT INTO events (app_id, seq, depth, next_at) VALUES ($1, ` + curSeq + `, $2, $3)`
	sqlNotify   = `SELECT pg_notify('` + notifyChannel + `', $1::int8::text || ':' || ` + curSeq + `::text)`
)

// Commit writes one revision in its own transaction, in two round trips:
// the first locks the head and checks it, the second writes everything
// and commits. See store.Documents.
func (s *Store) Commit(ctx context.Context, w *store.Write) (int64, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Release()
	c := conn.Conn()
	seq, err := s.commit(ctx, c, w)
	if st := c.PgConn().TxStatus(); st != 'I' && !c.IsClosed() {
		// A refused or failed write: end its transaction here rather than
		// have the pool throw the connection away.
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, rerr := c.Exec(rctx, "ROLLBACK"); rerr != nil {
			c.Close(rctx)
		}
		cancel()
	}
	if err != nil {
		return 0, err
	}
	s.watch.committed(w, seq)
	return seq, nil
}

func (s *Store) commit(ctx context.Context, c *pgx.Conn, w *store.Write) (int64, error) {
	// Round trip 1: lock the head (so concurrent writers of the document
	// queue up here) and read its grants.
	var head string
	var found, hadGrants bool
	var old []store.Grant
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(sqlLockHead, w.AppID, w.DB, w.ID).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&head, &hadGrants)
		if noRows(err) {
			return nil
		}
		found = err == nil
		return err
	})
	b.Queue(sqlDocGrants, w.AppID, w.DB, w.ID).Query(func(rows pgx.Rows) error {
		for rows.Next() {
			var g store.Grant
			if err := rows.Scan(&g.Kind, &g.Principal, &g.Channel); err != nil {
				return err
			}
			old = append(old, g)
		}
		return rows.Err()
	})
	if err := c.SendBatch(ctx, b).Close(); err != nil {
		return 0, err
	}
	if head != w.BaseRev {
		return 0, store.ErrHeadMoved
	}

	// Round trip 2: take the next seq, write, commit, then announce.
	var seq int64
	b = &pgx.Batch{}
	b.Queue(sqlNextSeq, w.AppID).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&seq)
		if noRows(err) {
			return fmt.Errorf("app %d: %w", w.AppID, store.ErrNotFound)
		}
		return err
	})
	k := dbKey{w.AppID, w.DB}
	_, knownDB := s.dbs.Load(k)
	if !knownDB {
		b.Queue(sqlAddDB, w.AppID, w.DB)
	}
	var bodyText, bodyJSON *string
	if !w.Deleted {
		t, j := string(w.Body), jsonbText(w.Body)
		bodyText, bodyJSON = &t, &j
	}
	t := w.Time.UnixNano()
	channels := channelsJSON(w.Channels)
	b.Queue(sqlLedger, w.AppID, w.DB, w.ID, w.Rev, w.Deleted, bodyText, t,
		w.Writer.User, w.Writer.Device, w.Writer.Handler, w.Path, channels, w.PrevSeq)
	grants := w.Grants
	if w.Deleted {
		grants = nil
	}
	headSQL := sqlSaveHead
	if !found {
		// Two writers may create the same document at once: there was no
		// row to lock, so the primary key decides (see below).
		headSQL = sqlNewHead
	}
	b.Queue(headSQL, w.AppID, w.DB, w.ID, w.Rev, w.Deleted, bodyText, bodyJSON, t, channels, len(grants) > 0)
	changed := false
	if (hadGrants || len(grants) > 0) && !sameGrants(old, grants) {
		queueGrants(b, w, old, grants, &changed)
	}
	if ev := w.Event; ev != nil {
		b.Queue(sqlAddEvent, w.AppID, ev.Depth, ev.NextAt.UnixNano())
	}
	committed := false
	b.Queue("COMMIT").Exec(func(ct pgconn.CommandTag) error {
		if ct.String() != "COMMIT" {
			return fmt.Errorf("commit of %s/%s ended in %s", w.DB, w.ID, ct)
		}
		committed = true
		return nil
	})
	// The announcement runs after COMMIT, in its own transaction: it is
	// sent only once the write is durable, and it does not hold
	// PostgreSQL's cluster-wide NOTIFY lock across the WAL flush, which
	// would serialise every commit of every app.
	b.Queue(sqlNotify, w.AppID)
	// Once the batch is sent the write may commit: wait for the answer
	// even if ctx ends, so a committed write is never reported failed.
	err := c.SendBatch(context.WithoutCancel(ctx), b).Close()
	if err != nil && !committed && seq > 0 && !c.IsClosed() && c.PgConn().TxStatus() == 'I' {
		// The pipeline stopped reading early, but the transaction ended
		// without failing: only COMMIT ends it so.
		committed = true
	}
	if err != nil && !committed {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == uniqueViolation && pe.ConstraintName == "docs_pkey" {
			return 0, store.ErrHeadMoved // another writer created the document first
		}
		return 0, err
	}
	// A lost announcement only delays other nodes until their next poll.
	if !knownDB {
		s.dbs.Store(k, struct{}{})
	}
	w.GrantsChanged = changed
	return seq, nil
}

// queueGrants swaps the document's grants for new ones in grants and
// grant_counts (how many live documents give each grant), setting
// *changed when a grant appears or vanishes.
func queueGrants(b *pgx.Batch, w *store.Write, old, grants []store.Grant, changed *bool) {
	for _, g := range old {
		b.Queue(sqlCountDrop, w.AppID, g.Kind, g.Principal, g.Channel).Exec(func(ct pgconn.CommandTag) error {
			if ct.RowsAffected() > 0 {
				*changed = true
			}
			return nil
		})
		b.Queue(sqlCountDown, w.AppID, g.Kind, g.Principal, g.Channel)
	}
	b.Queue(sqlDropGrants, w.AppID, w.DB, w.ID)
	for _, g := range grants {
		b.Queue(sqlAddGrant, w.AppID, w.DB, w.ID, g.Kind, g.Principal, g.Channel)
		b.Queue(sqlCountUp, w.AppID, g.Kind, g.Principal, g.Channel).QueryRow(func(row pgx.Row) error {
			var n int64
			if err := row.Scan(&n); err != nil {
				return err
			}
			if n == 1 {
				*changed = true
			}
			return nil
		})
	}
}

func sameGrants(a, b []store.Grant) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[store.Grant]int, len(a))
	for _, g := range a {
		seen[g]++
	}
	for _, g := range b {
		if seen[g] == 0 {
			return false
		}
		seen[g]--
	}
	return true
}

// channelsJSON stores channels as a JSON array; nil stays NULL so "no
// access function" and "no channels" remain distinguishable.
func channelsJSON(ch []string) *string {
	if ch == nil {
		return nil
	}
	b, _ := json.Marshal(ch)
	s := string(b)
	return &s
}

func parseChannels(s *string) []string {
	if s == nil {
		return nil
	}
	ch := []string{}
	_ = json.Unmarshal([]byte(*s), &ch)
	return ch
}
