package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/handoff-run/handoff/store"
)

// Range queries cannot use the equality index: jsonb orders strings
// before numbers and by the database's collation, where ranges promise
// numbers first and strings by their bytes, as SQLite does. So a field
// queried by range gets a second index, created the first time, on
//
//	(app_id, db, rank, num, skey, id) WHERE rank IS NOT NULL
//
// where rank is 1 for a number and 2 for a string (NULL for anything
// else), num is a number's value (0 for strings) and skey the first
// rangeKeyChars characters of a string ("" for numbers) in the "C"
// collation: a btree entry must stay small, and a document with a long
// string must still commit. The index finds the range and orders it by
// (rank, num, skey); the query then orders ties of skey by the whole
// string, which the index cannot hold, and by id. A string's prefix sorts
// the same as the string against any other string with another prefix,
// so the result is in exact (value, id) order.

const rangeKeyChars = 128

func rangeIndexName(field string) string {
	return store.FieldIndexName("docs_range_", field)
}

// rangeExprs are the rank, num, skey and full string expressions of a
// field; the index and the queries use the same text, so that
// PostgreSQL matches them.
type rangeExprs struct{ rank, num, skey, str string }

func rangeExprsOf(field string) (rangeExprs, error) {
	e, err := fieldExpr("body", field)
	if err != nil {
		return rangeExprs{}, err
	}
	str := `(CASE WHEN jsonb_typeof(` + e + `) = 'string' THEN ` + e + ` #>> '{}' ELSE '' END)`
	return rangeExprs{
		rank: `(CASE jsonb_typeof(` + e + `) WHEN 'number' THEN 1 WHEN 'string' THEN 2 END)`,
		num:  `(CASE WHEN jsonb_typeof(` + e + `) = 'number' THEN (` + e + `)::numeric ELSE 0 END)`,
		skey: `(left(` + str + `, ` + strconv.Itoa(rangeKeyChars) + `) COLLATE "C")`,
		str:  `(` + str + ` COLLATE "C")`,
	}, nil
}

func (s *Store) ensureRangeIndex(ctx context.Context, field string, x rangeExprs) error {
	return s.buildIndex(ctx, rangeIndexName(field), "range of field "+field,
		fmt.Sprintf(`(app_id, db, %s, %s, %s, id) WHERE %s IS NOT NULL`, x.rank, x.num, x.skey, x.rank))
}

// rangeBound is a bound's rank, num and string, as the index sees them.
type rangeBound struct {
	rank int
	num  string
	str  string
}

func parseBound(key []byte) (rangeBound, error) {
	v, err := store.DecodeKey(key)
	if err != nil {
		return rangeBound{}, fmt.Errorf("range bound is not JSON: %w", err)
	}
	switch x := v.(type) {
	case json.Number:
		return rangeBound{rank: 1, num: x.String()}, nil
	case string:
		return rangeBound{rank: 2, num: "0", str: x}, nil
	}
	return rangeBound{}, fmt.Errorf("range bound %s is neither a number nor a string", key)
}

// rangeSQL builds a range query. Each bound is two conditions: a row
// comparison on the index's columns, which PostgreSQL searches the index
// by, and the exact one on the whole string.
func rangeSQL(x rangeExprs, q store.Query) (string, []any, error) {
	where := []string{"app_id = $1", "db = $2", x.rank + " IS NOT NULL"}
	args := []any{q.AppID, q.DB}
	param := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	idx := "(" + x.rank + ", " + x.num + ", " + x.skey + ")"
	full := "(" + x.rank + ", " + x.num + ", " + x.str
	add := func(key []byte, coarse, exact string, id *string) error {
		b, err := parseBound(key)
		if err != nil {
			return err
		}
		r, n, s := param(b.rank), param(b.num)+"::text", param(b.str)+"::text"
		where = append(where, fmt.Sprintf("%s %s (%s, %s::numeric, left(%s, %d))", idx, coarse, r, n, s, rangeKeyChars))
		if id != nil {
			where = append(where, fmt.Sprintf("%s, id) %s (%s, %s::numeric, %s, %s)", full, exact, r, n, s, param(*id)))
		} else {
			where = append(where, fmt.Sprintf("%s) %s (%s, %s::numeric, %s)", full, exact, r, n, s))
		}
		return nil
	}
	if q.Range.From != nil {
		if err := add(q.Range.From, ">=", ">=", nil); err != nil {
			return "", nil, err
		}
	}
	if q.Range.To != nil {
		if err := add(q.Range.To, "<=", "<", nil); err != nil {
			return "", nil, err
		}
	}
	if q.AfterKey != nil {
		if err := add(q.AfterKey, ">=", ">", &q.After); err != nil {
			return "", nil, err
		}
	}
	sq := `SELECT id, rev, body_text, seq, time, channels FROM docs WHERE ` + strings.Join(where, " AND ") +
		` ORDER BY ` + x.rank + `, ` + x.num + `, ` + x.skey + `, ` + x.str + `, id LIMIT ` + param(limit(q.Limit))
	return sq, args, nil
}

func (s *Store) queryRange(ctx context.Context, q store.Query) ([]store.Doc, error) {
	x, err := rangeExprsOf(q.Field)
	if err != nil {
		return nil, err
	}
	sq, args, err := rangeSQL(x, q)
	if err != nil {
		return nil, err
	}
	if err := s.ensureRangeIndex(ctx, q.Field, x); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sq, args...)
	return scanDocs(q.DB, rows, err)
}
