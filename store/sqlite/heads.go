package sqlite

import (
	"container/list"
	"slices"
	"sync"
	"time"

	"github.com/handoff-run/handoff/store"
)

// Every write reads the head it replaces, twice: the engine to decide
// (Get), the writer to check nobody moved it (apply). In the job pattern
// the head is almost always one this process wrote a moment ago, so the
// writer keeps the heads it committed last in memory.
//
// Only the writer fills the cache, after its transaction committed and
// before any caller or watcher hears of it: a hit is never older than
// what the database would tell someone who saw the commit. Readers never
// fill it, so a slow read cannot put an old head back. Like the event
// leases, this relies on one process owning the file.
const (
	headsMax = 8192
	// headBodyMax keeps big documents out: they cost more memory than a
	// read saves.
	headBodyMax = 64 << 10
)

type headKey struct {
	app    int64
	db, id string
}

// head is a committed head with its grants, which the writer compares
// with a write's new grants instead of reading them back.
type head struct {
	key    headKey
	doc    store.Doc
	grants []store.Grant
}

type heads struct {
	mu  sync.Mutex
	m   map[headKey]*list.Element
	lru list.List // front: most recently used
}

// get returns a copy of the cached head, or nil.
func (h *heads) get(k headKey) *head {
	h.mu.Lock()
	defer h.mu.Unlock()
	el := h.m[k]
	if el == nil {
		return nil
	}
	h.lru.MoveToFront(el)
	c := *el.Value.(*head)
	return &c
}

// put stores committed heads, newest last.
func (h *heads) put(hs []*head) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.m == nil {
		h.m = map[headKey]*list.Element{}
	}
	for _, c := range hs {
		if el := h.m[c.key]; el != nil {
			h.lru.Remove(el)
			delete(h.m, c.key)
		}
		if len(c.doc.Body) > headBodyMax {
			continue
		}
		h.m[c.key] = h.lru.PushFront(c)
	}
	for len(h.m) > headsMax {
		el := h.lru.Back()
		delete(h.m, el.Value.(*head).key)
		h.lru.Remove(el)
	}
}

// headOf builds the cache entry for a write the writer just applied.
func headOf(wr *store.Write, seq int64, grants []store.Grant) *head {
	d := store.Doc{DB: wr.DB, ID: wr.ID, Rev: wr.Rev, Deleted: wr.Deleted, Seq: seq, Time: time.Unix(0, wr.Time.UnixNano()),
		Channels: slices.Clone(wr.Channels), HasGrants: len(grants) > 0}
	if !wr.Deleted {
		d.Body = slices.Clone(wr.Body) // the caller's buffer is its own
	}
	return &head{key: headKey{wr.AppID, wr.DB, wr.ID}, doc: d, grants: slices.Clone(grants)}
}
