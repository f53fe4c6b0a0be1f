package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/handoff-run/handoff/store"
)

// AppendLogs rides on the writer's next group commit: a handler that logs
// never waits for an fsync of its own.
func (s *Store) AppendLogs(ctx context.Context, lines []store.LogLine) error {
	lines = append([]store.LogLine(nil), lines...)
	return s.enqueue(func(tx *sql.Tx) error {
		st, err := tx.Prepare(`INSERT INTO logs (app_id, time, level, source, message, fields) VALUES (?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer st.Close()
		for _, l := range lines {
			var fields any
			if len(l.Fields) > 0 {
				fields = string(l.Fields)
			}
			if _, err := st.Exec(l.AppID, l.Time.UnixNano(), l.Level, l.Source, l.Message, fields); err != nil {
				return err
			}
		}
		return nil
	}, nil)
}

func (s *Store) Logs(ctx context.Context, appID int64, after int64, limit int) ([]store.LogLine, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, time, level, source, message, fields FROM logs WHERE app_id = ? AND id > ? ORDER BY id LIMIT ?`, appID, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.LogLine
	for rows.Next() {
		l := store.LogLine{AppID: appID}
		var t int64
		var fields sql.NullString
		if err := rows.Scan(&l.ID, &t, &l.Level, &l.Source, &l.Message, &fields); err != nil {
			return nil, err
		}
		l.Time = time.Unix(0, t)
		if fields.Valid {
			l.Fields = []byte(fields.String)
		}
		out = append(out, l)
	}
	return out, rows.Err()
}
