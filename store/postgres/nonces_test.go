package postgres

import (
	"context"
	"testing"
	"time"
)

// TestUseNonce: a token is fresh once until it expires, on any node, and
// expired ones are swept away.
func TestUseNonce(t *testing.T) {
	t.Parallel()
	url := freshDB(t)
	ctx := context.Background()
	a, b := openAt(t, url), openAt(t, url)
	t.Cleanup(func() { a.Close(); b.Close() })
	t0 := time.Unix(1_800_000_000, 0)
	use := func(st *Store, key string, now time.Time) bool {
		t.Helper()
		fresh, err := st.UseNonce(ctx, key, now, now.Add(2*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		return fresh
	}
	if !use(a, "k1", t0) {
		t.Fatal("a new token is not fresh")
	}
	if use(b, "k1", t0.Add(time.Second)) || use(a, "k1", t0.Add(time.Minute)) {
		t.Fatal("a used token is fresh again before it expired")
	}
	if !use(b, "k1", t0.Add(3*time.Minute)) {
		t.Fatal("an expired token is not fresh")
	}
	use(a, "k2", t0.Add(3*time.Minute))
	// A sweep, a minute or more after the last, drops what has expired.
	use(a, "k3", t0.Add(10*time.Minute))
	var n int
	if err := a.pool.QueryRow(ctx, `SELECT count(*) FROM nonces`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d nonces left after the sweep, want only k3", n)
	}
}
