package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoff-run/handoff/store"
)

func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO users (`+store.UserCols+`) VALUES ($1, $2, $3, $4, $5)`, store.UserArgs(u)...)
	if isUnique(err) {
		return store.ErrExists
	}
	return err
}

func (s *Store) User(ctx context.Context, name string) (*store.User, error) {
	u, err := store.ScanUser(s.pool.QueryRow(ctx, `SELECT `+store.UserCols+` FROM users WHERE name = $1`, name))
	if noRows(err) {
		return nil, store.ErrNotFound
	}
	return u, err
}

func (s *Store) AddToken(ctx context.Context, user string, hash []byte) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO tokens (hash, user_name, created) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
		hash, user, time.Now().UnixNano())
	return err
}

func (s *Store) ReplaceTokens(ctx context.Context, user string, hash []byte) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The user's row lock puts replacements of one user in a line (nodes
		// starting with the same HANDOFF_ADMIN_TOKEN, two rotations at
		// once); each statement after it sees the replacement before it.
		rows, err := tx.Query(ctx, `SELECT 1 FROM users WHERE name = $1 FOR UPDATE`, user)
		if err != nil {
			return err
		}
		found, err := collect(rows, pgx.RowTo[int])
		if err != nil {
			return err
		}
		if len(found) == 0 {
			return store.ErrNotFound
		}
		if _, err := tx.Exec(ctx, `DELETE FROM tokens WHERE user_name = $1`, user); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO tokens (hash, user_name, created) VALUES ($1, $2, $3)
			ON CONFLICT (hash) DO UPDATE SET user_name = excluded.user_name, created = excluded.created`, hash, user, time.Now().UnixNano())
		return err
	})
}

func (s *Store) UserByToken(ctx context.Context, hash []byte) (*store.User, error) {
	var u store.User
	var t int64
	err := s.pool.QueryRow(ctx, `SELECT u.name, u.admin, u.created, u.app FROM tokens k JOIN users u ON u.name = k.user_name WHERE k.hash = $1`, hash).
		Scan(&u.Name, &u.Admin, &t, &u.App)
	if noRows(err) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	u.Created = fromNanos(t)
	return &u, nil
}

func (s *Store) Users(ctx context.Context) ([]store.User, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, admin, created, app FROM users ORDER BY name`)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row pgx.CollectableRow) (store.User, error) {
		var u store.User
		var t int64
		err := row.Scan(&u.Name, &u.Admin, &t, &u.App)
		u.Created = fromNanos(t)
		return u, err
	})
}

func (s *Store) RemoveUser(ctx context.Context, name string) ([]int64, error) {
	var apps []int64
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		// The user's row lock waits for an app being created for them (its
		// foreign key holds a share lock on the row); the count, a
		// statement of its own, then sees it.
		ct, err := tx.Exec(ctx, `SELECT 1 FROM users WHERE name = $1 FOR UPDATE`, name)
		if err != nil {
			return err
		}
		if ct.RowsAffected() == 0 {
			return store.ErrNotFound
		}
		var owned int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM apps WHERE owner = $1`, name).Scan(&owned); err != nil {
			return err
		}
		if owned > 0 {
			return store.ErrOwnsApps
		}
		rows, err := tx.Query(ctx, `SELECT DISTINCT app_id FROM members WHERE user_name = $1 ORDER BY app_id`, name)
		if err != nil {
			return err
		}
		if apps, err = collect(rows, pgx.RowTo[int64]); err != nil {
			return err
		}
		for _, q := range []string{`DELETE FROM members WHERE user_name = $1`, `DELETE FROM tokens WHERE user_name = $1`,
			`DELETE FROM devices WHERE user_name = $1`, `DELETE FROM passkeys WHERE user_name = $1`, `DELETE FROM users WHERE name = $1`} {
			if _, err := tx.Exec(ctx, q, name); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return apps, nil
}

func (s *Store) CreateApp(ctx context.Context, a store.App) (*store.App, error) {
	err := s.pool.QueryRow(ctx, `INSERT INTO apps (owner, name, public, created) VALUES ($1, $2, $3, $4) RETURNING id`,
		a.Owner, a.Name, a.Public, a.Created.UnixNano()).Scan(&a.ID)
	if isUnique(err) {
		return nil, store.ErrExists
	}
	if err != nil {
		return nil, err
	}
	return &a, nil
}

const appCols = `id, owner, name, public, created, access_timeout_ms, origins, signup, js_memory_mib`

func scanApp(row pgx.Row) (store.App, error) {
	var a store.App
	var t, timeout int64
	if err := row.Scan(&a.ID, &a.Owner, &a.Name, &a.Public, &t, &timeout, &a.Origins, &a.Signup, &a.JSMemory); err != nil {
		return a, err
	}
	a.Created = fromNanos(t)
	a.AccessTimeout = time.Duration(timeout) * time.Millisecond
	return a, nil
}

func (s *Store) App(ctx context.Context, owner, name string) (*store.App, error) {
	a, err := scanApp(s.pool.QueryRow(ctx, `SELECT `+appCols+` FROM apps WHERE owner = $1 AND name = $2`, owner, name))
	if noRows(err) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &a, nil
}

