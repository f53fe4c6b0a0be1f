// Package engine is the heart of handoff: the write path (validate, read
// the head, check ifRev, decide, commit), reads filtered by who asks, and
// identity. It knows the store.Store interface, never a database, and
// nothing of HTTP.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/feed"
	"github.com/handoff-run/handoff/internal/identity"
	"github.com/handoff-run/handoff/internal/runner"
	"github.com/handoff-run/handoff/store"
)

// DefaultMaxDocBytes is the default size limit of one document (1 MiB).
const DefaultMaxDocBytes = 1 << 20

// Options configure an Engine. Zero values pick the defaults.
type Options struct {
	// MaxJSMemory caps, in MiB, the memory an operator may give one call
	// of an app's JavaScript (SetJSMemory); 0 is DefaultMaxJSMemory. The
	// server's own heap ceiling is the natural cap.
	MaxJSMemory int
	Clock       clock.Clock
	MaxDocBytes int
	Logger      *slog.Logger
	// Code compiles each app's access.js and backend.js (jsapp.New for
	// JavaScript). Nil refuses code: deploys fail, and an app whose live
	// version has code closes its databases to writes until a server that
	// runs code serves it.
	Code appcode.Compiler
	// SecretKey seals app secrets at rest (32 bytes); without it secrets
	// are refused.
	SecretKey []byte
	// OnDelivery, when set, is told how long each onChange event waited
	// from its commit to the start of its run (for benchmarks).
	OnDelivery func(wait time.Duration)
	// PollEvery is how often each app's deliverer looks for due events
	// when nothing woke it (default 2 s), a safety net under the
	// wake-ups. Tests set it long, so a missing wake-up shows.
	PollEvery time.Duration
	// FeedLimits bound the revisions kept for each app's live followers
	// (zero: feed.DefaultLimits).
	FeedLimits feed.Limits
	// VetCode, when set, is given each source file of a deploy before
	// Code compiles it in this process. A compiler can end the process it
	// runs in on hostile code (a stack overflow is fatal), so the server
	// compiles it in a child first (package compilechild).
	VetCode func(ctx context.Context, file, source string) error
}

// Engine serves every read and write of every app on one Store.
type Engine struct {
	st      store.Store
	caps    store.Capabilities // st.Capabilities(), read once
	clock   clock.Clock
	maxDoc  int
	maxJS   int // Options.MaxJSMemory
	log     *slog.Logger
	code    appcode.Compiler
	vetCode func(ctx context.Context, file, source string) error
	observe func(time.Duration)
	poll    time.Duration

	// runner delivers events and ticks schedules once Start is called.
	runner *runner.Runner
	// live is runner for the store's callbacks, which run on the store's
	// goroutines and may come before Start.
	live atomic.Pointer[runner.Runner]
	// loopStopped counts, per app, the committed writes whose onChange the
	// loop guard held back since this engine started.
	loopMu      sync.Mutex
	loopStopped map[int64]int64
	// fanOut is the budget of each chain of onChange writes (fanout.go).
	fanOut fanOut

	// apps caches resolved apps and their members: every request names an
	// app, and reading it from the store each time would double the cost
	// of a get. Entries are dropped when this engine changes them, and
	// when the store says another node did (store.AppWatcher).
	mu   sync.RWMutex
	apps map[string]*appState
	// gen moves whenever cached app state or secrets are dropped, so a
	// load that read the store before cannot put its stale copy back.
	gen atomic.Uint64
	// fresh holds code compiled by Deploy, or by a load before a change
	// of settings, until the app is loaded again; the load takes it if
	// its version is still the active one.
	fresh sync.Map // app ID -> *appCode
	// feeds fans commits out to live subscribers.
	feeds *feed.Hub
	// open holds the open feeds, to wake when a reader may have lost its
	// right to read (revoke.go).
	open openFeeds
	// id keeps the users and devices (package identity).
	id *identity.Service
	// secrets caches each app's opened secrets for its handlers.
	secrets   sync.Map // app ID -> map[string]string
	secretKey []byte
	// node names this engine among the nodes sharing a database.
	node string
}

type appState struct {
	store.App
	roles  map[string][]string // user -> member roles
	code   *appCode
	grants grantCache
}

