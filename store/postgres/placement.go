package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/handoff-run/handoff/store"
)

// What a router over several databases (internal/placement) needs of
// each one: an app's data may live in another database than its
// identity, and move from one database to another. The schema knowledge
// stays here; the router decides where each app lives.

// DataTables are the tables keyed by app_id that hold an app's data: what
// a move copies and then deletes from where the app was. The others
// keyed by app_id (IdentityTables) stay on the home database.
var DataTables = []string{"dbs", "docs", "grants", "grant_counts", "code", "code_files",
	"revisions", "events", "ticks", "tick_leases", "logs"}

// IdentityTables are the tables keyed by app_id that belong to the app's
// identity, on the home database only.
var IdentityTables = []string{"members", "secrets", "tickets"}

// fencedCode is the SQLSTATE of a write refused because its app is not
// (or no longer) placed in this database.
const fencedCode = "HM001"

// Fenced reports whether err is a write refused by Fence: the app is
// moving, or lives in another database now.
func Fenced(err error) bool { return pgCode(err) == fencedCode }

// placementDDL makes a database able to refuse an app's writes while the
// app is away: placement_fence lists the apps not (or not yet, or no
// longer) placed here, and statement triggers on the ledger, the code and
// the ticks abort any statement writing for one of them. When nothing
// moves, a statement pays for keeping its rows for the trigger and one
// probe of an empty table. The outbox's claims and settlements are not
// fenced (a settlement flush spans apps): an event settled in the source
// after the copy is delivered again, at least once.
const placementDDL = `
	CREATE TABLE IF NOT EXISTS placement_fence (app_id int8 PRIMARY KEY);
	CREATE OR REPLACE FUNCTION handoff_fenced() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
		IF EXISTS (SELECT 1 FROM placement_fence)
			AND EXISTS (SELECT 1 FROM placement_fence f JOIN new_rows n ON n.app_id = f.app_id) THEN
			RAISE EXCEPTION 'the app is moving to another database; retry in a moment'
				USING ERRCODE = '` + fencedCode + `';
		END IF;
		RETURN NULL;
	END $$;`

// fencedWrites are the statements the fence refuses, as table and
// event: the ledger (every commit), the code, and the ticks and their
// leases (a tick taken where the app no longer lives would let another
// node take the same tick where it does).
var fencedWrites = [][2]string{{"revisions", "INSERT"}, {"code", "INSERT"}, {"code", "UPDATE"},
	{"ticks", "INSERT"}, {"ticks", "UPDATE"}, {"tick_leases", "INSERT"}, {"tick_leases", "UPDATE"}}

