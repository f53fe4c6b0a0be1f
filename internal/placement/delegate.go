package placement

import (
	"context"
	"slices"
	"time"

	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/postgres"
)

// The calls below go home: users, tokens, devices, apps, members,
// secrets, visitors and nonces are identity, shared by every app.

func (r *Router) home() *postgres.Store { return r.dbs[0] }

func (r *Router) CreateUser(ctx context.Context, u store.User) error {
	return r.home().CreateUser(ctx, u)
}
func (r *Router) User(ctx context.Context, name string) (*store.User, error) {
	return r.home().User(ctx, name)
}
func (r *Router) AddToken(ctx context.Context, user string, hash []byte) error {
	return r.home().AddToken(ctx, user, hash)
}
func (r *Router) ReplaceTokens(ctx context.Context, user string, hash []byte) error {
	return r.home().ReplaceTokens(ctx, user, hash)
}
func (r *Router) UserByToken(ctx context.Context, hash []byte) (*store.User, error) {
	return r.home().UserByToken(ctx, hash)
}
func (r *Router) Users(ctx context.Context) ([]store.User, error) { return r.home().Users(ctx) }
func (r *Router) RemoveUser(ctx context.Context, name string) ([]int64, error) {
	return r.home().RemoveUser(ctx, name)
}
func (r *Router) App(ctx context.Context, owner, name string) (*store.App, error) {
	return r.home().App(ctx, owner, name)
}
func (r *Router) Apps(ctx context.Context) ([]store.App, error) { return r.home().Apps(ctx) }
func (r *Router) AddMember(ctx context.Context, appID int64, user, role string) error {
	return r.home().AddMember(ctx, appID, user, role)
}
func (r *Router) RemoveMember(ctx context.Context, appID int64, user, role string) error {
	return r.home().RemoveMember(ctx, appID, user, role)
}
func (r *Router) Members(ctx context.Context, appID int64) ([]store.Member, error) {
	return r.home().Members(ctx, appID)
}
func (r *Router) SetPublic(ctx context.Context, appID int64, public bool) error {
	return r.home().SetPublic(ctx, appID, public)
}
func (r *Router) SetOrigins(ctx context.Context, appID int64, origins []string) error {
	return r.home().SetOrigins(ctx, appID, origins)
}
func (r *Router) AddDevice(ctx context.Context, d store.Device) error {
	return r.home().AddDevice(ctx, d)
}
func (r *Router) Device(ctx context.Context, user, name string) (*store.Device, error) {
	return r.home().Device(ctx, user, name)
}
func (r *Router) Devices(ctx context.Context, user string) ([]store.Device, error) {
	return r.home().Devices(ctx, user)
}
func (r *Router) RevokeDevice(ctx context.Context, user, name string, at time.Time) error {
	return r.home().RevokeDevice(ctx, user, name, at)
}
func (r *Router) PutSecret(ctx context.Context, appID int64, name string, sealed []byte, at time.Time) error {
	return r.home().PutSecret(ctx, appID, name, sealed, at)
}
func (r *Router) DeleteSecret(ctx context.Context, appID int64, name string) error {
	return r.home().DeleteSecret(ctx, appID, name)
}
func (r *Router) Secrets(ctx context.Context, appID int64) ([]store.Secret, error) {
	return r.home().Secrets(ctx, appID)
}

// SetAccessTimeout goes home: App reads it from the app's row there.
func (r *Router) SetAccessTimeout(ctx context.Context, appID int64, d time.Duration) error {
	return r.home().SetAccessTimeout(ctx, appID, d)
}

// SetJSMemory goes home, like the other settings in the app's row.
func (r *Router) SetJSMemory(ctx context.Context, appID int64, mib int) error {
	return r.home().SetJSMemory(ctx, appID, mib)
}

func (r *Router) RemoveToken(ctx context.Context, hash []byte) error {
	return r.home().RemoveToken(ctx, hash)
}
func (r *Router) SetSignup(ctx context.Context, appID int64, policy string) error {
	return r.home().SetSignup(ctx, appID, policy)
}
func (r *Router) PutTicket(ctx context.Context, t store.Ticket) error {
	return r.home().PutTicket(ctx, t)
}
func (r *Router) TakeTicket(ctx context.Context, appID int64, kind string, hash []byte, now time.Time) (*store.Ticket, error) {
	return r.home().TakeTicket(ctx, appID, kind, hash, now)
}
func (r *Router) AddPasskey(ctx context.Context, p store.Passkey) error {
	return r.home().AddPasskey(ctx, p)
}
func (r *Router) Passkeys(ctx context.Context, user string) ([]store.Passkey, error) {
	return r.home().Passkeys(ctx, user)
}
func (r *Router) PasskeyByID(ctx context.Context, app string, id []byte) (*store.Passkey, error) {
	return r.home().PasskeyByID(ctx, app, id)
}
func (r *Router) UpdatePasskey(ctx context.Context, user string, id, data []byte) error {
	return r.home().UpdatePasskey(ctx, user, id, data)
}

