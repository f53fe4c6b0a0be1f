package sim

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/handoff-run/handoff/store"
)

// Store wraps the real store so the harness can see work that the
// engine's activity counter cannot: a store call in progress (a commit
// waiting for its fsync, a handler's query) and ops the store queues
// without waiting for them (event settlements, log lines). Every call is
// forwarded unchanged; the wrapper only counts.
type Store struct {
	store.Store

	inflight atomic.Int64  // calls that have not returned yet
	calls    atomic.Uint64 // moves on every call's start and end
	queued   atomic.Uint64 // ops that may still sit in the writer's queue

	beforeCommit atomic.Pointer[func(*store.Write)]

	flushMu  sync.Mutex
	flushApp int64  // the harness's own app; Flush writes there
	flushN   int    // revisions of the flush document so far
	flushed  uint64 // queued when the last Flush started
}

func (s *Store) enter() func() {
	s.inflight.Add(1)
	s.calls.Add(1)
	return func() {
		s.calls.Add(1)
		s.inflight.Add(-1)
	}
}

// OnCommit installs f, called with every write before it is committed
// (nil removes it). f may block to line up racing writers; the write is
// then counted as in progress, so Settle waits for it.
func (s *Store) OnCommit(f func(w *store.Write)) {
	if f == nil {
		s.beforeCommit.Store(nil)
		return
	}
	s.beforeCommit.Store(&f)
}

