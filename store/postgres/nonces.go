package postgres

import (
	"context"
	"time"
)

// noncesSweepEvery is how often a node deletes expired nonces: they are
// refused by age anyway, so the table only needs to stay small.
const noncesSweepEvery = time.Minute

// UseNonce records a signed request's token. A token recorded before is
// fresh again only once its expiry has passed. See store.NonceKeeper.
func (s *Store) UseNonce(ctx context.Context, key string, now, expires time.Time) (bool, error) {
	s.sweepNonces(ctx, now)
	var fresh bool
	err := s.pool.QueryRow(ctx, `INSERT INTO nonces (key, expires) VALUES ($1, $2)
		ON CONFLICT (key) DO UPDATE SET expires = excluded.expires WHERE nonces.expires < $3
		RETURNING true`, key, expires.UnixNano(), now.UnixNano()).Scan(&fresh)
	if noRows(err) {
		return false, nil
	}
	return fresh, err
}

func (s *Store) sweepNonces(ctx context.Context, now time.Time) {
	last := s.noncesSwept.Load()
	if now.UnixNano()-last < int64(noncesSweepEvery) || !s.noncesSwept.CompareAndSwap(last, now.UnixNano()) {
		return
	}
	// Best effort: a failed sweep leaves rows that the next one deletes.
	_, _ = s.pool.Exec(ctx, `DELETE FROM nonces WHERE expires < $1`, now.UnixNano())
}