// Credentials live in the home database, so their revocations are
// announced and heard there.
func (r *Router) AnnounceRevoked(ctx context.Context, user string) error {
	return r.home().AnnounceRevoked(ctx, user)
}
func (r *Router) WatchRevoked(fn func(user string)) { r.home().WatchRevoked(fn) }
func (r *Router) UseNonce(ctx context.Context, key string, now, expires time.Time) (bool, error) {
	return r.home().UseNonce(ctx, key, now, expires)
}

// The calls below go to the app's database. Reads and the outbox's own
// bookkeeping go where the app lives now; writes of its ledger, code and
// ticks wait out a move (write).

// read runs fn on app's database.
func read[T any](ctx context.Context, r *Router, app int64, fn func(*postgres.Store) (T, error)) (T, error) {
	st, err := r.data(ctx, app)
	if err != nil {
		var zero T
		return zero, err
	}
	return fn(st)
}

// do runs fn, which answers nothing but an error, on app's database.
func (r *Router) do(ctx context.Context, app int64, fn func(*postgres.Store) error) error {
	st, err := r.data(ctx, app)
	if err != nil {
		return err
	}
	return fn(st)
}

func (r *Router) Commit(ctx context.Context, w *store.Write) (int64, error) {
	return write(ctx, r, w.AppID, func(st *postgres.Store) (int64, error) { return st.Commit(ctx, w) })
}
func (r *Router) SaveCode(ctx context.Context, appID int64, c store.CodeVersion) (int, error) {
	return write(ctx, r, appID, func(st *postgres.Store) (int, error) { return st.SaveCode(ctx, appID, c) })
}
func (r *Router) ActivateCode(ctx context.Context, appID int64, version int) error {
	_, err := write(ctx, r, appID, func(st *postgres.Store) (struct{}, error) {
		return struct{}{}, st.ActivateCode(ctx, appID, version)
	})
	return err
}
func (r *Router) ActiveCode(ctx context.Context, appID int64) (*store.CodeVersion, error) {
	return read(ctx, r, appID, func(st *postgres.Store) (*store.CodeVersion, error) { return st.ActiveCode(ctx, appID) })
}
func (r *Router) CodeVersions(ctx context.Context, appID int64) ([]store.CodeVersion, error) {
	return read(ctx, r, appID, func(st *postgres.Store) ([]store.CodeVersion, error) { return st.CodeVersions(ctx, appID) })
}
func (r *Router) Get(ctx context.Context, appID int64, db, id string) (*store.Doc, error) {
	return read(ctx, r, appID, func(st *postgres.Store) (*store.Doc, error) { return st.Get(ctx, appID, db, id) })
}
func (r *Router) History(ctx context.Context, appID int64, db, id string) ([]store.Revision, error) {
	return read(ctx, r, appID, func(st *postgres.Store) ([]store.Revision, error) { return st.History(ctx, appID, db, id) })
}
func (r *Router) Query(ctx context.Context, q store.Query) ([]store.Doc, error) {
	return read(ctx, r, q.AppID, func(st *postgres.Store) ([]store.Doc, error) { return st.Query(ctx, q) })
}
func (r *Router) Scan(ctx context.Context, appID int64, db, after string, limit int) ([]store.Doc, error) {
	return read(ctx, r, appID, func(st *postgres.Store) ([]store.Doc, error) { return st.Scan(ctx, appID, db, after, limit) })
}
func (r *Router) Changes(ctx context.Context, appID int64, db string, since int64, limit int) ([]store.Revision, error) {
	return read(ctx, r, appID, func(st *postgres.Store) ([]store.Revision, error) {
		return st.Changes(ctx, appID, db, since, limit)
	})
}
func (r *Router) LastSeq(ctx context.Context, appID int64) (int64, error) {
	return read(ctx, r, appID, func(st *postgres.Store) (int64, error) { return st.LastSeq(ctx, appID) })
}
func (r *Router) Databases(ctx context.Context, appID int64) ([]string, error) {
	return read(ctx, r, appID, func(st *postgres.Store) ([]string, error) { return st.Databases(ctx, appID) })
}
func (r *Router) Transitions(ctx context.Context, appID int64, db, field string) ([]store.Transition, error) {
	return read(ctx, r, appID, func(st *postgres.Store) ([]store.Transition, error) {
		return st.Transitions(ctx, appID, db, field)
	})
}
func (r *Router) GrantsFor(ctx context.Context, appID int64, user string) ([]store.Grant, error) {
	return read(ctx, r, appID, func(st *postgres.Store) ([]store.Grant, error) { return st.GrantsFor(ctx, appID, user) })
}
func (r *Router) ClaimEvents(ctx context.Context, c store.Claim) ([]store.Event, error) {
	return read(ctx, r, c.AppID, func(st *postgres.Store) ([]store.Event, error) { return st.ClaimEvents(ctx, c) })
}
func (r *Router) RenewEvents(ctx context.Context, appID int64, seqs []int64, until time.Time) error {
	return r.do(ctx, appID, func(st *postgres.Store) error { return st.RenewEvents(ctx, appID, seqs, until) })
}
func (r *Router) NextEventDue(ctx context.Context, appID int64) (time.Time, bool, error) {
	st, err := r.data(ctx, appID)
	if err != nil {
		return time.Time{}, false, err
	}
	return st.NextEventDue(ctx, appID)
}
func (r *Router) StartEvent(ctx context.Context, appID, seq int64) error {
	return r.do(ctx, appID, func(st *postgres.Store) error { return st.StartEvent(ctx, appID, seq) })
}
func (r *Router) SettleEvent(ctx context.Context, appID, seq int64, s store.Settlement) error {
	return r.do(ctx, appID, func(st *postgres.Store) error { return st.SettleEvent(ctx, appID, seq, s) })
}
func (r *Router) ListEvents(ctx context.Context, appID int64, dead bool, afterSeq int64, limit int) ([]store.Event, error) {
	return read(ctx, r, appID, func(st *postgres.Store) ([]store.Event, error) {
		return st.ListEvents(ctx, appID, dead, afterSeq, limit)
	})
}
func (r *Router) ReplayEvent(ctx context.Context, appID, seq int64, now time.Time) error {
	return r.do(ctx, appID, func(st *postgres.Store) error { return st.ReplayEvent(ctx, appID, seq, now) })
}
func (r *Router) SaveTick(ctx context.Context, appID int64, t store.Tick) error {
	_, err := write(ctx, r, appID, func(st *postgres.Store) (struct{}, error) { return struct{}{}, st.SaveTick(ctx, appID, t) })
	return err
}
func (r *Router) LastTick(ctx context.Context, appID int64) (*store.Tick, error) {
	return read(ctx, r, appID, func(st *postgres.Store) (*store.Tick, error) { return st.LastTick(ctx, appID) })
}
func (r *Router) AcquireTick(ctx context.Context, appID int64, planned time.Time, node string, hold time.Time) (bool, error) {
	return write(ctx, r, appID, func(st *postgres.Store) (bool, error) {
		return st.AcquireTick(ctx, appID, planned, node, hold)
	})
}
func (r *Router) ReleaseTick(ctx context.Context, appID int64, planned time.Time, node string) error {
	_, err := write(ctx, r, appID, func(st *postgres.Store) (struct{}, error) {
		return struct{}{}, st.ReleaseTick(ctx, appID, planned, node)
	})
	return err
}
func (r *Router) Logs(ctx context.Context, appID int64, after int64, limit int) ([]store.LogLine, error) {
	return read(ctx, r, appID, func(st *postgres.Store) ([]store.LogLine, error) { return st.Logs(ctx, appID, after, limit) })
}

