package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/handoff-run/handoff/store"
)

// AppendLogs writes the lines in one transaction that does not wait for
// the WAL flush: the contract lets log lines become durable after it
// returns, and a handler that logs should not pay for a flush.
func (s *Store) AppendLogs(ctx context.Context, lines []store.LogLine) error {
	if len(lines) == 0 {
		return nil
	}
	b := asyncBatch()
	for _, l := range lines {
		var fields *string
		if len(l.Fields) > 0 {
			f := pgText(string(l.Fields))
			fields = &f
		}
		b.Queue(`INSERT INTO logs (app_id, time, level, source, message, fields) VALUES ($1, $2, $3, $4, $5, $6)`,
			l.AppID, l.Time.UnixNano(), pgText(l.Level), pgText(l.Source), pgText(l.Message), fields)
	}
	return s.pool.SendBatch(ctx, b).Close()
}

func (s *Store) Logs(ctx context.Context, appID int64, after int64, n int) ([]store.LogLine, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, time, level, source, message, fields FROM logs WHERE app_id = $1 AND id > $2 ORDER BY id LIMIT $3`,
		appID, after, limit(n))
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row pgx.CollectableRow) (store.LogLine, error) {
		l := store.LogLine{AppID: appID}
		var t int64
		var fields *string
		err := row.Scan(&l.ID, &t, &l.Level, &l.Source, &l.Message, &fields)
		l.Time = fromNanos(t)
		if fields != nil {
			l.Fields = []byte(*fields)
		}
		return l, err
	})
}