// PreparePlacement adds the fence to the database, if it lacks it. Only
// a store that is one of several needs it; several nodes may call it at
// once.
func (s *Store) PreparePlacement(ctx context.Context) error {
	return underMigrateLock(ctx, s.pool, func(conn *pgxpool.Conn) error {
		return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, placementDDL); err != nil {
				return err
			}
			for _, w := range fencedWrites {
				name := strings.ToLower(w[0] + "_" + w[1] + "_fenced")
				var n int
				if err := tx.QueryRow(ctx, `SELECT count(*) FROM pg_trigger WHERE tgname = $1`, name).Scan(&n); err != nil {
					return err
				}
				if n > 0 {
					continue
				}
				if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TRIGGER %s AFTER %s ON %s REFERENCING NEW TABLE AS new_rows
					FOR EACH STATEMENT EXECUTE FUNCTION handoff_fenced()`, name, w[1], w[0])); err != nil {
					return err
				}
			}
			return nil
		})
	})
}

// ShareNode makes s name itself in its database as other does, before
// either is used: one process's leases of events and ticks then carry
// over when an app moves between their databases.
func (s *Store) ShareNode(other *Store) { s.node = other.node }

// AdoptApp makes a the database's app as well, keeping its id, so that
// its data may be written here: the rows of the app and its owner that
// the data's keys point to, if missing (on the home database they exist).
// It does not unfence the app.
func (s *Store) AdoptApp(ctx context.Context, a store.App) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		return adopt(ctx, tx, a)
	})
}

func adopt(ctx context.Context, tx pgx.Tx, a store.App) error {
	if _, err := tx.Exec(ctx, `INSERT INTO users (name, created) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		a.Owner, a.Created.UnixNano()); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `INSERT INTO apps (id, owner, name, created) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
		a.ID, a.Owner, a.Name, a.Created.UnixNano())
	return err
}

// Fence refuses every later write of app's ledger, code and ticks in this
// database, and returns once the transactions that may have written
// before the fence took hold have ended: from then on, what the
// database holds of the app no longer changes but for its events, ticks
// and logs.
func (s *Store) Fence(ctx context.Context, app int64) error {
	if _, err := s.pool.Exec(ctx, `INSERT INTO placement_fence (app_id) VALUES ($1) ON CONFLICT DO NOTHING`, app); err != nil {
		return err
	}
	// A commit's statements may check the fence with a snapshot older
	// than the fence itself, and take a transaction id only after the
	// wait below looked: barriers tell. Every commit holds writeBarrier
	// (seqs.go) from taking its seqs to its end, and code versions hold
	// the app's row in apps (code.go); once this has had both, those that
	// held them before have ended, and those after took them, and so
	// their snapshots, after the fence.
	if _, err := s.pool.Exec(ctx, `SELECT 1 FROM apps WHERE id = $1 FOR UPDATE`, app); err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, `SELECT pg_advisory_xact_lock(`+writeBarrierSQL+`)`); err != nil {
		return err
	}
	// Any other transaction still open now may have written before the
	// fence (a tick): wait until each has ended, but for those seen in
	// other databases of the server (one whose session this role may not
	// see counts).
	var xids []string
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(array_agg(x::text), '{}') FROM pg_snapshot_xip(pg_current_snapshot()) x
		WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.datname <> current_database()
			AND a.backend_xid::text = (x::text::numeric % 4294967296)::text)`).Scan(&xids); err != nil {
		return err
	}
	for len(xids) > 0 {
		var open []string
		// Visible in a snapshot, not merely committed (pg_xact_status):
		// a transaction is committed a moment before the snapshots taken
		// meanwhile see it, and the copy must see it.
		err := s.pool.QueryRow(ctx, `SELECT coalesce(array_agg(x), '{}') FROM unnest($1::text[]) x
			WHERE NOT pg_visible_in_snapshot(x::xid8, pg_current_snapshot())`, xids).Scan(&open)
		if err != nil {
			return err
		}
		if xids = open; len(xids) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("transactions %s still open: %w", strings.Join(xids, ", "), ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
	return nil
}

// Unfence lets app's writes into this database again.
func (s *Store) Unfence(ctx context.Context, app int64) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM placement_fence WHERE app_id = $1`, app)
	return err
}

// IsFenced reports whether app's writes are refused here.
func (s *Store) IsFenced(ctx context.Context, app int64) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM placement_fence WHERE app_id = $1)`, app).Scan(&ok)
	return ok, err
}

// CopyAppTo copies app a's data (DataTables) from s to dst
// in one transaction of dst, replacing whatever dst held of it, and
// unfences it there. The app should be fenced in s (Fence), so that its
// ledger stands still while it is copied; its events' leases come along
// as they are, so a node whose stores share a name (ShareNode) still
// holds them in dst. Every node hears that the app changed in dst.
func (s *Store) CopyAppTo(ctx context.Context, dst *Store, a store.App) error {
	var seq, grantsSeq int64
	if err := s.pool.QueryRow(ctx, `SELECT coalesce((SELECT max(seq) FROM revisions WHERE app_id = a.id), 0), grants_seq
		FROM apps a WHERE id = $1`, a.ID).Scan(&seq, &grantsSeq); err != nil {
		if noRows(err) {
			return fmt.Errorf("app %d: %w", a.ID, store.ErrNotFound)
		}
		return err
	}
	// The app's seqs go on growing in dst.
	if err := dst.raiseSeq(ctx, max(seq, grantsSeq)); err != nil {
		return err
	}
	return retryDeadlocks(func() error { return s.copyApp(ctx, dst, a, grantsSeq) })
}

