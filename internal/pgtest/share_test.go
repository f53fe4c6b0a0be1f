package pgtest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TestShareWaitsWhileEveryShareIsHeld: with every share of the server
// held by other test processes, the next one waits for a share to end,
// and then holds it. The shares here are keyed apart from the real ones,
// which the packages tested beside this one hold.
func TestShareWaitsWhileEveryShareIsHeld(t *testing.T) {
	base := Need(t)
	ctx := context.Background()
	const space = shareSpace + 1
	var n int
	if err := query(base, func(c *pgx.Conn) (err error) {
		n, _, err = shares(ctx, c)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	// Other processes hold every share: a connection each.
	others := map[int]*pgx.Conn{}
	t.Cleanup(func() {
		for _, c := range others {
			c.Close(ctx)
		}
	})
	for i := range n {
		c, err := pgx.Connect(ctx, base)
		if err != nil {
			t.Fatal(err)
		}
		others[i] = c
		var ok bool
		if err := c.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, space, i).Scan(&ok); err != nil || !ok {
			t.Fatalf("holding share %d: %v %v", i, ok, err)
		}
	}

	type claimed struct {
		conn *pgx.Conn
		err  error
	}
	done := make(chan claimed, 1)
	go func() { c, err := claimShare(t, base, space); done <- claimed{c, err} }()
	// It waits for one share: its lock is asked for and not granted.
	var key int
	waitFor(t, "a process waiting for a share", func(c *pgx.Conn) (bool, error) {
		err := c.QueryRow(ctx, `SELECT objid::int FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 AND NOT granted`,
			space).Scan(&key)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	})
	select {
	case got := <-done:
		t.Fatalf("claimShare returned (%v) while every share was held", got.err)
	default:
	}
	// The process holding that share ends.
	others[key].Close(ctx)
	delete(others, key)
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	defer got.conn.Close(ctx)
	var held bool
	if err := got.conn.QueryRow(ctx, `SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND classid = $1
		AND objid = $2 AND pid = pg_backend_pid() AND granted`, space, key).Scan(&held); err != nil || !held {
		t.Fatalf("the waiter holds no share once one ended (%v)", err)
	}
}

// waitFor polls cond on a connection of its own until it holds.
func waitFor(t *testing.T, what string, cond func(*pgx.Conn) (bool, error)) {
	t.Helper()
	err := query(Need(t), func(c *pgx.Conn) error {
		for range 3000 {
			ok, err := cond(c)
			if err != nil || ok {
				return err
			}
			time.Sleep(5 * time.Millisecond)
		}
		return errors.New("timed out")
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}
