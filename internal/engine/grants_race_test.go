package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsapp"
	"github.com/handoff-run/handoff/store/sqlite"
)

// A commit that revokes a grant must drop the cached permissions before
// anyone hears of the commit: a follower woken by it reads right away, on
// another goroutine, before the revoking write has even returned. The
// check runs inside the store's commit notification, where a follower
// would be woken.
func TestRevokedGrantIsGoneWhenTheCommitIsAnnounced(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := engine.New(st, engine.Options{Code: jsapp.New(jsapp.Options{})})
	tok, _ := e.Bootstrap(ctx, "")
	admin, _ := e.Authenticate(ctx, tok)
	for _, u := range []string{"alice", "bob"} {
		if _, err := e.AddUser(ctx, admin, u); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.CreateApp(ctx, admin, "alice/app", false); err != nil {
		t.Fatal(err)
	}
	// A CPU budget, not the subject: -race beside parallel tests is slow.
	if err := e.SetAccessTimeout(ctx, admin, "alice/app", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	const code = `export default function (doc) {
		if (doc.kind === "grant") return { grant: { users: { bob: doc.channels } } };
		return { channels: [doc.channel] };
	}`
	if _, err := e.Deploy(ctx, admin, "alice/app", code, ""); err != nil {
		t.Fatal(err)
	}
	alice, bob := engine.Actor{User: "alice"}, engine.Actor{User: "bob"}
	g, err := e.Put(ctx, alice, "alice/app", "d", "g", []byte(`{"kind":"grant","channels":["c"]}`), appcode.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Put(ctx, alice, "alice/app", "d", "doc", []byte(`{"channel":"c"}`), appcode.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Get(ctx, bob, "alice/app", "d", "doc"); err != nil {
		t.Fatalf("bob, granted c, cannot read: %v", err) // and his permissions are now cached
	}

	var armed atomic.Bool
	seen := make(chan error, 1)
	st.Watch(func(appID, seq int64) {
		if armed.CompareAndSwap(true, false) {
			_, err := e.Get(ctx, bob, "alice/app", "d", "doc")
			seen <- err
		}
	})
	armed.Store(true)
	if _, err := e.Put(ctx, alice, "alice/app", "d", "g", []byte(`{"kind":"grant","channels":[]}`), appcode.PutOptions{IfRev: g.Rev}); err != nil {
		t.Fatal(err)
	}
	if err := <-seen; !errs.Is(err, errs.Forbidden) {
		t.Fatalf("when the revoke was announced, bob's read gave %v; want forbidden", err)
	}
}
