package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Dropping a database makes PostgreSQL checkpoint (write out every dirty
// page of the whole server and wait for the disk), and preparing a new
// one (the store's migrations) costs more CPU than most tests. Under Main
// a test's database is kept when the test ends: its rows are removed and,
// if its schema is still the one prepare made, it is handed to the next
// test of the process as it is; otherwise its schema is dropped and
// prepared again. Main drops them all at the end.

var pool struct {
	mu      sync.Mutex
	on      bool // under Main
	prepare func(ctx context.Context, url string) error
	shape   string           // the schema prepare makes, as shapeSQL sees it
	kept    map[string]int64 // the tables prepare wrote rows to, and how many
	free    []string         // databases ready for a test
	all     []string         // every database made under Main
	// keepers hold a connection to each database of the pool for its
	// resets: a new connection costs PostgreSQL a process, tens of
	// milliseconds of CPU on a slow machine, and every test resets. A
	// test sees it in pg_stat_activity (application_name pgtest-keeper),
	// idle, holding no lock.
	keepers map[string]*pgx.Conn
}

// Main runs a package's tests (m.Run) with their databases kept for reuse
// and dropped once at the end, and returns the exit code. prepare makes
// an empty database into the one Fresh hands out (the store's schema):
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, prepare)) }
func Main(m *testing.M, prepare func(ctx context.Context, url string) error) int {
	pool.mu.Lock()
	pool.on, pool.prepare = true, prepare
	pool.mu.Unlock()
	code := m.Run()
	pool.mu.Lock()
	names, keepers := pool.all, pool.keepers
	pool.on, pool.prepare, pool.shape, pool.kept, pool.free, pool.all, pool.keepers = false, nil, "", nil, nil, nil, nil
	pool.mu.Unlock()
	for _, conn := range keepers {
		conn.Close(context.Background())
	}
	for _, name := range names {
		if err := admin(baseURL, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
			fmt.Printf("pgtest: drop database %s: %v\n", name, err)
			code = max(code, 1)
		}
	}
	endShare()
	return code
}

// take returns a database for a test: a pooled one, or a new one
// (prepared under Main).
func take(base string) (string, error) {
	pool.mu.Lock()
	if n := len(pool.free); n > 0 {
		name := pool.free[n-1]
		pool.free = pool.free[:n-1]
		pool.mu.Unlock()
		return name, nil
	}
	on := pool.on
	pool.mu.Unlock()
	name, err := create(base)
	if err != nil || !on {
		return name, err
	}
	pool.mu.Lock()
	pool.all = append(pool.all, name)
	pool.mu.Unlock()
	if err := prepared(base, name); err != nil {
		return "", err
	}
	return name, nil
}