// AppendLogs sends each app's lines to its database.
func (r *Router) AppendLogs(ctx context.Context, lines []store.LogLine) error {
	by := map[int][]store.LogLine{}
	for _, l := range lines {
		p, err := r.lookup(ctx, l.AppID)
		if err != nil {
			return err
		}
		by[p.db] = append(by[p.db], l)
	}
	for db, ls := range by {
		if err := r.dbs[db].AppendLogs(ctx, ls); err != nil {
			return err
		}
	}
	return nil
}

// EventApps lists the apps with events waiting in any database.
func (r *Router) EventApps(ctx context.Context) ([]int64, error) {
	var all []int64
	for _, st := range r.dbs {
		apps, err := st.EventApps(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, apps...)
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// HeadHint asks the app's database, if this node knows where it is.
func (r *Router) HeadHint(appID int64, db, id string) *store.Doc {
	r.mu.RLock()
	p, ok := r.places[appID]
	r.mu.RUnlock()
	if !ok {
		return nil
	}
	return r.dbs[p.db].HeadHint(appID, db, id)
}

// Watch, WatchGrants and WatchApps hear every database: an app's commits
// come from the one it lives in.
func (r *Router) Watch(fn func(appID, seq int64)) {
	for _, st := range r.dbs {
		st.Watch(fn)
	}
}
func (r *Router) WatchGrants(fn func(appID int64)) {
	for _, st := range r.dbs {
		st.WatchGrants(fn)
	}
}
func (r *Router) WatchApps(fn func(appID int64)) {
	for _, st := range r.dbs {
		st.WatchApps(fn)
	}
}

// Capabilities are those of a PostgreSQL store, across databases.
func (r *Router) Capabilities() store.Capabilities {
	return store.Capabilities{Grants: r, Apps: r, Nonces: r, Heads: r, Revocations: r, CommitClaims: true, SharedTicks: true}
}
