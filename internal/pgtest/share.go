package pgtest

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
)

// go test runs several packages at once (-p, one per core by default),
// and each package's PostgreSQL tests are sized to fit in about 40 of
// the server's connections on their own. More of them at once would be
// refused connections ("too many clients"), so a test process that uses
// PostgreSQL holds one of a few shares of the server, from its first use
// until it exits. A share is a session advisory lock in the base
// database, held on a connection of its own: it ends with the process,
// however that ends.

// shareConns is how many connections one test process may use.
const shareConns = 40

// shareSpace keys the shares' advisory locks (the first of two keys), so
// that they meet no lock of the code under test.
const shareSpace = 0x68616e64 // "hand"

var share struct {
	once sync.Once
	conn *pgx.Conn
	err  error
}

// takeShare takes one of the server's shares for this process, waiting
// for another process to end if every share is held.
func takeShare(t testing.TB, base string) error {
	share.once.Do(func() { share.conn, share.err = claimShare(t, base, shareSpace) })
	return share.err
}

// claimShare takes a share, its locks keyed in space.
func claimShare(t testing.TB, base string, space int) (*pgx.Conn, error) {
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		return nil, err
	}
	cfg.RuntimeParams["application_name"] = "pgtest-share"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, err
	}
	n, usable, err := shares(ctx, conn)
	if err != nil {
		conn.Close(ctx)
		return nil, err
	}
	for i := range n {
		var ok bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, space, i).Scan(&ok); err != nil {
			conn.Close(ctx)
			return nil, err
		}
		if ok {
			return conn, nil
		}
	}
	i := os.Getpid() % n
	t.Logf("pgtest: the %d shares of PostgreSQL's %d connections are held by other test processes; waiting for share %d", n, usable, i)
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, space, i); err != nil {
		conn.Close(ctx)
		return nil, fmt.Errorf("waiting for a share of PostgreSQL's connections: %w", err)
	}
	return conn, nil
}

// shares reports how many shares the server has, and the connections
// they divide.
func shares(ctx context.Context, conn *pgx.Conn) (n, usable int, err error) {
	err = conn.QueryRow(ctx, `SELECT current_setting('max_connections')::int
		- current_setting('superuser_reserved_connections')::int`).Scan(&usable)
	return max(1, usable/shareConns), usable, err
}

// endShare gives the process's share back (Main, once its databases are
// dropped).
func endShare() {
	if share.conn != nil {
		share.conn.Close(context.Background())
	}
}
