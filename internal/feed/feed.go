// Package feed fans each app's commits out to its live followers
// (docs/architecture.md, "The live feed"), without reading the store once
// per follower. It knows nothing of who may read what: the engine filters
// each follower's revisions by its reader's channels.
package feed

import (
	"context"
	"sort"
	"sync"

	"github.com/handoff-run/handoff/store"
)

// The store tells the hub of each commit (an app and its new seq) from
// its writer, without blocking it; the first follower to need the new
// revisions reads them once into a ring that every follower of the app
// shares. A follower that fell behind the ring reads its backlog from the
// store, so resuming from any seq misses nothing and repeats nothing.
const fetchSize = 500

// Limits bound the ring of each app's latest revisions.
type Limits struct {
	Slots int // revisions kept (default 4096)
	Bytes int // of document bodies kept at most (default 32 MiB)
}

// DefaultLimits keep a few seconds of a busy app's commits: enough for a
// follower that reconnects to resume from the ring.
var DefaultLimits = Limits{Slots: 4096, Bytes: 32 << 20}

// Source is what the hub reads: an app's latest seq and its ledger.
// A store.Store is one.
type Source interface {
	LastSeq(ctx context.Context, appID int64) (int64, error)
	Changes(ctx context.Context, appID int64, db string, since int64, limit int) ([]store.Revision, error)
}

// Hub keeps one App per app that has followers.
type Hub struct {
	src  Source
	lim  Limits
	mu   sync.Mutex
	apps map[int64]*App
}

// NewHub returns a hub reading from src; zero limits take DefaultLimits.
func NewHub(src Source, lim Limits) *Hub {
	if lim.Slots <= 0 {
		lim.Slots = DefaultLimits.Slots
	}
	if lim.Bytes <= 0 {
		lim.Bytes = DefaultLimits.Bytes
	}
	return &Hub{src: src, lim: lim, apps: map[int64]*App{}}
}

// App is one app's feed: its latest seq, a wake-up when it moves, and the
// ring of its latest revisions that its followers share.
type App struct {
	src Source
	id  int64
	lim Limits

	mu        sync.Mutex
	last      int64         // the app's latest committed seq
	wake      chan struct{} // closed when last moves
	followers int           // open Feeds; the ring is let go at 0

	// ring holds the app's latest revisions, n of them from head (a
	// circular buffer that grows to lim.Slots slots), and bytes of
	// document bodies at most lim.Bytes. It holds every revision with a
	// seq after base: seqs only grow, but need not be dense, so which
	// revisions it covers is told by base, not by its first seq.
	ringMu sync.RWMutex
	ring   []store.Revision
	head   int
	n      int
	bytes  int
	base   int64
}

// Open registers a follower of the app and returns its feed; the
// follower calls Close when done.
func (h *Hub) Open(ctx context.Context, appID int64) (*App, error) {
	// Register first, then read the latest seq: a commit that lands in
	// between is either told to the registered feed or seen by LastSeq,
	// never lost (a feed created with a stale position would sleep
	// through a change until the next commit).
	h.mu.Lock()
	af := h.apps[appID]
	if af == nil {
		af = &App{src: h.src, id: appID, lim: h.lim, wake: make(chan struct{})}
		h.apps[appID] = af
	}
	h.mu.Unlock()
	af.mu.Lock()
	af.followers++
	af.mu.Unlock()
	last, err := h.src.LastSeq(ctx, appID)
	if err != nil {
		af.Close()
		return nil, err
	}
	af.advance(last)
	return af, nil
}

// Close lets a follower go. When the app's last follower leaves, the
// revisions kept for its followers are let go too.
func (af *App) Close() {
	af.mu.Lock()
	af.followers--
	idle := af.followers == 0
	af.mu.Unlock()
	if idle {
		af.ringMu.Lock()
		af.release()
		af.ringMu.Unlock()
	}
}

// Notify is the store's commit callback (store.Store.Watch): it must not
// block the writer.
func (h *Hub) Notify(appID, seq int64) {
	h.mu.Lock()
	af := h.apps[appID]
	h.mu.Unlock()
	if af == nil {
		return // nobody follows this app
	}
	af.advance(seq)
}

// advance moves the feed's latest seq forward and wakes its followers.
func (af *App) advance(seq int64) {
	af.mu.Lock()
	if seq > af.last {
		af.last = seq
		close(af.wake)
		af.wake = make(chan struct{})
	}
	af.mu.Unlock()
}

