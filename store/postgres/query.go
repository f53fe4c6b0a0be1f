package postgres

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/handoff-run/handoff/store"
)

// Field queries use one expression index per queried field, created the
// first time the field is queried:
//
//	(app_id, db, handoff_field_key(body -> 'a' -> 'b'), id) WHERE ... IS NOT NULL
//
// so a query finds its matches by equality and reads them in id order:
// its cost does not grow with the database. body is jsonb, whose equality
// is JSON's: a string never equals a number, true never equals 1, and 1
// equals 1.0. The text operator -> reads object members only, never array
// elements, like SQLite's '$."a"."b"'. handoff_field_key (schema.go) keeps
// oversized values out of the btree; the query compares the value itself
// as well.

// fieldExpr turns "a.b" into body -> 'a' -> 'b' on the given column.
// Fields are validated by the engine (letters, digits, '_', '-' and dots);
// anything else is refused here too, since the field is embedded in SQL.
func fieldExpr(col, field string) (string, error) {
	if field == "" || strings.HasPrefix(field, ".") || strings.HasSuffix(field, ".") || strings.Contains(field, "..") {
		return "", fmt.Errorf("field %q is not a dotted path of names", field)
	}
	for _, c := range field {
		if !(c == '.' || c == '_' || c == '-' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return "", fmt.Errorf("field %q is not a dotted path of names", field)
		}
	}
	return col + " -> '" + strings.ReplaceAll(field, ".", "' -> '") + "'", nil
}

func indexName(field string) string {
	return store.FieldIndexName("docs_field_", field)
}

// loadIndexes learns the valid field indexes that exist, so queries of
// those fields do not ask again.
func (s *Store) loadIndexes(ctx context.Context) error {
	rows, err := s.pool.Query(ctx, `SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = 'docs'::regclass AND i.indisvalid
		AND (c.relname LIKE 'docs\_field\_%' OR c.relname LIKE 'docs\_range\_%')`)
	if err != nil {
		return err
	}
	names, err := collect(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, n := range names {
		s.indexes.Store(n, struct{}{})
	}
	return nil
}

// ensureIndex creates the field's equality index unless it exists.
func (s *Store) ensureIndex(ctx context.Context, field string) error {
	expr, err := fieldExpr("body", field)
	if err != nil {
		return err
	}
	key := "handoff_field_key(" + expr + ")"
	return s.buildIndex(ctx, indexName(field), "field "+field,
		fmt.Sprintf(`(app_id, db, (%s), id) WHERE %s IS NOT NULL`, key, key))
}

// buildIndex creates index name on docs with def (its columns and
// predicate) unless it exists. It is built CONCURRENTLY, so writes go on
// while it is built, under an advisory lock, so that nodes asking at
// once build it once; a build that was cut off leaves an invalid index,
// which is dropped and built again. comment names it for people.
func (s *Store) buildIndex(ctx context.Context, name, comment, def string) error {
	if _, ok := s.indexes.Load(name); ok {
		return nil
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	h := sha256.Sum256([]byte("handoff index " + name))
	lock := int64(binary.BigEndian.Uint64(h[:8]))
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, lock); err != nil {
		return err
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, lock)
	var valid bool
	err = conn.QueryRow(ctx, `SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass($1)`, name).Scan(&valid)
	switch {
	case err == nil && valid:
		s.indexes.Store(name, struct{}{})
		return nil
	case err == nil:
		if _, err := conn.Exec(ctx, `DROP INDEX CONCURRENTLY IF EXISTS `+name); err != nil {
			return fmt.Errorf("drop the broken index of %s: %w", comment, err)
		}
	case !noRows(err):
		return err
	}
	if _, err := conn.Exec(ctx, `CREATE INDEX CONCURRENTLY IF NOT EXISTS `+name+` ON docs `+def); err != nil {
		return fmt.Errorf("create the index of %s: %w", comment, err)
	}
	if _, err := conn.Exec(ctx, `COMMENT ON INDEX `+name+` IS `+quoteLiteral(comment)); err != nil {
		return err
	}
	s.indexes.Store(name, struct{}{})
	return nil
}

func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// querySQL is the field query; its key expression repeats the index's
// exactly, so that PostgreSQL uses the index.
func querySQL(field string) (string, error) {
	expr, err := fieldExpr("body", field)
	if err != nil {
		return "", err
	}
	return `SELECT id, rev, body_text, seq, time, channels FROM docs
		WHERE app_id = $1 AND db = $2 AND handoff_field_key(` + expr + `) = handoff_field_key($3::jsonb)
		AND ` + expr + ` = $3::jsonb AND id > $4 ORDER BY id LIMIT $5`, nil
}

func (s *Store) Query(ctx context.Context, q store.Query) ([]store.Doc, error) {
	if q.Range == nil && !json.Valid(q.Key) {
		return nil, fmt.Errorf("query key is not JSON: %s", q.Key)
	}
	if q.Range != nil {
		return s.queryRange(ctx, q)
	}
	if err := s.ensureIndex(ctx, q.Field); err != nil {
		return nil, err
	}
	sq, err := querySQL(q.Field)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sq, q.AppID, q.DB, jsonbText(q.Key), q.After, limit(q.Limit))
	return scanDocs(q.DB, rows, err)
}

