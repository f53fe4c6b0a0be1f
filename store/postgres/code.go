package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoff-run/handoff/store"
)

// Sources are kept as bytes: a text column would refuse a NUL or invalid
// UTF-8, and the code must come back exactly as deployed.

func (s *Store) SaveCode(ctx context.Context, appID int64, c store.CodeVersion) (int, error) {
	var v int
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// Lock the app's row: two deploys at once get consecutive versions.
		if _, err := tx.Exec(ctx, `SELECT 1 FROM apps WHERE id = $1 FOR NO KEY UPDATE`, appID); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) + 1 FROM code WHERE app_id = $1`, appID).Scan(&v); err != nil {
			return err
		}
		b := &pgx.Batch{}
		b.Queue(`UPDATE code SET active = false WHERE app_id = $1 AND active`, appID)
		b.Queue(`INSERT INTO code (app_id, version, access, backend, author, created, active) VALUES ($1, $2, $3, $4, $5, $6, true)`,
			appID, v, []byte(c.Access), []byte(c.Backend), c.Author, c.Created.UnixNano())
		for p, data := range c.Files {
			if data == nil {
				data = []byte{} // data is NOT NULL; an empty file is still a file
			}
			b.Queue(`INSERT INTO code_files (app_id, version, path, data) VALUES ($1, $2, $3, $4)`, appID, v, p, data)
		}
		return tx.SendBatch(ctx, b).Close()
	})
	if err != nil {
		return 0, err
	}
	return v, nil
}

func (s *Store) ActivateCode(ctx context.Context, appID int64, version int) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM code WHERE app_id = $1 AND version = $2`, appID, version).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("version %d: %w", version, store.ErrNotFound)
		}
		_, err := tx.Exec(ctx, `UPDATE code SET active = (version = $1) WHERE app_id = $2`, version, appID)
		return err
	})
}

func (s *Store) ActiveCode(ctx context.Context, appID int64) (*store.CodeVersion, error) {
	var c store.CodeVersion
	var access, backend []byte
	var t int64
	err := s.pool.QueryRow(ctx, `SELECT version, access, backend, author, created FROM code WHERE app_id = $1 AND active`, appID).
		Scan(&c.Version, &access, &backend, &c.Author, &t)
	if noRows(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c.Access, c.Backend = string(access), string(backend)
	c.Created = fromNanos(t)
	c.Active = true
	if c.Files, err = s.codeFiles(ctx, appID, c.Version); err != nil {
		return nil, err
	}
	return &c, nil
}

// codeFiles reads the static files of one version; nil when it has none.
func (s *Store) codeFiles(ctx context.Context, appID int64, version int) (map[string][]byte, error) {
	rows, err := s.pool.Query(ctx, `SELECT path, data FROM code_files WHERE app_id = $1 AND version = $2`, appID, version)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ScanFiles(rows)
}

func (s *Store) CodeVersions(ctx context.Context, appID int64) ([]store.CodeVersion, error) {
	rows, err := s.pool.Query(ctx, `SELECT version, author, created, active FROM code WHERE app_id = $1 ORDER BY version`, appID)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row pgx.CollectableRow) (store.CodeVersion, error) {
		var c store.CodeVersion
		var t int64
		err := row.Scan(&c.Version, &c.Author, &t, &c.Active)
		c.Created = fromNanos(t)
		return c, err
	})
}

func (s *Store) SetAccessTimeout(ctx context.Context, appID int64, d time.Duration) error {
	_, err := s.pool.Exec(ctx, `UPDATE apps SET access_timeout_ms = $1 WHERE id = $2`, d.Milliseconds(), appID)
	return err
}

func (s *Store) SetJSMemory(ctx context.Context, appID int64, mib int) error {
	_, err := s.pool.Exec(ctx, `UPDATE apps SET js_memory_mib = $1 WHERE id = $2`, mib, appID)
	return err
}
