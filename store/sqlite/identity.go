package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/handoff-run/handoff/store"
)

// Identity changes are rare and small: they use the write connection
// directly, between the writer's batches.

func isUnique(err error) bool {
	return err != nil && strings.Contains(err.Error(), "UNIQUE constraint failed")
}

func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	_, err := s.wdb.ExecContext(ctx, `INSERT INTO users (`+store.UserCols+`) VALUES (?, ?, ?, ?, ?)`, store.UserArgs(u)...)
	if isUnique(err) {
		return store.ErrExists
	}
	return err
}

func (s *Store) User(ctx context.Context, name string) (*store.User, error) {
	u, err := store.ScanUser(s.rdb.QueryRowContext(ctx, `SELECT `+store.UserCols+` FROM users WHERE name = ?`, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return u, err
}

func (s *Store) AddToken(ctx context.Context, user string, hash []byte) error {
	_, err := s.wdb.ExecContext(ctx, `INSERT OR IGNORE INTO tokens (hash, user, created) VALUES (?, ?, ?)`, hash, user, time.Now().UnixNano())
	return err
}

func (s *Store) ReplaceTokens(ctx context.Context, user string, hash []byte) error {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM users WHERE name = ?`, user).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM tokens WHERE user = ?`, user); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO tokens (hash, user, created) VALUES (?, ?, ?)`, hash, user, time.Now().UnixNano()); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *Store) UserByToken(ctx context.Context, hash []byte) (*store.User, error) {
	var u store.User
	var t int64
	err := s.rdb.QueryRowContext(ctx, `SELECT u.name, u.admin, u.created, u.app FROM tokens k JOIN users u ON u.name = k.user WHERE k.hash = ?`, hash).
		Scan(&u.Name, &u.Admin, &t, &u.App)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	u.Created = time.Unix(0, t)
	return &u, nil
}

func (s *Store) Users(ctx context.Context) ([]store.User, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT name, admin, created, app FROM users ORDER BY name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.User
	for rows.Next() {
		var u store.User
		var t int64
		if err := rows.Scan(&u.Name, &u.Admin, &t, &u.App); err != nil {
			return nil, err
		}
		u.Created = time.Unix(0, t)
		out = append(out, u)
	}
	return out, rows.Err()
}

func (s *Store) RemoveUser(ctx context.Context, name string) ([]int64, error) {
	tx, err := s.wdb.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	var users, owned int
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM users WHERE name = ?), (SELECT count(*) FROM apps WHERE owner = ?)`,
		name, name).Scan(&users, &owned); err != nil {
		return nil, err
	}
	if users == 0 {
		return nil, store.ErrNotFound
	}
	if owned > 0 {
		return nil, store.ErrOwnsApps
	}
	rows, err := tx.QueryContext(ctx, `SELECT DISTINCT app_id FROM members WHERE user = ? ORDER BY app_id`, name)
	if err != nil {
		return nil, err
	}
	var apps []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		apps = append(apps, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, q := range []string{`DELETE FROM members WHERE user = ?`, `DELETE FROM tokens WHERE user = ?`,
		`DELETE FROM devices WHERE user = ?`, `DELETE FROM passkeys WHERE user = ?`, `DELETE FROM users WHERE name = ?`} {
		if _, err := tx.ExecContext(ctx, q, name); err != nil {
			return nil, err
		}
	}
	return apps, tx.Commit()
}

func (s *Store) CreateApp(ctx context.Context, a store.App) (*store.App, error) {
	res, err := s.wdb.ExecContext(ctx, `INSERT INTO apps (owner, name, public, created) VALUES (?, ?, ?, ?)`, a.Owner, a.Name, a.Public, a.Created.UnixNano())
	if isUnique(err) {
		return nil, store.ErrExists
	}
	if err != nil {
		return nil, err
	}
	a.ID, err = res.LastInsertId()
	return &a, err
}

const appCols = `id, owner, name, public, created, access_timeout_ms, origins, signup, js_memory_mib`

func scanApp(row interface{ Scan(...any) error }) (*store.App, error) {
	var a store.App
	var t, timeout int64
	var origins string
	if err := row.Scan(&a.ID, &a.Owner, &a.Name, &a.Public, &t, &timeout, &origins, &a.Signup, &a.JSMemory); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(origins), &a.Origins); err != nil {
		return nil, fmt.Errorf("app %d origins: %w", a.ID, err)
	}
	a.Created = time.Unix(0, t)
	a.AccessTimeout = time.Duration(timeout) * time.Millisecond
	return &a, nil
}

func (s *Store) App(ctx context.Context, owner, name string) (*store.App, error) {
	a, err := scanApp(s.rdb.QueryRowContext(ctx, `SELECT `+appCols+` FROM apps WHERE owner = ? AND name = ?`, owner, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return a, err
}

func (s *Store) Apps(ctx context.Context) ([]store.App, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT `+appCols+` FROM apps ORDER BY owner, name`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.App
	for rows.Next() {
		a, err := scanApp(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, *a)
	}
	return out, rows.Err()
}

func (s *Store) AddMember(ctx context.Context, appID int64, user, role string) error {
	_, err := s.wdb.ExecContext(ctx, `INSERT OR IGNORE INTO members (app_id, user, role) VALUES (?, ?, ?)`, appID, user, role)
	return err
}

func (s *Store) Members(ctx context.Context, appID int64) ([]store.Member, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT user, role FROM members WHERE app_id = ? ORDER BY user, role`, appID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Member
	for rows.Next() {
		var m store.Member
		if err := rows.Scan(&m.User, &m.Role); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}
