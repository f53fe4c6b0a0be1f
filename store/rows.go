package store

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Helpers both drivers share: the same rule written once, so the stores
// cannot drift apart on it.

// SameGrants reports whether a and b hold the same grants, in any order:
// a write whose grants did not change touches no grant rows.
func SameGrants(a, b []Grant) bool {
	if len(a) != len(b) {
		return false
	}
	seen := make(map[Grant]int, len(a))
	for _, g := range a {
		seen[g]++
	}
	for _, g := range b {
		if seen[g] == 0 {
			return false
		}
		seen[g]--
	}
	return true
}

// Rows is what the drivers' query results have in common (database/sql's
// *Rows and pgx's Rows).
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ScanFiles reads rows of (path, data) into a map of static files; nil
// when there are none. A file stored empty comes back empty, not nil.
func ScanFiles(rows Rows) (map[string][]byte, error) {
	var out map[string][]byte
	for rows.Next() {
		var p string
		var data []byte
		if err := rows.Scan(&p, &data); err != nil {
			return nil, err
		}
		if out == nil {
			out = map[string][]byte{}
		}
		if data == nil {
			data = []byte{}
		}
		out[p] = data
	}
	return out, rows.Err()
}

// Row is one row of a query result of either driver.
type Row interface {
	Scan(dest ...any) error
}

// UserCols are the columns of users that UserArgs gives and ScanUser
// reads, in their order; both drivers use the same names for them.
const UserCols = "name, admin, created, app, password_hash"

// UserArgs are u's values for UserCols.
func UserArgs(u User) []any {
	return []any{u.Name, u.Admin, u.Created.UnixNano(), u.App, u.PasswordHash}
}

// ScanUser reads a row of UserCols.
func ScanUser(row Row) (*User, error) {
	var u User
	var t int64
	if err := row.Scan(&u.Name, &u.Admin, &t, &u.App, &u.PasswordHash); err != nil {
		return nil, err
	}
	u.Created = time.Unix(0, t)
	return &u, nil
}

// FieldIndexName names an index over a document field: a hash of the
// field keeps the name short and a valid identifier whatever the field.
func FieldIndexName(prefix, field string) string {
	h := sha256.Sum256([]byte(field))
	return prefix + hex.EncodeToString(h[:8])
}

// DecodeKey decodes a query key or a range bound (JSON), numbers as
// json.Number so that no digit is lost before the database compares them.
func DecodeKey(key []byte) (any, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(key))
	dec.UseNumber()
	err := dec.Decode(&v)
	return v, err
}

// Bounds of a driver's cache of document heads. HeadCacheBytes keeps the
// memory far below a whole database's; a body over HeadCacheBodyMax is
// not cached, as it would crowd out many small ones.
const (
	HeadCacheBytes   = 32 << 20
	HeadCacheBodyMax = 64 << 10
)

// DocKey names one document across apps: what the drivers' caches of
// heads are keyed by.
type DocKey struct {
	App    int64
	DB, ID string
}

// EventCols is the select list of an event as both drivers scan it: e is
// the events row, r its revision and o the revision before; writer names
// r's three writer columns, which the drivers name differently.
func EventCols(writer string) string {
	return `e.seq, e.depth, e.origin, e.attempts, e.next_at, e.dead, e.last_error, e.running,
	r.db, r.id, r.rev, r.deleted, r.body, r.time, ` + writer + `, r.path, r.channels,
	o.seq, o.rev, o.deleted, o.body`
}