// create makes an empty database with a name of its own.
func create(base string) (string, error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "handoff_test_" + hex.EncodeToString(b[:])
	if err := admin(base, `CREATE DATABASE `+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return name, nil
}

// give ends a test's use of database name: kept for the next test under
// Main, dropped otherwise (or when it cannot be made as new again).
func give(base, name string) error {
	pool.mu.Lock()
	on := pool.on
	pool.mu.Unlock()
	if on {
		err := reset(base, name)
		if err == nil {
			pool.mu.Lock()
			pool.free = append(pool.free, name)
			pool.mu.Unlock()
			return nil
		}
		pool.mu.Lock()
		pool.all = slices.DeleteFunc(pool.all, func(n string) bool { return n == name })
		pool.mu.Unlock()
	}
	return drop(base, name)
}

func drop(base, name string) error {
	pool.mu.Lock()
	conn := pool.keepers[name]
	delete(pool.keepers, name)
	pool.mu.Unlock()
	if conn != nil {
		conn.Close(context.Background())
	}
	if err := admin(base, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// shapeSQL sums up a schema: the names and kinds of its tables, views,
// sequences and indexes, its triggers, functions and schemas. A test that
// changes the schema (an index made for a query, a table added) almost
// always adds or removes one of them.
const shapeSQL = `SELECT md5(coalesce(string_agg(x, E'\n' ORDER BY x), '')) FROM (
	SELECT 'rel ' || relname || ' ' || relkind::text AS x FROM pg_class WHERE relnamespace = 'public'::regnamespace
	UNION ALL SELECT 'trigger ' || tgname FROM pg_trigger WHERE NOT tgisinternal
	UNION ALL SELECT 'function ' || proname || ' ' || md5(prosrc) FROM pg_proc WHERE pronamespace = 'public'::regnamespace
	UNION ALL SELECT 'schema ' || nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema'
) s`

// rowsSQL counts the rows of each table of the schema; with $1 not null,
// only of the tables it names. (Counts, not contents: prepare may write
// the time, as a list of applied migrations does.)
const rowsSQL = `SELECT tablename, (xpath('/row/n/text()',
		query_to_xml(format('SELECT count(*) AS n FROM public.%I', tablename), false, true, '')))[1]::text::int8
	FROM pg_tables WHERE schemaname = 'public' AND ($1::text[] IS NULL OR tablename = ANY($1))`

// layout is a database's shape and the number of rows of its tables.
type layout struct {
	shape string
	rows  map[string]int64
}

// layoutOf reads the layout of conn's database, the rows of the tables
// named in only (all of them if nil).
func layoutOf(conn *pgx.Conn, only []string) (layout, error) {
	l := layout{rows: map[string]int64{}}
	ctx := context.Background()
	if err := conn.QueryRow(ctx, shapeSQL).Scan(&l.shape); err != nil {
		return l, err
	}
	rows, err := conn.Query(ctx, rowsSQL, only)
	if err != nil {
		return l, err
	}
	for rows.Next() {
		var table string
		var n int64
		if err := rows.Scan(&table, &n); err != nil {
			return l, err
		}
		l.rows[table] = n
	}
	return l, rows.Err()
}

// asPrepared reports whether l is what prepare made, but for the rows of
// the tables prepare left empty.
func asPrepared(l layout) bool {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if l.shape != pool.shape {
		return false
	}
	for table, n := range pool.kept {
		if l.rows[table] != n {
			return false
		}
	}
	return true
}

// prepared makes the empty database name what prepare makes, and checks
// that every database of the pool comes out the same.
func prepared(base, name string) error {
	u := dbURL(base, name)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pool.prepare(ctx, u); err != nil {
		return fmt.Errorf("prepare database %s: %w", name, err)
	}
	var l layout
	err := query(u, func(conn *pgx.Conn) (err error) {
		l, err = layoutOf(conn, nil)
		return err
	})
	if err != nil {
		return err
	}
	pool.mu.Lock()
	if pool.shape == "" {
		pool.shape, pool.kept = l.shape, map[string]int64{}
		for table, n := range l.rows {
			if n > 0 {
				pool.kept[table] = n
			}
		}
	}
	pool.mu.Unlock()
	if !asPrepared(l) {
		return fmt.Errorf("database %s: prepare made a schema unlike the one it made before", name)
	}
	return nil
}

// reset makes database name as take hands it out: no connection, no
// setting, no row but those prepare wrote, no statistics; the schema
// prepared again if a test changed it.
func reset(base, name string) error {
	if err := admin(base, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '`+name+`'
			AND pid <> pg_backend_pid() AND application_name IS DISTINCT FROM '`+keeperName+`';
		ALTER DATABASE `+name+` RESET ALL`); err != nil {
		return err
	}
	u := dbURL(base, name)
	pool.mu.Lock()
	kept := slices.Collect(maps.Keys(pool.kept))
	pool.mu.Unlock()
	same := false
	err := keeper(u, name, func(conn *pgx.Conn) error {
		// "" keeps the list from being nil, which would count every table.
		l, err := layoutOf(conn, append(kept, ""))
		if err != nil || !asPrepared(l) {
			return err
		}
		same = true
		// Only the tables a test wrote to are truncated (a truncate makes
		// new files for a table and its indexes: most of a reset's cost);
		// identities start again, and statistics go, so that the next
		// test's plans are made as on new tables.
		_, err = conn.Exec(context.Background(), `DO $$ DECLARE t text; has bool; used text[] := '{}'; BEGIN
			FOR t IN SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND NOT tablename = ANY('`+pgArray(kept)+`'::text[]) LOOP
				EXECUTE format('SELECT EXISTS (SELECT 1 FROM public.%I)', t) INTO has;
				IF has THEN
					used := used || t;
				ELSE
					PERFORM setval(d.objid, q.seqstart, false) FROM pg_depend d JOIN pg_sequence q ON q.seqrelid = d.objid
						WHERE d.classid = 'pg_class'::regclass AND d.refobjid = format('public.%I', t)::regclass AND d.deptype IN ('a', 'i');
				END IF;
			END LOOP;
			-- Sequences of no table's start again too.
			PERFORM setval(q.seqrelid, q.seqstart, false) FROM pg_sequence q JOIN pg_class c ON c.oid = q.seqrelid
				WHERE c.relnamespace = 'public'::regnamespace AND NOT EXISTS (SELECT 1 FROM pg_depend d
					WHERE d.classid = 'pg_class'::regclass AND d.objid = q.seqrelid AND d.deptype IN ('a', 'i'));
			IF cardinality(used) > 0 THEN
				EXECUTE 'TRUNCATE ' || (SELECT string_agg(format('public.%I', u), ', ') FROM unnest(used) u) || ' RESTART IDENTITY CASCADE';
			END IF;
		END $$; `+statsGone)
		return err
	})
	if err != nil || same {
		return err
	}
	if err := admin(u, `DO $$ DECLARE s text; BEGIN
		FOR s IN SELECT nspname FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%' AND nspname NOT IN ('information_schema', 'public') LOOP
			EXECUTE 'DROP SCHEMA ' || quote_ident(s) || ' CASCADE';
		END LOOP;
	END $$;
	DROP SCHEMA public CASCADE;
	CREATE SCHEMA public AUTHORIZATION pg_database_owner;
	GRANT USAGE ON SCHEMA public TO public`); err != nil {
		return err
	}
	return prepared(base, name)
}

// pgArray is names as a PostgreSQL array literal; table names of the
// prepared schema only, so no quoting is needed.
func pgArray(names []string) string { return "{" + strings.Join(names, ",") + "}" }

const statsGone = `DELETE FROM pg_statistic WHERE starelid IN (SELECT oid FROM pg_class WHERE relnamespace = 'public'::regnamespace)`

// dbURL is base pointing at database name.
func dbURL(base, name string) string {
	u, err := url.Parse(base)
	if err != nil {
		return base
	}
	u.Path = "/" + name
	return u.String()
}

// keeperName is the application_name of the keepers' connections, which
// reset leaves connected.
const keeperName = "pgtest-keeper"

// keeper runs fn on the kept connection to database name (at u), made
// now if there is none. A test may have ended that connection (one that
// terminates every backend of its database, say): then fn runs once more
// on a new one.
func keeper(u, name string, fn func(*pgx.Conn) error) error {
	pool.mu.Lock()
	conn := pool.keepers[name]
	delete(pool.keepers, name)
	pool.mu.Unlock()
	if conn != nil {
		err := fn(conn)
		if err == nil {
			keep(name, conn)
			return nil
		}
		if !conn.IsClosed() {
			conn.Close(context.Background())
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := pgx.ParseConfig(u)
	if err != nil {
		return err
	}
	cfg.RuntimeParams["application_name"] = keeperName
	if conn, err = pgx.ConnectConfig(ctx, cfg); err != nil {
		return err
	}
	if err := fn(conn); err != nil {
		conn.Close(context.Background())
		return err
	}
	keep(name, conn)
	return nil
}

// keep makes conn the kept connection to database name, or closes it
// when the pool is no longer on.
func keep(name string, conn *pgx.Conn) {
	pool.mu.Lock()
	on := pool.on
	if on {
		if pool.keepers == nil {
			pool.keepers = map[string]*pgx.Conn{}
		}
		pool.keepers[name] = conn
	}
	pool.mu.Unlock()
	if !on {
		conn.Close(context.Background())
	}
}

// query runs fn on a connection of its own to the database at u.
func query(u string, fn func(*pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	return fn(conn)
}

// admin runs sql on the database at u; on the server's own database
// (base) through a pool kept for the process, since a connection costs a
// PostgreSQL process.
func admin(u, sql string) error {
	if u != baseURL {
		return query(u, func(conn *pgx.Conn) error {
			_, err := conn.Exec(context.Background(), sql)
			return err
		})
	}
	adminPool.once.Do(func() { adminPool.p, adminPool.err = pgxpool.New(context.Background(), u) })
	if adminPool.err != nil {
		return adminPool.err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := adminPool.p.Exec(ctx, sql)
	return err
}

var adminPool struct {
	once sync.Once
	p    *pgxpool.Pool
	err  error
}