// Transitions reads the field from the ledger's JSON text (the json type
// keeps it as written), so From and To are the value's JSON text as the
// engine wrote it; a missing field reads as null.
func (s *Store) Transitions(ctx context.Context, appID int64, db, field string) ([]store.Transition, error) {
	from, err := fieldExpr("o.body::json", field)
	if err != nil {
		return nil, err
	}
	to, _ := fieldExpr("r.body::json", field)
	rows, err := s.pool.Query(ctx, `SELECT CASE WHEN o.seq IS NULL THEN '' ELSE coalesce((`+from+`)::text, 'null') END,
			coalesce((`+to+`)::text, 'null'), count(*)
		FROM revisions r LEFT JOIN revisions o ON o.app_id = r.app_id AND o.seq = r.prev_seq AND r.prev_seq > 0 AND NOT o.deleted
		WHERE r.app_id = $1 AND r.db = $2 AND NOT r.deleted
		GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2`, appID, db)
	if err != nil {
		return nil, err
	}
	ts, err := collect(rows, func(row pgx.CollectableRow) (store.Transition, error) {
		var t store.Transition
		err := row.Scan(&t.From, &t.To, &t.Count)
		return t, err
	})
	if strings.HasPrefix(pgCode(err), "22") {
		// PostgreSQL's json operators refuse a body with \u0000 or half a
		// surrogate pair anywhere in it, which documents written before
		// such values were refused may hold: count those in Go.
		return s.transitionsInGo(ctx, appID, db, field)
	}
	return ts, err
}

// transitionsInGo is Transitions read revision by revision: the same
// answer, in the same order, for any JSON text.
func (s *Store) transitionsInGo(ctx context.Context, appID int64, db, field string) ([]store.Transition, error) {
	rows, err := s.pool.Query(ctx, `SELECT o.seq IS NOT NULL, o.body, r.body
		FROM revisions r LEFT JOIN revisions o ON o.app_id = r.app_id AND o.seq = r.prev_seq AND r.prev_seq > 0 AND NOT o.deleted
		WHERE r.app_id = $1 AND r.db = $2 AND NOT r.deleted`, appID, db)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	path := strings.Split(field, ".")
	counts := map[[2]string]int64{}
	for rows.Next() {
		var hasOld bool
		var old, cur *string
		if err := rows.Scan(&hasOld, &old, &cur); err != nil {
			return nil, err
		}
		var k [2]string
		if hasOld {
			k[0] = jsonField(old, path)
		}
		k[1] = jsonField(cur, path)
		counts[k]++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	ts := make([]store.Transition, 0, len(counts))
	for k, n := range counts {
		ts = append(ts, store.Transition{From: k[0], To: k[1], Count: n})
	}
	slices.SortFunc(ts, func(a, b store.Transition) int {
		if c := cmp.Compare(b.Count, a.Count); c != 0 {
			return c
		}
		return cmp.Or(strings.Compare(a.From, b.From), strings.Compare(a.To, b.To))
	})
	return ts, nil
}

// jsonField is (body::json -> path...)::text, or "null" where the path
// ends: the member's JSON text as written, the last of a repeated key.
func jsonField(body *string, path []string) string {
	if body == nil {
		return "null"
	}
	v := json.RawMessage(*body)
	for _, name := range path {
		var m map[string]json.RawMessage
		if json.Unmarshal(v, &m) != nil || m[name] == nil {
			return "null"
		}
		v = m[name]
	}
	return string(v)
}
