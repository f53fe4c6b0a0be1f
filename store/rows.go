package store

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