func (s *Store) Apps(ctx context.Context) ([]store.App, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+appCols+` FROM apps ORDER BY owner, name`)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row pgx.CollectableRow) (store.App, error) { return scanApp(row) })
}

func (s *Store) AddMember(ctx context.Context, appID int64, user, role string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO members (app_id, user_name, role) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, appID, user, role)
	return err
}

func (s *Store) RemoveMember(ctx context.Context, appID int64, user, role string) error {
	ct, err := s.pool.Exec(ctx, `DELETE FROM members WHERE app_id = $1 AND user_name = $2 AND ($3 = '' OR role = $3)`, appID, user, role)
	if err != nil {
		return err
	}
	if ct.RowsAffected() == 0 {
		return fmt.Errorf("member %s: %w", user, store.ErrNotFound)
	}
	return nil
}

func (s *Store) Members(ctx context.Context, appID int64) ([]store.Member, error) {
	rows, err := s.pool.Query(ctx, `SELECT user_name, role FROM members WHERE app_id = $1 ORDER BY user_name, role`, appID)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row pgx.CollectableRow) (store.Member, error) {
		var m store.Member
		err := row.Scan(&m.User, &m.Role)
		return m, err
	})
}

func (s *Store) SetPublic(ctx context.Context, appID int64, public bool) error {
	_, err := s.pool.Exec(ctx, `UPDATE apps SET public = $1 WHERE id = $2`, public, appID)
	return err
}

func (s *Store) SetOrigins(ctx context.Context, appID int64, origins []string) error {
	if origins == nil {
		origins = []string{}
	}
	_, err := s.pool.Exec(ctx, `UPDATE apps SET origins = $1 WHERE id = $2`, origins, appID)
	return err
}

func (s *Store) AddDevice(ctx context.Context, d store.Device) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO devices (user_name, name, public_key, app, created) VALUES ($1, $2, $3, $4, $5)`,
		d.User, d.Name, d.PublicKey, d.App, d.Created.UnixNano())
	if isUnique(err) {
		return store.ErrExists
	}
	return err
}

const deviceCols = `user_name, name, public_key, app, created, revoked`

func scanDevice(row pgx.Row) (store.Device, error) {
	var d store.Device
	var created, revoked int64
	if err := row.Scan(&d.User, &d.Name, &d.PublicKey, &d.App, &created, &revoked); err != nil {
		return d, err
	}
	d.Created = fromNanos(created)
	if revoked != 0 {
		d.Revoked = fromNanos(revoked)
	}
	return d, nil
}

// Device prefers the live device of that name, else the latest revoked.
func (s *Store) Device(ctx context.Context, user, name string) (*store.Device, error) {
	d, err := scanDevice(s.pool.QueryRow(ctx, `SELECT `+deviceCols+` FROM devices WHERE user_name = $1 AND name = $2
		ORDER BY revoked = 0 DESC, revoked DESC LIMIT 1`, user, name))
	if noRows(err) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	return &d, nil
}

func (s *Store) Devices(ctx context.Context, user string) ([]store.Device, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+deviceCols+` FROM devices WHERE user_name = $1 ORDER BY name, created`, user)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row pgx.CollectableRow) (store.Device, error) { return scanDevice(row) })
}

func (s *Store) RevokeDevice(ctx context.Context, user, name string, at time.Time) error {
	ct, err := s.pool.Exec(ctx, `UPDATE devices SET revoked = $1 WHERE user_name = $2 AND name = $3 AND revoked = 0`, at.UnixNano(), user, name)
	if err != nil {
		return err
	}
	if ct.RowsAffected() == 0 {
		return fmt.Errorf("device %s/%s: %w", user, name, store.ErrNotFound)
	}
	return nil
}

func (s *Store) PutSecret(ctx context.Context, appID int64, name string, sealed []byte, at time.Time) error {
	if sealed == nil {
		sealed = []byte{}
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO secrets (app_id, name, sealed, updated) VALUES ($1, $2, $3, $4)
		ON CONFLICT (app_id, name) DO UPDATE SET sealed = excluded.sealed, updated = excluded.updated`,
		appID, name, sealed, at.UnixNano())
	return err
}

func (s *Store) DeleteSecret(ctx context.Context, appID int64, name string) error {
	ct, err := s.pool.Exec(ctx, `DELETE FROM secrets WHERE app_id = $1 AND name = $2`, appID, name)
	if err != nil {
		return err
	}
	if ct.RowsAffected() == 0 {
		return fmt.Errorf("secret %s: %w", name, store.ErrNotFound)
	}
	return nil
}

func (s *Store) Secrets(ctx context.Context, appID int64) ([]store.Secret, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, sealed, updated FROM secrets WHERE app_id = $1 ORDER BY name`, appID)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row pgx.CollectableRow) (store.Secret, error) {
		var sc store.Secret
		var t int64
		err := row.Scan(&sc.Name, &sc.Sealed, &t)
		sc.Updated = fromNanos(t)
		return sc, err
	})
}
