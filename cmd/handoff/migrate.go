package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store/postgres"
	"github.com/handoff-run/handoff/store/sqlite"
)

// sqliteSchemaVersion is the embedded store's schema version (its
// PRAGMA user_version) that migrate knows how to read.
const sqliteSchemaVersion = 8

// migrateTable is one table copied from the embedded store to PostgreSQL:
// the SQLite columns read, in order, and the PostgreSQL columns written.
// Columns that differ in type are converted by kind: 'b' is a SQLite
// integer that becomes a boolean, 'y' text that becomes bytea, 'j' the
// document body, written both as body_text and as jsonb, 'a' a JSON array
// of strings that becomes text[].
type migrateTable struct {
	name  string
	from  []string
	to    []string
	kinds string // one byte per from column: '.', 'b', 'y', 'j' or 'a'
	order string
}

// migrateTables lists every table of the embedded store, parents first.
// The ledger goes in seq order, so heads and sequence numbers come out
// equal. Tick leases and event leases do not exist in the embedded store
// and start empty.
var migrateTables = []migrateTable{
	{"users", []string{"name", "admin", "created", "app", "password_hash"},
		[]string{"name", "admin", "created", "app", "password_hash"}, ".b...", "name"},
	{"tokens", []string{"hash", "user", "created"}, []string{"hash", "user_name", "created"}, "...", "hash"},
	{"apps", []string{"id", "owner", "name", "public", "created", "seq", "access_timeout_ms", "origins", "signup", "js_memory_mib"},
		[]string{"id", "owner", "name", "public", "created", "seq", "access_timeout_ms", "origins", "signup", "js_memory_mib"}, "...b...a..", "id"},
	{"members", []string{"app_id", "user", "role"}, []string{"app_id", "user_name", "role"}, "...", "app_id, user, role"},
	{"dbs", []string{"app_id", "name"}, []string{"app_id", "name"}, "..", "app_id, name"},
	{"docs", []string{"app_id", "db", "id", "rev", "deleted", "body", "seq", "time", "channels", "has_grants"},
		[]string{"app_id", "db", "id", "rev", "deleted", "body_text", "body", "seq", "time", "channels", "has_grants"}, "....bj...b", "app_id, db, id"},
	{"grants", []string{"app_id", "db", "doc_id", "kind", "principal", "channel"},
		[]string{"app_id", "db", "doc_id", "kind", "principal", "channel"}, "......", "rowid"},
	{"grant_counts", []string{"app_id", "kind", "principal", "channel", "n"},
		[]string{"app_id", "kind", "principal", "channel", "n"}, ".....", "app_id, kind, principal, channel"},
	{"code", []string{"app_id", "version", "access", "backend", "author", "created", "active"},
		[]string{"app_id", "version", "access", "backend", "author", "created", "active"}, "..yy..b", "app_id, version"},
	{"code_files", []string{"app_id", "version", "path", "data"}, []string{"app_id", "version", "path", "data"}, "...y", "app_id, version, path"},
	{"revisions", []string{"app_id", "seq", "db", "id", "rev", "deleted", "body", "time", "user", "device", "handler", "path", "channels", "prev_seq"},
		[]string{"app_id", "seq", "db", "id", "rev", "deleted", "body", "time", "writer_user", "writer_device", "writer_handler", "path", "channels", "prev_seq"},
		".....b........", "app_id, seq"},
	{"events", []string{"app_id", "seq", "depth", "attempts", "next_at", "dead", "last_error", "running", "origin", "db", "doc_id"},
		[]string{"app_id", "seq", "depth", "attempts", "next_at", "dead", "last_error", "running", "origin", "db", "doc_id"}, ".....b.b...", "app_id, seq"},
	{"ticks", []string{"app_id", "planned", "started", "duration", "error"}, []string{"app_id", "planned", "started", "duration", "error"}, ".....", "app_id"},
	{"logs", []string{"id", "app_id", "time", "level", "source", "message", "fields"},
		[]string{"id", "app_id", "time", "level", "source", "message", "fields"}, ".......", "id"},
	{"devices", []string{"user", "name", "public_key", "app", "created", "revoked"},
		[]string{"user_name", "name", "public_key", "app", "created", "revoked"}, "..y...", "rowid"},
	{"secrets", []string{"app_id", "name", "sealed", "updated"}, []string{"app_id", "name", "sealed", "updated"}, "..y.", "app_id, name"},
	{"tickets", []string{"hash", "app_id", "kind", "user", "data", "expires", "created"},
		[]string{"hash", "app_id", "kind", "user_name", "data", "expires", "created"}, "y...y..", "hash"},
	{"passkeys", []string{"id", "user", "data", "created"}, []string{"id", "user_name", "data", "created"}, "y.y.", "id"},
}