// New returns an engine over st.
func New(st store.Store, o Options) *Engine {
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.MaxDocBytes <= 0 {
		o.MaxDocBytes = DefaultMaxDocBytes
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Code == nil {
		o.Code = noCode{}
	}
	e := &Engine{st: st, clock: o.Clock, maxDoc: o.MaxDocBytes, maxJS: o.MaxJSMemory, log: o.Logger, code: o.Code, vetCode: o.VetCode,
		observe: o.OnDelivery, poll: o.PollEvery, secretKey: o.SecretKey, apps: map[string]*appState{}}
	e.node = mintID(e.clock.Now())
	e.id = identity.New(st, e.clock, identity.Hooks{MayRead: e.mayReadApp, MembershipChanged: e.forgetApp})
	e.caps = st.Capabilities()
	if gw := e.caps.Grants; gw != nil {
		gw.WatchGrants(e.grantsChanged)
	}
	if aw := e.caps.Apps; aw != nil {
		aw.WatchApps(e.appChanged)
	}
	if rv := e.caps.Revocations; rv != nil {
		rv.WatchRevoked(e.revokedHere)
	}
	e.feeds = feed.NewHub(st, o.FeedLimits)
	st.Watch(e.feeds.Notify)
	return e
}

// Store returns the engine's store.
func (e *Engine) Store() store.Store { return e.st }

// Clock returns the engine's clock.
func (e *Engine) Clock() clock.Clock { return e.clock }

// MaxDocBytes is the size limit of one document.
func (e *Engine) MaxDocBytes() int { return e.maxDoc }

// app resolves "owner/name" to its state, from the cache or the store.
func (e *Engine) app(ctx context.Context, ref string) (*appState, error) {
	e.mu.RLock()
	st := e.apps[ref]
	e.mu.RUnlock()
	if st != nil {
		return st, nil
	}
	owner, name, err := ParseAppRef(ref)
	if err != nil {
		return nil, err
	}
	gen := e.gen.Load()
	a, err := e.st.App(ctx, owner, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errs.New(errs.NotFound, "app %q does not exist; create it with `handoff app create %s`", ref, ref)
	}
	if err != nil {
		return nil, internal(err)
	}
	roles, err := e.storedRoles(ctx, a.ID)
	if err != nil {
		return nil, err
	}
	st = &appState{App: *a, roles: roles}
	if st.code, err = e.loadCode(ctx, a.ID, ref); err != nil {
		return nil, err
	}
	// Code that failed to load is not kept: the failure may be passing
	// (a load cut short under memory pressure), so the next call tries
	// again instead of refusing writes until the next deploy.
	if st.code == nil || !st.code.broken {
		e.mu.Lock()
		// Keep what a concurrent load cached first: its callers may have
		// filled its grant cache already.
		if cur := e.apps[ref]; cur != nil {
			st = cur
		} else if e.gen.Load() == gen {
			e.apps[ref] = st
		}
		e.mu.Unlock()
	}
	return st, nil
}

// appChanged is the store's word that an app's settings changed, on this
// node or another: it drops what this node cached of the app and lets
// the app's runner pick up its code and schedule. It must not block.
func (e *Engine) appChanged(appID int64) {
	e.mu.Lock()
	e.gen.Add(1)
	for ref, st := range e.apps {
		if st.ID == appID {
			delete(e.apps, ref)
			// Most changes leave the code as it was: the next load takes
			// this compiled copy if its version is still the active one.
			if st.code != nil {
				e.fresh.LoadOrStore(appID, st.code)
			}
		}
	}
	e.mu.Unlock()
	e.secrets.Delete(appID)
	e.live.Load().Changed(appID)
	e.open.wakeApp(appID, "")
}

// grantsChanged drops the cached permissions of an app whose live grants
// a commit just changed; the store calls it before waking followers.
func (e *Engine) grantsChanged(appID int64) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	for _, st := range e.apps {
		if st.ID == appID {
			st.grants.clear()
		}
	}
}

// appAs is app for a caller: a device or visitor of another app is refused
// here, before anything of this app is read or written.
func (e *Engine) appAs(ctx context.Context, a Actor, ref string) (*appState, error) {
	if err := a.Scoped(ref); err != nil {
		return nil, err
	}
	return e.app(ctx, ref)
}

func (e *Engine) forgetApp(ref string) {
	e.mu.Lock()
	e.gen.Add(1)
	delete(e.apps, ref)
	e.mu.Unlock()
	e.open.wakeApp(0, ref)
}

// forgetSecrets drops the app's opened secrets.
func (e *Engine) forgetSecrets(appID int64) {
	e.gen.Add(1)
	e.secrets.Delete(appID)
}

// internal wraps a store failure. The failure's text (SQL, data) is its
// Detail, for the server's log; neither HTTP clients nor app code see it.
func internal(err error) error { return errs.Storage(err) }

// WaitIdle waits, on a clock that counts work in progress (clock.Virtual),
// until nothing is in progress at its current instant: no write, no
// claim, settlement or handler run, no tick, no wake-up of the runner
// not yet acted on; handlers that only wait on the clock do not count.
// Then only the clock moving can start more (docs/architecture.md,
// "Time"). On other clocks it fails: they keep no count.
func (e *Engine) WaitIdle(ctx context.Context) error {
	w, ok := e.clock.(interface{ WaitIdle(context.Context) error })
	if !ok {
		return errors.New("engine: WaitIdle needs a clock that counts work in progress, such as clock.Virtual")
	}
	return w.WaitIdle(ctx)
}