// copyApp is CopyAppTo's transaction in dst, on a connection of its own
// in s (one a failed copy left may be unusable).
func (s *Store) copyApp(ctx context.Context, dst *Store, a store.App, grantsSeq int64) error {
	src, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer src.Release()
	return pgx.BeginFunc(ctx, dst.pool, func(tx pgx.Tx) error {
		if err := adopt(ctx, tx, a); err != nil {
			return err
		}
		// Lifted for this transaction's own copy first; the others see
		// it lifted when the copy commits.
		if _, err := tx.Exec(ctx, `DELETE FROM placement_fence WHERE app_id = $1`, a.ID); err != nil {
			return err
		}
		if err := deleteData(ctx, tx, a.ID); err != nil {
			return err
		}
		for _, t := range DataTables {
			if err := copyTable(ctx, src.Conn(), tx.Conn(), t, a.ID); err != nil {
				return fmt.Errorf("copy %s: %w", t, err)
			}
		}
		var conf int64
		if err := tx.QueryRow(ctx, `UPDATE apps SET grants_seq = $2, conf = conf + 1 WHERE id = $1 RETURNING conf`,
			a.ID, grantsSeq).Scan(&conf); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify('`+notifyChannel+`', 'c:' || $1::text || ':' || $2::text)`,
			strconv.FormatInt(a.ID, 10), strconv.FormatInt(conf, 10))
		return err
	})
}

// copyTable streams app's rows of table from src into dst, in binary
// (both databases have the same schema: this handoff migrated both). Log
// ids are global to a database, so log lines get new ones, in the same
// order.
func copyTable(ctx context.Context, src, dst *pgx.Conn, table string, app int64) error {
	skip, order := "", ""
	if table == "logs" {
		skip, order = "id", " ORDER BY id"
	}
	rows, err := src.Query(ctx, `SELECT column_name FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = $1 AND is_generated = 'NEVER'
		AND column_name <> $2 ORDER BY ordinal_position`, table, skip)
	if err != nil {
		return err
	}
	cols, err := collect(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	if len(cols) == 0 {
		return fmt.Errorf("table %s has no columns in the source database", table)
	}
	list := `"` + strings.Join(cols, `", "`) + `"`
	pr, pw := io.Pipe()
	out := make(chan error, 1)
	go func() {
		_, err := src.PgConn().CopyTo(ctx, pw, fmt.Sprintf(`COPY (SELECT %s FROM %s WHERE app_id = %d%s) TO STDOUT (FORMAT binary)`, list, table, app, order))
		pw.CloseWithError(err)
		out <- err
	}()
	_, err = dst.PgConn().CopyFrom(ctx, pr, fmt.Sprintf(`COPY %s (%s) FROM STDIN (FORMAT binary)`, table, list))
	pr.CloseWithError(err) // unblocks the reader's side if we stopped early
	if oerr := <-out; oerr != nil && !errors.Is(oerr, io.ErrClosedPipe) {
		return oerr
	}
	return err
}

// DropAppData deletes app's data (DataTables) from this database, in one
// transaction, and fences it here first, so a write that still came here
// is refused rather than lost. The app's row stays (on the home database
// it is the app's identity).
func (s *Store) DropAppData(ctx context.Context, app int64) error {
	return retryDeadlocks(func() error {
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `INSERT INTO placement_fence (app_id) VALUES ($1) ON CONFLICT DO NOTHING`, app); err != nil {
				return err
			}
			return deleteData(ctx, tx, app)
		})
	})
}

// deadlockDetected is the SQLSTATE of a transaction PostgreSQL ended to
// break a deadlock.
const deadlockDetected = "40P01"

// LostDeadlock reports whether err is a transaction PostgreSQL ended to
// break a deadlock: nothing of it was written, and it may be run again.
func LostDeadlock(err error) bool { return pgCode(err) == deadlockDetected }

// retryDeadlocks runs fn again when it lost a deadlock: deleting an app's
// rows can meet a commit of a node that has not heard of a move yet,
// which holds some of them and waits for others (it is refused by the
// fence right after).
func retryDeadlocks(fn func() error) error {
	for range 4 {
		if err := fn(); !LostDeadlock(err) {
			return err
		}
	}
	return fn()
}

func deleteData(ctx context.Context, tx pgx.Tx, app int64) error {
	for _, t := range DataTables {
		if _, err := tx.Exec(ctx, `DELETE FROM `+t+` WHERE app_id = $1`, app); err != nil {
			return fmt.Errorf("delete from %s: %w", t, err)
		}
	}
	return nil
}

// TouchApp tells every node that app's settings changed (store.AppWatcher),
// as a change of its members would: the router's way of saying the app
// now lives elsewhere.
func (s *Store) TouchApp(ctx context.Context, app int64) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var conf int64
		if err := tx.QueryRow(ctx, `UPDATE apps SET conf = conf + 1 WHERE id = $1 RETURNING conf`, app).Scan(&conf); err != nil {
			if noRows(err) {
				return fmt.Errorf("app %d: %w", app, store.ErrNotFound)
			}
			return err
		}
		_, err := tx.Exec(ctx, `SELECT pg_notify('`+notifyChannel+`', 'c:' || $1::text || ':' || $2::text)`,
			strconv.FormatInt(app, 10), strconv.FormatInt(conf, 10))
		return err
	})
}

// AppTables lists the tables of the database with an app_id column, for
// a test that every one is either data or identity.
func (s *Store) AppTables(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT table_name::text FROM information_schema.columns
		WHERE table_schema = current_schema() AND column_name = 'app_id' ORDER BY 1`)
	if err != nil {
		return nil, err
	}
	return collect(rows, pgx.RowTo[string])
}