// migrateCounts are what must agree on both sides after a migration.
type migrateCounts struct {
	Users        int64            `json:"users"`
	Apps         int64            `json:"apps"`
	Revisions    map[string]int64 `json:"revisions"` // per app, owner/name
	LiveDocs     map[string]int64 `json:"liveDocs"`  // per app
	Events       int64            `json:"events"`
	DeadEvents   int64            `json:"deadEvents"`
	CodeVersions int64            `json:"codeVersions"`
	Secrets      int64            `json:"secrets"`
	Devices      int64            `json:"devices"`
}

func (c *cli) migrateCmd() *cobra.Command {
	var from, to string
	cmd := &cobra.Command{
		Use:   "migrate --from DATA_DIR --to postgres://…",
		Short: "Move an embedded store to PostgreSQL",
		Long: `Copy everything of the embedded store in DATA_DIR — users and their
tokens, apps, members, code versions, devices, secrets, the whole ledger,
document heads, grants, and waiting and dead onChange events — into an
empty PostgreSQL database, in one transaction, then compare the counts on
both sides and print them as JSON.

Stop the server on DATA_DIR first. Secrets stay sealed with DATA_DIR's
` + serverKeyFile + `: run the PostgreSQL nodes with that file in their data
directory (and ` + adminTokenFile + ` if you use it).`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			if from == "" || to == "" {
				return usageError{"migrate needs --from DATA_DIR and --to postgres://USER:PASSWORD@HOST:PORT/DB"}
			}
			if err := postgres.CheckURL(to); err != nil {
				return usageError{"--to must be a postgres://USER:PASSWORD@HOST:PORT/DB URL: " + err.Error()}
			}
			counts, err := c.migrate(cmd.Context(), from, to)
			if err != nil {
				return err
			}
			return c.printJSON(counts)
		}),
	}
	cmd.Flags().StringVar(&from, "from", "", "data directory of the embedded store")
	cmd.Flags().StringVar(&to, "to", "", "URL of an empty PostgreSQL database")
	return cmd
}

func (c *cli) migrate(ctx context.Context, from, to string) (map[string]migrateCounts, error) {
	path := filepath.Join(from, sqlite.FileName)
	if _, err := os.Stat(path); err != nil {
		return nil, errs.New(errs.Invalid, "no embedded store in %s: %v", from, err)
	}
	// Writes a running server made after the copy would be lost.
	release, err := lockDataDir(from, "stop that server, then migrate again")
	if err != nil {
		return nil, err
	}
	defer release()
	src, err := openMigrateSource(ctx, from, path)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	// One read transaction: a consistent snapshot of the whole store.
	rtx, err := src.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, errs.New(errs.Internal, "cannot read %s: %v", path, err)
	}
	defer rtx.Rollback()
	conn, err := openMigrateTarget(ctx, to)
	if err != nil {
		return nil, err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	unindexed, err := c.copyTables(ctx, rtx, conn)
	if err != nil {
		return nil, err
	}
	return c.checkMigration(ctx, rtx, conn, unindexed)
}

// openMigrateSource opens the embedded store at path, read only, and
// checks that this handoff knows its schema.
func openMigrateSource(ctx context.Context, from, path string) (*sql.DB, error) {
	src, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(10000)&_pragma=query_only(ON)")
	if err != nil {
		return nil, errs.New(errs.Internal, "cannot open %s: %v", path, err)
	}
	src.SetMaxOpenConns(1)
	var version int
	if err := src.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		src.Close()
		return nil, errs.New(errs.Internal, "cannot read %s: %v", path, err)
	}
	if version != sqliteSchemaVersion {
		src.Close()
		return nil, errs.New(errs.Invalid, "%s has schema version %d; this handoff migrates version %d: start `handoff serve --data %s` of this version once, stop it, and migrate again",
			path, version, sqliteSchemaVersion, from)
	}
	return src, nil
}

