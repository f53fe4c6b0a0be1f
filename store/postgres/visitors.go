package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/handoff-run/handoff/store"
)

func (s *Store) RemoveToken(ctx context.Context, hash []byte) error {
	return affectedOne(s.pool.Exec(ctx, `DELETE FROM tokens WHERE hash = $1`, hash))
}

func (s *Store) SetSignup(ctx context.Context, appID int64, policy string) error {
	_, err := s.pool.Exec(ctx, `UPDATE apps SET signup = $1 WHERE id = $2`, policy, appID)
	return err
}

func (s *Store) PutTicket(ctx context.Context, t store.Ticket) error {
	if _, err := s.pool.Exec(ctx, `DELETE FROM tickets WHERE expires > 0 AND expires < $1`, t.Created.UnixNano()); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO tickets (hash, app_id, kind, user_name, data, expires, created) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
		store.TicketArgs(t)...)
	if isUnique(err) {
		return store.ErrExists
	}
	return err
}

func (s *Store) TakeTicket(ctx context.Context, appID int64, kind string, hash []byte, now time.Time) (*store.Ticket, error) {
	t, err := store.ScanTakenTicket(s.pool.QueryRow(ctx, `DELETE FROM tickets WHERE hash = $1 AND app_id = $2 AND kind = $3
		RETURNING user_name, data, expires, created`, hash, appID, kind), appID, kind, hash, now)
	if noRows(err) {
		return nil, store.ErrNotFound
	}
	return t, err
}

func (s *Store) AddPasskey(ctx context.Context, p store.Passkey) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO passkeys (id, user_name, data, created) VALUES ($1, $2, $3, $4)`, p.ID, p.User, p.Data, p.Created.UnixNano())
	if isUnique(err) {
		return store.ErrExists
	}
	return err
}

func (s *Store) Passkeys(ctx context.Context, user string) ([]store.Passkey, error) {
	rows, err := s.pool.Query(ctx, `SELECT id, data, created FROM passkeys WHERE user_name = $1 ORDER BY created, id`, user)
	if err != nil {
		return nil, err
	}
	return collect(rows, func(row pgx.CollectableRow) (store.Passkey, error) {
		p := store.Passkey{User: user}
		var t int64
		err := row.Scan(&p.ID, &p.Data, &t)
		p.Created = fromNanos(t)
		return p, err
	})
}

func (s *Store) PasskeyByID(ctx context.Context, app string, id []byte) (*store.Passkey, error) {
	p := store.Passkey{ID: id}
	var t int64
	err := s.pool.QueryRow(ctx, `SELECT p.user_name, p.data, p.created FROM passkeys p JOIN users u ON u.name = p.user_name
		WHERE p.id = $1 AND u.app = $2`, id, app).Scan(&p.User, &p.Data, &t)
	if noRows(err) {
		return nil, store.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	p.Created = fromNanos(t)
	return &p, nil
}

func (s *Store) UpdatePasskey(ctx context.Context, user string, id, data []byte) error {
	return affectedOne(s.pool.Exec(ctx, `UPDATE passkeys SET data = $1 WHERE user_name = $2 AND id = $3`, data, user, id))
}

// affectedOne turns a statement that changed no row into ErrNotFound.
func affectedOne(ct pgconn.CommandTag, err error) error {
	if err != nil {
		return err
	}
	if ct.RowsAffected() == 0 {
		return store.ErrNotFound
	}
	return nil
}