// Flush waits until every op queued before it is committed. The store's
// single writer commits in queue order, so one synchronous commit queued
// behind them returns only after they are in (and after the event leases
// that settlements release are released). The commit goes to the
// harness's own app, which has no code: it fires no event and touches no
// app under test, and it bypasses the counters.
func (s *Store) Flush(ctx context.Context, now time.Time) error {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	s.flushed = s.queued.Load()
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

// needsFlush reports whether ops were queued since the last Flush began.
func (s *Store) needsFlush() bool {
	s.flushMu.Lock()
	defer s.flushMu.Unlock()
	return s.queued.Load() != s.flushed
}

// Identity.

func (s *Store) CreateUser(ctx context.Context, u store.User) error {
	defer s.enter()()
	return s.Store.CreateUser(ctx, u)
}
func (s *Store) User(ctx context.Context, name string) (*store.User, error) {
	defer s.enter()()
	return s.Store.User(ctx, name)
}
func (s *Store) AddToken(ctx context.Context, user string, hash []byte) error {
	defer s.enter()()
	return s.Store.AddToken(ctx, user, hash)
}
func (s *Store) UserByToken(ctx context.Context, hash []byte) (*store.User, error) {
	defer s.enter()()
	return s.Store.UserByToken(ctx, hash)
}
func (s *Store) CreateApp(ctx context.Context, a store.App) (*store.App, error) {
	defer s.enter()()
	return s.Store.CreateApp(ctx, a)
}
func (s *Store) App(ctx context.Context, owner, name string) (*store.App, error) {
	defer s.enter()()
	return s.Store.App(ctx, owner, name)
}
func (s *Store) Apps(ctx context.Context) ([]store.App, error) {
	defer s.enter()()
	return s.Store.Apps(ctx)
}
func (s *Store) AddMember(ctx context.Context, appID int64, user, role string) error {
	defer s.enter()()
	return s.Store.AddMember(ctx, appID, user, role)
}
func (s *Store) Members(ctx context.Context, appID int64) ([]store.Member, error) {
	defer s.enter()()
	return s.Store.Members(ctx, appID)
}

// Documents.

func (s *Store) Get(ctx context.Context, appID int64, db, id string) (*store.Doc, error) {
	defer s.enter()()
	return s.Store.Get(ctx, appID, db, id)
}
func (s *Store) Commit(ctx context.Context, w *store.Write) (int64, error) {
	defer s.enter()()
	if f := s.beforeCommit.Load(); f != nil {
		(*f)(w)
	}
	return s.Store.Commit(ctx, w)
}
func (s *Store) History(ctx context.Context, appID int64, db, id string) ([]store.Revision, error) {
	defer s.enter()()
	return s.Store.History(ctx, appID, db, id)
}
func (s *Store) Query(ctx context.Context, q store.Query) ([]store.Doc, error) {
	defer s.enter()()
	return s.Store.Query(ctx, q)
}
func (s *Store) Scan(ctx context.Context, appID int64, db, after string, limit int) ([]store.Doc, error) {
	defer s.enter()()
	return s.Store.Scan(ctx, appID, db, after, limit)
}
func (s *Store) Changes(ctx context.Context, appID int64, db string, since int64, limit int) ([]store.Revision, error) {
	defer s.enter()()
	return s.Store.Changes(ctx, appID, db, since, limit)
}
func (s *Store) LastSeq(ctx context.Context, appID int64) (int64, error) {
	defer s.enter()()
	return s.Store.LastSeq(ctx, appID)
}
func (s *Store) Databases(ctx context.Context, appID int64) ([]string, error) {
	defer s.enter()()
	return s.Store.Databases(ctx, appID)
}
func (s *Store) GrantsFor(ctx context.Context, appID int64, user string) ([]store.Grant, error) {
	defer s.enter()()
	return s.Store.GrantsFor(ctx, appID, user)
}

// Code.

func (s *Store) SaveCode(ctx context.Context, appID int64, c store.CodeVersion) (int, error) {
	defer s.enter()()
	return s.Store.SaveCode(ctx, appID, c)
}
func (s *Store) ActivateCode(ctx context.Context, appID int64, version int) error {
	defer s.enter()()
	return s.Store.ActivateCode(ctx, appID, version)
}
func (s *Store) ActiveCode(ctx context.Context, appID int64) (*store.CodeVersion, error) {
	defer s.enter()()
	return s.Store.ActiveCode(ctx, appID)
}
func (s *Store) CodeVersions(ctx context.Context, appID int64) ([]store.CodeVersion, error) {
	defer s.enter()()
	return s.Store.CodeVersions(ctx, appID)
}
func (s *Store) SetAccessTimeout(ctx context.Context, appID int64, d time.Duration) error {
	defer s.enter()()
	return s.Store.SetAccessTimeout(ctx, appID, d)
}

// Events.

func (s *Store) ClaimEvents(ctx context.Context, c store.Claim) ([]store.Event, error) {
	defer s.enter()()
	return s.Store.ClaimEvents(ctx, c)
}
func (s *Store) NextEventDue(ctx context.Context, appID int64) (time.Time, bool, error) {
	defer s.enter()()
	return s.Store.NextEventDue(ctx, appID)
}
func (s *Store) StartEvent(ctx context.Context, appID, seq int64) error {
	defer s.enter()()
	return s.Store.StartEvent(ctx, appID, seq)
}
func (s *Store) SettleEvent(ctx context.Context, appID, seq int64, st store.Settlement) error {
	defer s.enter()()
	s.queued.Add(1)
	return s.Store.SettleEvent(ctx, appID, seq, st)
}
func (s *Store) ListEvents(ctx context.Context, appID int64, dead bool, afterSeq int64, limit int) ([]store.Event, error) {
	defer s.enter()()
	return s.Store.ListEvents(ctx, appID, dead, afterSeq, limit)
}
func (s *Store) ReplayEvent(ctx context.Context, appID, seq int64, now time.Time) error {
	defer s.enter()()
	return s.Store.ReplayEvent(ctx, appID, seq, now)
}
func (s *Store) EventApps(ctx context.Context) ([]int64, error) {
	defer s.enter()()
	return s.Store.EventApps(ctx)
}
func (s *Store) SaveTick(ctx context.Context, appID int64, t store.Tick) error {
	defer s.enter()()
	return s.Store.SaveTick(ctx, appID, t)
}
func (s *Store) LastTick(ctx context.Context, appID int64) (*store.Tick, error) {
	defer s.enter()()
	return s.Store.LastTick(ctx, appID)
}

// Logs.

func (s *Store) AppendLogs(ctx context.Context, lines []store.LogLine) error {
	defer s.enter()()
	s.queued.Add(1)
	return s.Store.AppendLogs(ctx, lines)
}
func (s *Store) Logs(ctx context.Context, appID int64, after int64, limit int) ([]store.LogLine, error) {
	defer s.enter()()
	return s.Store.Logs(ctx, appID, after, limit)
}
