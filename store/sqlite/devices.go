package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/handoff-run/handoff/store"
)

func (s *Store) RemoveMember(ctx context.Context, appID int64, user, role string) error {
	res, err := s.wdb.ExecContext(ctx, `DELETE FROM members WHERE app_id = ? AND user = ? AND (? = '' OR role = ?)`, appID, user, role, role)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("member %s: %w", user, store.ErrNotFound)
	}
	return nil
}

func (s *Store) SetPublic(ctx context.Context, appID int64, public bool) error {
	_, err := s.wdb.ExecContext(ctx, `UPDATE apps SET public = ? WHERE id = ?`, public, appID)
	return err
}

func (s *Store) SetOrigins(ctx context.Context, appID int64, origins []string) error {
	b, err := json.Marshal(append([]string{}, origins...))
	if err != nil {
		return err
	}
	_, err = s.wdb.ExecContext(ctx, `UPDATE apps SET origins = ? WHERE id = ?`, string(b), appID)
	return err
}

func (s *Store) AddDevice(ctx context.Context, d store.Device) error {
	_, err := s.wdb.ExecContext(ctx, `INSERT INTO devices (user, name, public_key, app, created) VALUES (?, ?, ?, ?, ?)`,
		d.User, d.Name, d.PublicKey, d.App, d.Created.UnixNano())
	if isUnique(err) {
		return store.ErrExists
	}
	return err
}

const deviceCols = `user, name, public_key, app, created, revoked`

func scanDevice(row interface{ Scan(...any) error }) (*store.Device, error) {
	var d store.Device
	var created, revoked int64
	if err := row.Scan(&d.User, &d.Name, &d.PublicKey, &d.App, &created, &revoked); err != nil {
		return nil, err
	}
	d.Created = time.Unix(0, created)
	if revoked != 0 {
		d.Revoked = time.Unix(0, revoked)
	}
	return &d, nil
}

// Device prefers the live device of that name, else the latest revoked.
func (s *Store) Device(ctx context.Context, user, name string) (*store.Device, error) {
	d, err := scanDevice(s.rdb.QueryRowContext(ctx, `SELECT `+deviceCols+` FROM devices WHERE user = ? AND name = ?
		ORDER BY revoked = 0 DESC, revoked DESC LIMIT 1`, user, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return d, err
}

func (s *Store) Devices(ctx context.Context, user string) ([]store.Device, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+deviceCols+` FROM devices WHERE user = ? ORDER BY name, created`, user)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Device
	for rows.Next() {
		d, err := scanDevice(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *d)
	}
	return out, rows.Err()
}

func (s *Store) RevokeDevice(ctx context.Context, user, name string, at time.Time) error {
	res, err := s.wdb.ExecContext(ctx, `UPDATE devices SET revoked = ? WHERE user = ? AND name = ? AND revoked = 0`, at.UnixNano(), user, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("device %s/%s: %w", user, name, store.ErrNotFound)
	}
	return nil
}

func (s *Store) PutSecret(ctx context.Context, appID int64, name string, sealed []byte, at time.Time) error {
	_, err := s.wdb.ExecContext(ctx, `INSERT INTO secrets (app_id, name, sealed, updated) VALUES (?, ?, ?, ?)
		ON CONFLICT (app_id, name) DO UPDATE SET sealed = excluded.sealed, updated = excluded.updated`,
		appID, name, sealed, at.UnixNano())
	return err
}

func (s *Store) DeleteSecret(ctx context.Context, appID int64, name string) error {
	res, err := s.wdb.ExecContext(ctx, `DELETE FROM secrets WHERE app_id = ? AND name = ?`, appID, name)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("secret %s: %w", name, store.ErrNotFound)
	}
	return nil
}

func (s *Store) Secrets(ctx context.Context, appID int64) ([]store.Secret, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT name, sealed, updated FROM secrets WHERE app_id = ? ORDER BY name`, appID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Secret
	for rows.Next() {
		var sc store.Secret
		var t int64
		if err := rows.Scan(&sc.Name, &sc.Sealed, &t); err != nil {
			return nil, err
		}
		sc.Updated = time.Unix(0, t)
		out = append(out, sc)
	}
	return out, rows.Err()
}
