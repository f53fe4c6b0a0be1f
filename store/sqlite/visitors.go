package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/handoff-run/handoff/store"
)

func (s *Store) RemoveToken(ctx context.Context, hash []byte) error {
	res, err := s.wdb.ExecContext(ctx, `DELETE FROM tokens WHERE hash = ?`, hash)
	return affectedOne(res, err)
}

func (s *Store) SetSignup(ctx context.Context, appID int64, policy string) error {
	_, err := s.wdb.ExecContext(ctx, `UPDATE apps SET signup = ? WHERE id = ?`, policy, appID)
	return err
}

func (s *Store) PutTicket(ctx context.Context, t store.Ticket) error {
	if _, err := s.wdb.ExecContext(ctx, `DELETE FROM tickets WHERE expires > 0 AND expires < ?`, t.Created.UnixNano()); err != nil {
		return err
	}
	_, err := s.wdb.ExecContext(ctx, `INSERT INTO tickets (hash, app_id, kind, user, data, expires, created) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		store.TicketArgs(t)...)
	if isUnique(err) {
		return store.ErrExists
	}
	return err
}

func (s *Store) TakeTicket(ctx context.Context, appID int64, kind string, hash []byte, now time.Time) (*store.Ticket, error) {
	t, err := store.ScanTakenTicket(s.wdb.QueryRowContext(ctx, `DELETE FROM tickets WHERE hash = ? AND app_id = ? AND kind = ?
		RETURNING user, data, expires, created`, hash, appID, kind), appID, kind, hash, now)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	return t, err
}

func (s *Store) AddPasskey(ctx context.Context, p store.Passkey) error {
	_, err := s.wdb.ExecContext(ctx, `INSERT INTO passkeys (id, user, data, created) VALUES (?, ?, ?, ?)`, p.ID, p.User, p.Data, p.Created.UnixNano())
	if isUnique(err) {
		return store.ErrExists
	}
	return err
}

func (s *Store) Passkeys(ctx context.Context, user string) ([]store.Passkey, error) {
	rows, err := s.rdb.QueryContext(ctx, `SELECT id, data, created FROM passkeys WHERE user = ? ORDER BY created, id`, user)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Passkey
	for rows.Next() {
		p := store.Passkey{User: user}
		var t int64
		if err := rows.Scan(&p.ID, &p.Data, &t); err != nil {
			return nil, err
		}
		p.Created = time.Unix(0, t)
		out = append(out, p)
	}
	return out, rows.Err()
}

func (s *Store) PasskeyByID(ctx context.Context, app string, id []byte) (*store.Passkey, error) {
	p := store.Passkey{ID: id}
	var t int64
	err := s.rdb.QueryRowContext(ctx, `SELECT p.user, p.data, p.created FROM passkeys p JOIN users u ON u.name = p.user
		WHERE p.id = ? AND u.app = ?`, id, app).Scan(&p.User, &p.Data, &t)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	p.Created = time.Unix(0, t)
	return &p, nil
}

func (s *Store) UpdatePasskey(ctx context.Context, user string, id, data []byte) error {
	res, err := s.wdb.ExecContext(ctx, `UPDATE passkeys SET data = ? WHERE user = ? AND id = ?`, data, user, id)
	return affectedOne(res, err)
}

// affectedOne turns a statement that changed no row into ErrNotFound.
func affectedOne(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return store.ErrNotFound
	}
	return nil
}
