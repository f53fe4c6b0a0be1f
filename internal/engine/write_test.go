package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/appcode/appcodetest"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/sqlite"
)

// hintingStore gives the true head as a hint, and can report a commit
// failed after applying it, as a store does when the connection drops
// after COMMIT was sent.
type hintingStore struct {
	*sqlite.Store
	failAfterCommit atomic.Bool
}

func (h *hintingStore) HeadHint(appID int64, db, id string) *store.Doc {
	d, _ := h.Store.Get(context.Background(), appID, db, id)
	return d
}

func (h *hintingStore) Commit(ctx context.Context, w *store.Write) (int64, error) {
	seq, err := h.Store.Commit(ctx, w)
	if err == nil && h.failAfterCommit.CompareAndSwap(true, false) {
		return 0, errors.New("connection lost after COMMIT")
	}
	return seq, err
}

// TestHintedWriteNotRetriedAfterCommitError: a write decided on a hint
// whose commit reports an error is not tried again, though the head has
// moved (by that very commit, perhaps): its outcome is unknown, and
// trying again could apply it twice.
func TestHintedWriteNotRetriedAfterCommitError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sq, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	st := &hintingStore{Store: sq}
	e := engine.New(st, engine.Options{Clock: clock.NewVirtual(time.Date(2026, 9, 24, 12, 0, 0, 0, time.UTC)),
		Code: appcodetest.Compiler{B: &appcodetest.Backend{}}})
	t.Cleanup(e.Close)
	tok, _ := e.Bootstrap(ctx, "")
	admin, _ := e.Authenticate(ctx, tok)
	e.AddUser(ctx, admin, "alice")
	if _, err := e.CreateApp(ctx, admin, "alice/app", false); err != nil {
		t.Fatal(err)
	}
	alice := engine.Actor{User: "alice"}
	if _, err := e.Put(ctx, alice, "alice/app", "d", "x", []byte(`{"n":1}`), appcode.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	st.failAfterCommit.Store(true)
	if _, err := e.Put(ctx, alice, "alice/app", "d", "x", []byte(`{"n":2}`), appcode.PutOptions{}); errs.CodeOf(err) != errs.Internal {
		t.Fatalf("put whose commit failed = %v, want an internal error", err)
	}
	hist, err := e.History(ctx, alice, "alice/app", "d", "x")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 2 {
		t.Fatalf("history has %d revisions, want 2 (the failed commit applied once): %+v", len(hist), hist)
	}
}

// failingGets is a store whose reads fail with text only the server's
// log may see.
type failingGets struct{ store.Store }

func (failingGets) Get(context.Context, int64, string, string) (*store.Doc, error) {
	return nil, errors.New(`ERROR: relation "docs" does not exist (SELECT body_text FROM docs)`)
}

// TestStorageFailuresKeepTheirTextForTheLog: a storage failure reaches
// callers (HTTP clients, app handlers) as internal with words of its own;
// the storage error's text is only its Detail.
func TestStorageFailuresKeepTheirTextForTheLog(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := sqlite.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	e := engine.New(failingGets{st}, engine.Options{})
	admin := engine.Actor{User: engine.AdminUser, Admin: true}
	if _, err := e.Bootstrap(ctx, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.CreateApp(ctx, admin, "admin/app", false); err != nil {
		t.Fatal(err)
	}
	_, err = e.Get(ctx, admin, "admin/app", "jobs", "x")
	var ee *errs.Error
	if !errors.As(err, &ee) || ee.Code != errs.Internal || strings.Contains(ee.Message, "SELECT") || !strings.Contains(ee.Detail, "SELECT body_text") {
		t.Fatalf("Get over a failing store = %#v", err)
	}
}
