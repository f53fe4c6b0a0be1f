package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/handoff-run/handoff/store"
)

// Field queries use SQLite expression indexes on json_extract, one per
// queried field, created the first time the field is queried. The query
// must repeat the index's expression exactly for SQLite to use it, so both
// come from jsonPath.

// jsonPath turns "a.b" into the SQL literal '$."a"."b"'. Fields are
// validated by the engine (letters, digits, '_' and '-'), so embedding
// them in SQL is safe.
func jsonPath(field string) string {
	parts := strings.Split(field, ".")
	return `'$."` + strings.Join(parts, `"."`) + `"'`
}

func indexName(field string) string {
	return store.FieldIndexName("docs_field_", field)
}

func (s *Store) loadIndexes() error {
	rows, err := s.wdb.Query(`SELECT sql FROM sqlite_master WHERE type = 'index' AND name LIKE 'docs_field_%'`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			return err
		}
		// The field is recorded in the index's SQL between the markers.
		if _, rest, ok := strings.Cut(q, "/*field:"); ok {
			if f, _, ok := strings.Cut(rest, "*/"); ok {
				s.indexes.Store(f, struct{}{})
			}
		}
	}
	return rows.Err()
}

func (s *Store) ensureIndex(ctx context.Context, field string) error {
	if _, ok := s.indexes.Load(field); ok {
		return nil
	}
	q := fmt.Sprintf(`CREATE INDEX IF NOT EXISTS %s /*field:%s*/ ON docs (app_id, db, json_extract(body, %s), id)`,
		indexName(field), field, jsonPath(field))
	if _, err := s.wdb.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("create index for field %q: %w", field, err)
	}
	s.indexes.Store(field, struct{}{})
	return nil
}

func (s *Store) Query(ctx context.Context, q store.Query) ([]store.Doc, error) {
	if err := s.ensureIndex(ctx, q.Field); err != nil {
		return nil, err
	}
	path := jsonPath(q.Field)
	if q.Range != nil {
		return s.queryRange(ctx, q, path)
	}
	val, types, err := keyValue(q.Key)
	if err != nil {
		return nil, err
	}
	var sqlq string
	args := []any{q.AppID, q.DB}
	if val == nil {
		// null is not indexable by equality; a rare query, answered by scan.
		sqlq = `SELECT id, rev, body, seq, time, channels FROM docs WHERE app_id = ? AND db = ? AND deleted = 0
			AND json_type(body, ` + path + `) = 'null' AND id > ? ORDER BY id LIMIT ?`
	} else {
		sqlq = `SELECT id, rev, body, seq, time, channels FROM docs WHERE app_id = ? AND db = ?
			AND json_extract(body, ` + path + `) = ? AND json_type(body, ` + path + `) IN (` + types + `)
			AND id > ? ORDER BY id LIMIT ?`
		args = append(args, val)
	}
	args = append(args, q.After, q.Limit)
	rows, err := s.rdb.QueryContext(ctx, sqlq, args...)
	return scanDocs(q.DB, rows, err)
}

// queryRange walks the field's index from the range's lower end (or the
// page's last value and id) in (value, id) order. json_extract yields
// booleans as 0 and 1 and objects and arrays as text, so json_type keeps
// only numbers and strings; SQLite orders every number before every
// string, and strings by their bytes, which is the order ranges promise.
func (s *Store) queryRange(ctx context.Context, q store.Query, path string) ([]store.Doc, error) {
	ex := "json_extract(body, " + path + ")"
	where := []string{"app_id = ?", "db = ?", "json_type(body, " + path + ") IN ('integer','real','text')"}
	args := []any{q.AppID, q.DB}
	bound := func(cond string, key []byte, more ...any) error {
		v, err := rangeValue(key)
		if err != nil {
			return err
		}
		where = append(where, cond)
		args = append(args, v)
		args = append(args, more...)
		return nil
	}
	if q.Range.From != nil {
		if err := bound(ex+" >= ?", q.Range.From); err != nil {
			return nil, err
		}
	} else {
		// Below every number (SQLite reads -9e999 as minus infinity) and
		// above the NULLs of documents without the field, which the
		// index would otherwise walk past.
		where = append(where, ex+" >= -9e999")
	}
	if q.Range.To != nil {
		if err := bound(ex+" < ?", q.Range.To); err != nil {
			return nil, err
		}
	}
	if q.AfterKey != nil {
		if err := bound("("+ex+", id) > (?, ?)", q.AfterKey, q.After); err != nil {
			return nil, err
		}
	}
	sqlq := `SELECT id, rev, body, seq, time, channels FROM docs WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY ` + ex + `, id LIMIT ?`
	args = append(args, q.Limit)
	rows, err := s.rdb.QueryContext(ctx, sqlq, args...)
	return scanDocs(q.DB, rows, err)
}

// rangeValue is keyValue for a range's bound, which is a number or a
// string.
func rangeValue(key []byte) (any, error) {
	v, types, err := keyValue(key)
	if err == nil && types != `'text'` && types != `'integer','real'` {
		err = fmt.Errorf("range bound %s is neither a number nor a string", key)
	}
	return v, err
}

// keyValue maps a JSON key to the SQL value json_extract yields for it and
// the json_type names that may match, so that true never matches 1 and
// "1" never matches 1.
func keyValue(key []byte) (any, string, error) {
	v, err := store.DecodeKey(key)
	if err != nil {
		return nil, "", fmt.Errorf("query key is not JSON: %w", err)
	}
	switch x := v.(type) {
	case nil:
		return nil, "", nil
	case string:
		return x, `'text'`, nil
	case bool:
		if x {
			return 1, `'true'`, nil
		}
		return 0, `'false'`, nil
	case json.Number:
		if i, err := x.Int64(); err == nil {
			return i, `'integer','real'`, nil
		}
		f, err := x.Float64()
		if err != nil {
			return nil, "", fmt.Errorf("query key %s is out of range", x)
		}
		return f, `'integer','real'`, nil
	default:
		var b bytes.Buffer
		if err := json.Compact(&b, key); err != nil {
			return nil, "", err
		}
		return b.String(), `'object','array'`, nil
	}
}

func (s *Store) Transitions(ctx context.Context, appID int64, db, field string) ([]store.Transition, error) {
	path := jsonPath(field)
	rows, err := s.rdb.QueryContext(ctx, `SELECT CASE WHEN o.seq IS NULL THEN '' ELSE json_quote(json_extract(o.body, `+path+`)) END,
			json_quote(json_extract(r.body, `+path+`)), count(*)
		FROM revisions r LEFT JOIN revisions o ON o.app_id = r.app_id AND o.seq = r.prev_seq AND r.prev_seq > 0 AND o.deleted = 0
		WHERE r.app_id = ? AND r.db = ? AND r.deleted = 0
		GROUP BY 1, 2 ORDER BY 3 DESC`, appID, db)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []store.Transition
	for rows.Next() {
		var t store.Transition
		if err := rows.Scan(&t.From, &t.To, &t.Count); err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}
