package sim

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/handoff-run/handoff/store"
)

// Store is the real store with a hook on commits (OnCommit) and a way to
// wait for the ops it queued without waiting (Flush). Every call is
// forwarded unchanged.
type Store struct {
	store.Store

	beforeCommit atomic.Pointer[func(*store.Write)]

	flushMu  sync.Mutex
	flushApp int64 // the harness's own app; Flush writes there
	flushN   int   // revisions of the flush document so far
}

// OnCommit installs f, called with every write before it is committed
// (nil removes it). f may block to line up racing writers; the write is
// then in progress (Engine.WaitIdle), so Settle waits for it.
func (s *Store) OnCommit(f func(w *store.Write)) {
	if f == nil {
		s.beforeCommit.Store(nil)
		return
	}
	s.beforeCommit.Store(&f)
}

func (s *Store) Commit(ctx context.Context, w *store.Write) (int64, error) {
	if f := s.beforeCommit.Load(); f != nil {
		(*f)(w)
	}
	return s.Store.Commit(ctx, w)
}

// Flush waits until every op queued before it is committed. The store's
// single writer commits in queue order, so one synchronous commit queued
// behind them returns only after they are in (and after the event leases
// that settlements release are released). The commit goes to the
// harness's own app, which has no code: it fires no event and touches no
// app under test.
func (s *Store) Flush(ctx context.Context, now time.Time) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	if s.flushApp == 0 {
		return nil
	}
	base := ""
	if s.flushN > 0 {
		base = fmt.Sprintf("%d-flush", s.flushN)
	}
	_, err := s.Store.Commit(ctx, &store.Write{AppID: s.flushApp, DB: "flush", ID: "flush", BaseRev: base,
		Rev: fmt.Sprintf("%d-flush", s.flushN+1), Body: []byte(`{}`), Writer: store.Writer{User: "admin"}, Path: "cli", Time: now})
	if err != nil {
		return fmt.Errorf("sim: flushing the store's write queue: %w", err)
	}
	s.flushN++
	return nil
}
