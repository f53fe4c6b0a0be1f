package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/handoff-run/handoff/store"
)

func (s *Store) SaveCode(ctx context.Context, appID int64, c store.CodeVersion) (int, error) {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	var v int
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) + 1 FROM code WHERE app_id = ?`, appID).Scan(&v); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE code SET active = 0 WHERE app_id = ?`, appID); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO code (app_id, version, access, backend, author, created, active) VALUES (?, ?, ?, ?, ?, ?, 1)`,
		appID, v, c.Access, c.Backend, c.Author, c.Created.UnixNano()); err != nil {
		return 0, err
	}
	for p, data := range c.Files {
		if data == nil {
			data = []byte{} // data is NOT NULL; an empty file is still a file
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO code_files (app_id, version, path, data) VALUES (?, ?, ?, ?)`, appID, v, p, data); err != nil {
			return 0, err
		}
	}
	return v, tx.Commit()
}

func (s *Store) ActivateCode(ctx context.Context, appID int64, version int) error {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM code WHERE app_id = ? AND version = ?`, appID, version).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("version %d: %w", version, store.ErrNotFound)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE code SET active = (version = ?) WHERE app_id = ?`, version, appID); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *Store) ActiveCode(ctx context.Context, appID int64) (*store.CodeVersion, error) {
	var c store.CodeVersion
	var t int64
	err := s.rdb.QueryRowContext(ctx, `SELECT version, access, backend, author, created FROM code WHERE app_id = ? AND active = 1`, appID).
		Scan(&c.Version, &c.Access, &c.Backend, &c.Author, &t)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c.Created = time.Unix(0, t)
	c.Active = true
	if c.Files, err = s.codeFiles(ctx, appID, c.Version); err != nil {
		return nil, err
	}
	return &c, nil
}

// codeFiles reads the static files of one version; nil when it has none.
func (s *Store) codeFiles(ctx context.Context, appID int64, version int) (map[string][]byte, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT path, data FROM code_files WHERE app_id = ? AND version = ?`, appID, version)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return store.ScanFiles(rows)
}

func (s *Store) CodeVersions(ctx context.Context, appID int64) ([]store.CodeVersion, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT version, author, created, active FROM code WHERE app_id = ? ORDER BY version`, appID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.CodeVersion
	for rows.Next() {
		var c store.CodeVersion
		var t int64
		if err := rows.Scan(&c.Version, &c.Author, &t, &c.Active); err != nil {
			return nil, err
		}
		c.Created = time.Unix(0, t)
		out = append(out, c)
	}
	return out, rows.Err()
}

func (s *Store) SetAccessTimeout(ctx context.Context, appID int64, d time.Duration) error {
	_, err := s.wdb.ExecContext(ctx, `UPDATE apps SET access_timeout_ms = ? WHERE id = ?`, d.Milliseconds(), appID)
	return err
}

func (s *Store) SetJSMemory(ctx context.Context, appID int64, mib int) error {
	_, err := s.wdb.ExecContext(ctx, `UPDATE apps SET js_memory_mib = ? WHERE id = ?`, mib, appID)
	return err
}