// openMigrateTarget applies the PostgreSQL schema at to and connects to
// it, refusing a database that already holds users or apps.
func openMigrateTarget(ctx context.Context, to string) (*pgx.Conn, error) {
	// Open applies the PostgreSQL schema.
	st, err := postgres.Open(ctx, to)
	if err != nil {
		return nil, errs.New(errs.Unavailable, "cannot open the PostgreSQL store: %v", err)
	}
	st.Close()
	// The URL may carry pool settings (pool_max_conns) plain pgx refuses.
	pcfg, err := pgxpool.ParseConfig(to)
	if err != nil {
		return nil, errs.New(errs.Invalid, "--to: %v", err)
	}
	conn, err := pgx.ConnectConfig(ctx, pcfg.ConnConfig)
	if err != nil {
		return nil, errs.New(errs.Unavailable, "cannot connect to PostgreSQL: %v", err)
	}
	var used bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users) OR EXISTS (SELECT 1 FROM apps)`).Scan(&used); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, errs.New(errs.Internal, "cannot read the PostgreSQL store: %v", err)
	}
	if used {
		conn.Close(context.WithoutCancel(ctx))
		return nil, errs.New(errs.Exists, "the PostgreSQL database %s already holds users or apps: migrate only into an empty one", postgres.Redact(to))
	}
	return conn, nil
}

// copyTables copies every table of migrateTables from rtx to conn, in one
// PostgreSQL transaction, showing a progress bar on a terminal. It
// returns the documents copied without their jsonb body.
func (c *cli) copyTables(ctx context.Context, rtx *sql.Tx, conn *pgx.Conn) ([]unindexedDoc, error) {
	var total int64
	sizes := make([]int64, len(migrateTables))
	for i, t := range migrateTables {
		if err := rtx.QueryRowContext(ctx, `SELECT count(*) FROM `+t.name).Scan(&sizes[i]); err != nil {
			return nil, errs.New(errs.Internal, "cannot count %s: %v", t.name, err)
		}
		total += sizes[i]
	}
	var bar *progressbar.ProgressBar
	if isTerminal(c.stderr) {
		bar = progressbar.NewOptions64(total,
			progressbar.OptionSetWriter(c.stderr),
			progressbar.OptionSetDescription("migrating"),
			progressbar.OptionShowCount(),
			progressbar.OptionClearOnFinish(),
			progressbar.OptionThrottle(100_000_000))
	}
	var unindexed []unindexedDoc
	err := pgx.BeginFunc(ctx, conn, func(wtx pgx.Tx) error {
		unindexed = nil
		for i, t := range migrateTables {
			if bar != nil {
				bar.Describe("migrating " + t.name)
			}
			rows, err := rtx.QueryContext(ctx, `SELECT `+strings.Join(t.from, ", ")+` FROM `+t.name+` ORDER BY `+t.order)
			if err != nil {
				return fmt.Errorf("reading %s: %w", t.name, err)
			}
			src := &migrateSource{t: t, rows: rows, bar: bar}
			n, err := wtx.CopyFrom(ctx, pgx.Identifier{t.name}, t.to, src)
			unindexed = append(unindexed, src.unindexed...)
			rows.Close()
			if err != nil {
				return fmt.Errorf("writing %s: %w", t.name, err)
			}
			if n != sizes[i] {
				return fmt.Errorf("%s: %d rows read, %d written", t.name, sizes[i], n)
			}
		}
		// Identity columns carry on after the copied ids.
		for _, tbl := range []string{"apps", "logs"} {
			if _, err := wtx.Exec(ctx, `SELECT setval(pg_get_serial_sequence('`+tbl+`', 'id'), coalesce(max(id), 0) + 1, false) FROM `+tbl); err != nil {
				return fmt.Errorf("identity of %s: %w", tbl, err)
			}
		}
		// So do the seqs, which come from one sequence there
		// (store/postgres/seqs.go).
		if _, err := wtx.Exec(ctx, `SELECT setval('handoff_seq', max(seq)) FROM revisions HAVING max(seq) > 0`); err != nil {
			return fmt.Errorf("the sequence of seqs: %w", err)
		}
		return nil
	})
	if bar != nil {
		bar.Finish()
	}
	if err != nil {
		return nil, errs.New(errs.Internal, "migration failed, nothing was written to PostgreSQL: %v", err)
	}
	return unindexed, nil
}

// checkMigration compares the counts of both sides and warns of the
// documents copied without their jsonb body.
func (c *cli) checkMigration(ctx context.Context, rtx *sql.Tx, conn *pgx.Conn, unindexed []unindexedDoc) (map[string]migrateCounts, error) {
	before, err := countSQLite(ctx, rtx)
	if err != nil {
		return nil, errs.New(errs.Internal, "counting the embedded store: %v", err)
	}
	after, err := countPostgres(ctx, conn)
	if err != nil {
		return nil, errs.New(errs.Internal, "counting the PostgreSQL store: %v", err)
	}
	out := map[string]migrateCounts{"from": before, "to": after}
	if fmt.Sprint(before) != fmt.Sprint(after) { // maps print sorted
		c.printJSON(out)
		return nil, errs.New(errs.Internal, "the counts differ after the migration (above)")
	}
	if err := c.reportUnindexed(ctx, rtx, unindexed); err != nil {
		return nil, errs.New(errs.Internal, "reading the embedded store's apps: %v", err)
	}
	return out, nil
}

// unindexedDoc is a document head whose body breaks today's rules on
// values (written before they held): PostgreSQL's jsonb may refuse it or
// read it differently, so it is copied without its jsonb copy.
type unindexedDoc struct {
	app    int64
	db, id string
	why    error
}

// reportUnindexed lists the documents copied without a jsonb body: they
// read back as they were, but field queries do not find them.
func (c *cli) reportUnindexed(ctx context.Context, rtx *sql.Tx, docs []unindexedDoc) error {
	if len(docs) == 0 {
		return nil
	}
	apps := map[int64]string{}
	rows, err := rtx.QueryContext(ctx, `SELECT id, owner || '/' || name FROM apps`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var ref string
		if err := rows.Scan(&id, &ref); err != nil {
			return err
		}
		apps[id] = ref
	}
	if err := rows.Err(); err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "warning: %d documents hold values that documents may no longer hold (they were written before the rule); "+
		"they were copied as they are and read back unchanged, but field queries on PostgreSQL do not find them until they are rewritten without those values:\n", len(docs))
	for _, d := range docs {
		fmt.Fprintf(c.stderr, "  %s %s %s: %v\n", apps[d.app], d.db, d.id, d.why)
	}
	return nil
}

// migrateSource feeds one table's SQLite rows to CopyFrom.
type migrateSource struct {
	t         migrateTable
	rows      *sql.Rows
	bar       *progressbar.ProgressBar
	vals      []any
	err       error
	unindexed []unindexedDoc
}

func (m *migrateSource) Next() bool {
	if !m.rows.Next() {
		return false
	}
	raw := make([]any, len(m.t.from))
	ptrs := make([]any, len(raw))
	for i := range raw {
		ptrs[i] = &raw[i]
	}
	if m.err = m.rows.Scan(ptrs...); m.err != nil {
		return false
	}
	m.vals = m.vals[:0]
	for i, v := range raw {
		switch m.t.kinds[i] {
		case 'b':
			n, ok := v.(int64)
			if !ok {
				m.err = fmt.Errorf("%s.%s: %T is not an integer", m.t.name, m.t.from[i], v)
				return false
			}
			m.vals = append(m.vals, n != 0)
		case 'y':
			switch b := v.(type) {
			case string:
				m.vals = append(m.vals, []byte(b))
			default:
				m.vals = append(m.vals, v)
			}
		case 'a':
			var list []string
			text, _ := v.(string)
			if b, ok := v.([]byte); ok {
				text = string(b)
			}
			if m.err = json.Unmarshal([]byte(text), &list); m.err != nil {
				m.err = fmt.Errorf("%s.%s: %q is not a JSON array of strings", m.t.name, m.t.from[i], text)
				return false
			}
			m.vals = append(m.vals, append([]string{}, list...))
		case 'j':
			var body *string
			switch b := v.(type) {
			case string:
				body = &b
			case []byte:
				s := string(b)
				body = &s
			}
			if body == nil {
				m.vals = append(m.vals, nil, nil)
				break
			}
			if err := engine.ValidValues([]byte(*body)); err != nil {
				// The docs table's columns start with app_id, db, id.
				app, _ := raw[0].(int64)
				m.unindexed = append(m.unindexed, unindexedDoc{app: app, db: fmt.Sprintf("%s", raw[1]), id: fmt.Sprintf("%s", raw[2]), why: err})
				m.vals = append(m.vals, *body, nil)
				break
			}
			m.vals = append(m.vals, *body, *body)
		default:
			if b, ok := v.([]byte); ok && !isBlobColumn(m.t.from[i]) {
				v = string(b)
			}
			if s, ok := v.(string); ok {
				// Free text (log lines, handler errors) may hold what a
				// PostgreSQL text column cannot: NUL, invalid UTF-8.
				v = postgres.Text(s)
			}
			m.vals = append(m.vals, v)
		}
	}
	if m.bar != nil {
		m.bar.Add(1)
	}
	return true
}

// isBlobColumn: columns that are BLOB in SQLite and bytea in PostgreSQL.
func isBlobColumn(name string) bool { return name == "hash" }

func (m *migrateSource) Values() ([]any, error) { return m.vals, nil }

func (m *migrateSource) Err() error {
	if m.err != nil {
		return m.err
	}
	return m.rows.Err()
}

const (
	countRevisionsSQL = `SELECT a.owner || '/' || a.name, (SELECT count(*) FROM revisions r WHERE r.app_id = a.id),
		(SELECT count(*) FROM docs d WHERE d.app_id = a.id AND NOT d.deleted) FROM apps a`
	countTotalsSQL = `SELECT (SELECT count(*) FROM users), (SELECT count(*) FROM apps),
		(SELECT count(*) FROM events WHERE NOT dead), (SELECT count(*) FROM events WHERE dead),
		(SELECT count(*) FROM code), (SELECT count(*) FROM secrets), (SELECT count(*) FROM devices)`
)

func countSQLite(ctx context.Context, tx *sql.Tx) (migrateCounts, error) {
	// SQLite keeps booleans as 0/1.
	q := strings.NewReplacer("NOT d.deleted", "d.deleted = 0", "NOT dead", "dead = 0", "WHERE dead", "WHERE dead <> 0")
	mc := migrateCounts{Revisions: map[string]int64{}, LiveDocs: map[string]int64{}}
	if err := tx.QueryRowContext(ctx, q.Replace(countTotalsSQL)).Scan(&mc.Users, &mc.Apps, &mc.Events, &mc.DeadEvents,
		&mc.CodeVersions, &mc.Secrets, &mc.Devices); err != nil {
		return mc, err
	}
	rows, err := tx.QueryContext(ctx, q.Replace(countRevisionsSQL))
	if err != nil {
		return mc, err
	}
	defer rows.Close()
	for rows.Next() {
		var app string
		var revs, live int64
		if err := rows.Scan(&app, &revs, &live); err != nil {
			return mc, err
		}
		mc.Revisions[app], mc.LiveDocs[app] = revs, live
	}
	return mc, rows.Err()
}

func countPostgres(ctx context.Context, conn *pgx.Conn) (migrateCounts, error) {
	mc := migrateCounts{Revisions: map[string]int64{}, LiveDocs: map[string]int64{}}
	if err := conn.QueryRow(ctx, countTotalsSQL).Scan(&mc.Users, &mc.Apps, &mc.Events, &mc.DeadEvents,
		&mc.CodeVersions, &mc.Secrets, &mc.Devices); err != nil {
		return mc, err
	}
	rows, err := conn.Query(ctx, countRevisionsSQL)
	if err != nil {
		return mc, err
	}
	defer rows.Close()
	for rows.Next() {
		var app string
		var revs, live int64
		if err := rows.Scan(&app, &revs, &live); err != nil {
			return mc, err
		}
		mc.Revisions[app], mc.LiveDocs[app] = revs, live
	}
	return mc, rows.Err()
}
