package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/handoff-run/handoff/store"
)

// TestTrustedHeadsThatMoved: a node that knows a head because it committed
// it writes over it in one round trip; when another node has moved that
// head since, or created a document it expected absent, the write is
// checked against the head as it is, and grants and their counts follow
// the head in force.
func TestTrustedHeadsThatMoved(t *testing.T) {
	t.Parallel()
	a, b := twoNodes(t)
	ctx := context.Background()
	app := newApp(t, a, "jobs")
	commit := func(st *Store, w *store.Write) error {
		t.Helper()
		_, err := st.Commit(ctx, w)
		return err
	}
	granted := func(w *store.Write, who string) *store.Write {
		w.Grants = []store.Grant{{Kind: "user", Principal: who, Channel: "c"}}
		return w
	}
	if err := commit(a, granted(doc(app, "x", "", "1-a", `{"n":1}`), "u1")); err != nil {
		t.Fatal(err)
	}
	if err := commit(a, granted(doc(app, "x", "1-a", "2-a", `{"n":2}`), "u1")); err != nil {
		t.Fatal(err)
	}
	trusted := a.trustedCommits.Load()
	if trusted == 0 {
		t.Fatal("no commit trusted the heads this node committed")
	}
	// B moves x, and gives its grant to u2.
	if err := commit(b, granted(doc(app, "x", "2-a", "3-b", `{"n":3}`), "u2")); err != nil {
		t.Fatal(err)
	}
	// A still knows x at 2-a: its write on that base is refused...
	if err := commit(a, doc(app, "x", "2-a", "3-a", `{"n":"stale"}`)); !errors.Is(err, store.ErrHeadMoved) {
		t.Fatalf("write on a head another node moved: %v, want ErrHeadMoved", err)
	}
	// ...and one on B's head is taken, its grants replacing B's.
	if err := commit(b, granted(doc(app, "x", "3-b", "4-b", `{"n":4}`), "u2")); err != nil {
		t.Fatal(err)
	}
	if err := commit(a, granted(doc(app, "x", "4-b", "5-a", `{"n":5}`), "u3")); err != nil {
		t.Fatal(err)
	}
	// B creates y, which A then creates as if absent.
	if err := commit(b, granted(doc(app, "y", "", "1-b", `{}`), "u4")); err != nil {
		t.Fatal(err)
	}
	if err := commit(a, granted(doc(app, "y", "", "1-a", `{}`), "u5")); !errors.Is(err, store.ErrHeadMoved) {
		t.Fatalf("create of a document another node created: %v, want ErrHeadMoved", err)
	}
	// One batch with a head A knows (x) and one it does not (z, B's): it
	// reads both, and x's grants are counted once, as the database has
	// them: its grant to u3 stays.
	if err := commit(b, granted(doc(app, "z", "", "1-b", `{}`), "u6")); err != nil {
		t.Fatal(err)
	}
	x := granted(doc(app, "x", "5-a", "6-a", `{"n":6}`), "u3")
	x.Grants = append(x.Grants, store.Grant{Kind: "user", Principal: "u7", Channel: "c"})
	for _, p := range inOneBatch(t, a, "blk", x,
		granted(doc(app, "z", "1-b", "2-a", `{}`), "u8")) {
		if p.err != nil {
			t.Fatalf("%s: %v", p.w.ID, p.err)
		}
	}
	counts := grantCounts(t, a, app)
	if got, want := fmt.Sprint(counts), fmt.Sprint(map[string]int{"user:u3:c": 1, "user:u4:c": 1, "user:u7:c": 1, "user:u8:c": 1}); got != want {
		t.Fatalf("grant_counts = %s, want %s", got, want)
	}
}
