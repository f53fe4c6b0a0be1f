package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/handoff-run/handoff/store"
)

// readStmts are prepared once; database/sql re-prepares them per pooled
// connection as needed.
type readStmts struct {
	get, history, scan, changes, changesDB, lastSeq, dbs *sql.Stmt
	// firstAbove is NextEventDue's question out of full mode: the
	// earliest NextAt above the claim cursor.
	firstAbove *sql.Stmt
}

const revCols = `seq, db, id, rev, deleted, body, time, user, device, handler, path, channels`

func (r *readStmts) prepare(db *sql.DB) error {
	var err error
	p := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		st, err = db.Prepare(q)
		return st
	}
	r.get = p(`SELECT rev, deleted, body, seq, time, channels, has_grants FROM docs WHERE app_id = ? AND db = ? AND id = ?`)
	r.history = p(`SELECT ` + revCols + ` FROM revisions WHERE app_id = ? AND db = ? AND id = ? ORDER BY seq`)
	r.scan = p(`SELECT id, rev, body, seq, time, channels FROM docs WHERE app_id = ? AND db = ? AND id > ? AND deleted = 0 ORDER BY id LIMIT ?`)
	r.changes = p(`SELECT ` + revCols + ` FROM revisions WHERE app_id = ? AND seq > ? ORDER BY seq LIMIT ?`)
	r.changesDB = p(`SELECT ` + revCols + ` FROM revisions WHERE app_id = ? AND db = ? AND seq > ? ORDER BY seq LIMIT ?`)
	r.lastSeq = p(`SELECT seq FROM apps WHERE id = ?`)
	r.dbs = p(`SELECT name FROM dbs WHERE app_id = ? ORDER BY name`)
	r.firstAbove = p(`SELECT min(next_at) FROM events WHERE app_id = ? AND seq > ? AND dead = 0`)
	return err
}

func (r *readStmts) close() {
	for _, st := range []*sql.Stmt{r.get, r.history, r.scan, r.changes, r.changesDB, r.lastSeq, r.dbs, r.firstAbove} {
		if st != nil {
			st.Close()
		}
	}
}

// Get answers from the writer's cache of heads when it can; see heads.
// Callers must not change the returned Body.
func (s *Store) Get(ctx context.Context, appID int64, db, id string) (*store.Doc, error) {
	if h := s.heads.get(store.DocKey{App: appID, DB: db, ID: id}); h != nil {
		return &h.doc, nil
	}
	d := store.Doc{DB: db, ID: id}
	var body, ch sql.NullString
	var t int64
	err := s.reads.get.QueryRowContext(ctx, appID, db, id).Scan(&d.Rev, &d.Deleted, &body, &d.Seq, &t, &ch, &d.HasGrants)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if body.Valid {
		d.Body = []byte(body.String)
	}
	d.Time = time.Unix(0, t)
	d.Channels = parseChannels(ch)
	return &d, nil
}

func (s *Store) History(ctx context.Context, appID int64, db, id string) ([]store.Revision, error) {
	return scanRevisions(s.reads.history.QueryContext(ctx, appID, db, id))
}

func (s *Store) Changes(ctx context.Context, appID int64, db string, since int64, limit int) ([]store.Revision, error) {
	if db == "" {
		return scanRevisions(s.reads.changes.QueryContext(ctx, appID, since, limit))
	}
	return scanRevisions(s.reads.changesDB.QueryContext(ctx, appID, db, since, limit))
}

func (s *Store) Scan(ctx context.Context, appID int64, db, after string, limit int) ([]store.Doc, error) {
	rows, err := s.reads.scan.QueryContext(ctx, appID, db, after, limit)
	return scanDocs(db, rows, err)
}

func (s *Store) LastSeq(ctx context.Context, appID int64) (int64, error) {
	var seq int64
	err := s.reads.lastSeq.QueryRowContext(ctx, appID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, store.ErrNotFound
	}
	return seq, err
}

func (s *Store) Databases(ctx context.Context, appID int64) ([]string, error) {
	rows, err := s.reads.dbs.QueryContext(ctx, appID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, rows.Err()
}

func scanDocs(db string, rows *sql.Rows, err error) ([]store.Doc, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Doc
	for rows.Next() {
		d := store.Doc{DB: db}
		var body string
		var ch sql.NullString
		var t int64
		if err := rows.Scan(&d.ID, &d.Rev, &body, &d.Seq, &t, &ch); err != nil {
			return nil, err
		}
		d.Body = []byte(body)
		d.Time = time.Unix(0, t)
		d.Channels = parseChannels(ch)
		out = append(out, d)
	}
	return out, rows.Err()
}

func scanRevisions(rows *sql.Rows, err error) ([]store.Revision, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Revision
	for rows.Next() {
		var r store.Revision
		var body, ch sql.NullString
		var t int64
		if err := rows.Scan(&r.Seq, &r.DB, &r.ID, &r.Rev, &r.Deleted, &body, &t,
			&r.Writer.User, &r.Writer.Device, &r.Writer.Handler, &r.Path, &ch); err != nil {
			return nil, err
		}
		r.Channels = parseChannels(ch)
		if body.Valid {
			r.Body = []byte(body.String)
		}
		r.Time = time.Unix(0, t)
		out = append(out, r)
	}
	return out, rows.Err()
}

func (s *Store) GrantsFor(ctx context.Context, appID int64, user string) ([]store.Grant, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT kind, principal, channel FROM grant_counts WHERE app_id = ?
		AND (kind IN ('role', 'public') OR (kind IN ('user', 'member') AND principal = ?))`, appID, user)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Grant
	for rows.Next() {
		var g store.Grant
		if err := rows.Scan(&g.Kind, &g.Principal, &g.Channel); err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	return out, rows.Err()
}
