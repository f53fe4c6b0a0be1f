package engine_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/sqlite"
)

// pausedMembers is a store whose Members, once armed, stops after reading
// until released: a load of the app caught between its read and caching.
type pausedMembers struct {
	store.Store
	armed   atomic.Bool
	read    chan struct{}
	release chan struct{}
}

func (s *pausedMembers) Members(ctx context.Context, appID int64) ([]store.Member, error) {
	m, err := s.Store.Members(ctx, appID)
	if s.armed.CompareAndSwap(true, false) {
		close(s.read)
		<-s.release
	}
	return m, err
}

// A load of an app that read the members before a change must not cache
// what it read once the change dropped the cache: the removed member
// would keep his access until the next change.
func TestLoadBeforeAChangeIsNotCached(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	raw, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	st := &pausedMembers{Store: raw, read: make(chan struct{}), release: make(chan struct{})}
	e := engine.New(st, engine.Options{})
	tok, _ := e.Bootstrap(ctx, "")
	admin, _ := e.Authenticate(ctx, tok)
	for _, u := range []string{"alice", "bob"} {
		if _, err := e.AddUser(ctx, admin, u); err != nil {
			t.Fatal(err)
		}
	}
	alice, bob := engine.Actor{User: "alice"}, engine.Actor{User: "bob"}
	if _, err := e.CreateApp(ctx, admin, "alice/app", false); err != nil {
		t.Fatal(err)
	}
	if err := e.AddMember(ctx, alice, "alice/app", "bob", engine.RoleEditor); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Put(ctx, alice, "alice/app", "d", "doc", []byte(`{}`), appcode.PutOptions{}); err != nil {
		t.Fatal(err)
	}

	if err := e.SetPublic(ctx, alice, "alice/app", false); err != nil {
		t.Fatal(err) // drops the cached app
	}

	// bob's read loads the app and pauses having read him as a member.
	st.armed.Store(true)
	first := make(chan error, 1)
	go func() {
		_, err := e.Get(ctx, bob, "alice/app", "d", "doc")
		first <- err
	}()
	<-st.read
	if err := e.RemoveMember(ctx, alice, "alice/app", "bob", ""); err != nil {
		t.Fatal(err)
	}
	close(st.release)
	if err := <-first; err != nil {
		t.Fatalf("bob's read that began before his removal: %v", err)
	}
	if _, err := e.Get(ctx, bob, "alice/app", "d", "doc"); !errs.Is(err, errs.Forbidden) {
		t.Fatalf("bob reads after his removal: %v; want forbidden", err)
	}
}