// State returns the app's latest seq and a channel closed when it moves.
func (af *App) State() (int64, <-chan struct{}) {
	af.mu.Lock()
	defer af.mu.Unlock()
	return af.last, af.wake
}

// Read returns revisions after since, up to limit, from the ring when it
// holds them and from the source otherwise. upTo is the seq the caller
// knows is committed (State).
func (af *App) Read(ctx context.Context, since, upTo int64, limit int) ([]store.Revision, error) {
	// Every follower of the app wakes on the same commit: all but the
	// first find the ring already filled and copy from it together.
	af.ringMu.RLock()
	revs, ok := af.fromRing(since, upTo, limit)
	af.ringMu.RUnlock()
	if ok {
		return revs, nil
	}
	af.ringMu.Lock()
	if revs, ok = af.fromRing(since, upTo, limit); !ok {
		if err := af.fill(ctx, since, upTo); err != nil {
			af.ringMu.Unlock()
			return nil, err
		}
		revs, ok = af.fromRing(since, upTo, limit)
	}
	af.ringMu.Unlock()
	if ok {
		return revs, nil
	}
	// Behind the ring: read the backlog directly, without holding up the
	// followers that are live.
	return af.src.Changes(ctx, af.id, "", since, limit)
}

// fromRing copies the revisions after since (up to limit) when the ring
// holds every one of them up to upTo. The caller holds ringMu.
func (af *App) fromRing(since, upTo int64, limit int) ([]store.Revision, bool) {
	n := af.n
	if n == 0 || since < af.base || af.at(n-1).Seq < upTo {
		return nil, false
	}
	i := sort.Search(n, func(i int) bool { return af.at(i).Seq > since })
	out := make([]store.Revision, min(limit, n-i))
	for k := range out {
		out[k] = *af.at(i + k)
	}
	return out, true
}

// at is the ring's i-th revision, oldest first.
func (af *App) at(i int) *store.Revision {
	return &af.ring[(af.head+i)%len(af.ring)]
}

// push adds the newest revision to the ring, dropping the oldest ones
// when it is full.
func (af *App) push(r store.Revision) {
	switch {
	case af.n < len(af.ring):
		*af.at(af.n) = r
		af.n++
	case len(af.ring) < af.lim.Slots:
		// Grow. The revisions must lie from index 0 for append to keep
		// their order; they do unless bytes dropped some from the front.
		if af.head != 0 {
			flat := make([]store.Revision, af.n, min(2*af.n, af.lim.Slots))
			for i := range flat {
				flat[i] = *af.at(i)
			}
			af.ring, af.head = flat, 0
		}
		af.ring = append(af.ring, r)
		af.n++
	default:
		af.drop()
		*af.at(af.n) = r
		af.n++
	}
	af.bytes += len(r.Body)
	for af.bytes > af.lim.Bytes && af.n > 1 {
		af.drop()
	}
}

// drop forgets the oldest revision of the ring.
func (af *App) drop() {
	old := af.at(0)
	af.base = old.Seq
	af.bytes -= len(old.Body)
	*old = store.Revision{}
	af.head = (af.head + 1) % len(af.ring)
	af.n--
}

// release forgets the whole ring.
func (af *App) release() {
	af.ring, af.head, af.n, af.bytes, af.base = nil, 0, 0, 0, 0
}

// fill reads the revisions up to upTo into the ring, continuing from its
// end. The caller holds ringMu.
func (af *App) fill(ctx context.Context, since, upTo int64) error {
	// A ring left far behind (nobody read while many commits landed) is
	// dropped rather than caught up revision by revision: followers that
	// far back read the store directly anyway.
	if af.n > 0 && upTo-af.at(af.n-1).Seq > int64(af.lim.Slots) {
		af.release()
	}
	for {
		var end int64
		if af.n > 0 {
			end = af.at(af.n - 1).Seq
		} else {
			end = max(since, upTo-fetchSize)
		}
		if end >= upTo {
			return nil
		}
		revs, err := af.src.Changes(ctx, af.id, "", end, fetchSize)
		if err != nil {
			return err
		}
		if len(revs) == 0 {
			return nil
		}
		if af.n == 0 {
			af.base = end // the read covered every seq after end
		}
		for _, r := range revs {
			af.push(r)
		}
	}
}
