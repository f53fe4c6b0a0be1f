package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/handoff-run/handoff/store"
)

const revCols = `seq, db, id, rev, deleted, body, time, writer_user, writer_device, writer_handler, path, channels`

func (s *Store) Get(ctx context.Context, appID int64, db, id string) (*store.Doc, error) {
	d := store.Doc{DB: db, ID: id}
	var body, ch *string
	var t int64
	err := s.pool.QueryRow(ctx, `SELECT rev, deleted, body_text, seq, time, channels, has_grants FROM docs WHERE app_id = $1 AND db = $2 AND id = $3`,
		appID, db, id).Scan(&d.Rev, &d.Deleted, &body, &d.Seq, &t, &ch, &d.HasGrants)
	k := store.DocKey{App: appID, DB: db, ID: id}
	if noRows(err) {
		s.hints.drop(k)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if body != nil {
		d.Body = []byte(*body)
	}
	d.Time = fromNanos(t)
	d.Channels = parseChannels(ch)
	s.hints.put(k, &d)
	// The hint is shared: the caller gets its own copy.
	c := d
	c.Body, c.Channels = slices.Clone(d.Body), slices.Clone(d.Channels)
	return &c, nil
}

func (s *Store) History(ctx context.Context, appID int64, db, id string) ([]store.Revision, error) {
	return scanRevisions(s.pool.Query(ctx, `SELECT `+revCols+` FROM revisions WHERE app_id = $1 AND db = $2 AND id = $3 ORDER BY seq`, appID, db, id))
}

// Changes reads below the horizon (seqs.go): seqs are handed out in one
// order and committed in another, and a reader that went past a seq
// still being committed would never see it.
func (s *Store) Changes(ctx context.Context, appID int64, db string, since int64, n int) ([]store.Revision, error) {
	var revs []store.Revision
	read := func(rows pgx.Rows) (err error) {
		revs, err = scanRevisions(rows, nil)
		return err
	}
	var err error
	if db == "" {
		err = s.readBelowHorizon(ctx, appID, read, `SELECT `+revCols+` FROM revisions
			WHERE app_id = $1 AND seq > $2 AND `+belowHorizon+` ORDER BY seq LIMIT $3`, appID, since, limit(n))
	} else {
		err = s.readBelowHorizon(ctx, appID, read, `SELECT `+revCols+` FROM revisions
			WHERE app_id = $1 AND db = $2 AND seq > $3 AND `+belowHorizon+` ORDER BY seq LIMIT $4`, appID, db, since, limit(n))
	}
	return revs, err
}

func (s *Store) Scan(ctx context.Context, appID int64, db, after string, n int) ([]store.Doc, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, rev, body_text, seq, time, channels FROM docs
		WHERE app_id = $1 AND db = $2 AND id > $3 AND NOT deleted ORDER BY id LIMIT $4`, appID, db, after, limit(n))
	return scanDocs(db, rows, err)
}

// LastSeq is the app's highest committed seq below the horizon, which is
// at least its highest visible one: every seq up to it has ended, so a
// follower that starts there after a snapshot misses nothing.
func (s *Store) LastSeq(ctx context.Context, appID int64) (int64, error) {
	var seq int64
	found := false
	err := s.readBelowHorizon(ctx, appID, func(rows pgx.Rows) error {
		for rows.Next() {
			found = true
			if err := rows.Scan(&seq); err != nil {
				return err
			}
		}
		return rows.Err()
	}, `SELECT coalesce((SELECT max(seq) FROM revisions WHERE app_id = a.id AND `+belowHorizon+`), 0) FROM apps a WHERE a.id = $1`, appID)
	if err == nil && !found {
		return 0, fmt.Errorf("app %d: %w", appID, store.ErrNotFound)
	}
	return seq, err
}

func (s *Store) Databases(ctx context.Context, appID int64) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT name FROM dbs WHERE app_id = $1 ORDER BY name`, appID)
	if err != nil {
		return nil, err
	}
	return collect(rows, pgx.RowTo[string])
}

func (s *Store) GrantsFor(ctx context.Context, appID int64, user string) ([]store.Grant, error) {
	rows, err := s.pool.Query(ctx, `SELECT kind, principal, channel FROM grant_counts WHERE app_id = $1
		AND (kind IN ('role', 'public') OR (kind IN ('user', 'member') AND principal = $2))`, appID, user)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row pgx.CollectableRow) (store.Grant, error) {
		var g store.Grant
		err := row.Scan(&g.Kind, &g.Principal, &g.Channel)
		return g, err
	})
}

func scanDocs(db string, rows pgx.Rows, err error) ([]store.Doc, error) {
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row pgx.CollectableRow) (store.Doc, error) {
		d := store.Doc{DB: db}
		var body string
		var ch *string
		var t int64
		if err := row.Scan(&d.ID, &d.Rev, &body, &d.Seq, &t, &ch); err != nil {
			return d, err
		}
		d.Body = []byte(body)
		d.Time = fromNanos(t)
		d.Channels = parseChannels(ch)
		return d, nil
	})
}

func scanRevisions(rows pgx.Rows, err error) ([]store.Revision, error) {
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row pgx.CollectableRow) (store.Revision, error) {
		var r store.Revision
		var body, ch *string
		var t int64
		if err := row.Scan(&r.Seq, &r.DB, &r.ID, &r.Rev, &r.Deleted, &body, &t,
			&r.Writer.User, &r.Writer.Device, &r.Writer.Handler, &r.Path, &ch); err != nil {
			return r, err
		}
		r.Channels = parseChannels(ch)
		if body != nil {
			r.Body = []byte(*body)
		}
		r.Time = fromNanos(t)
		return r, nil
	})
}
