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
const headsMax = 8192

// head is a committed head with its grants, which the writer compares
// with a write's new grants instead of reading them back.
type head struct {
	key    store.DocKey
	doc    store.Doc
	grants []store.Grant
}

type heads struct {
	mu    sync.Mutex
	m     map[store.DocKey]*list.Element
	lru   list.List // front: most recently used
	bytes int       // bodies held
}

// get returns a copy of the cached head, or nil.
func (h *heads) get(k store.DocKey) *head {
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
		h.m = map[store.DocKey]*list.Element{}
	}
	for _, c := range hs {
		h.remove(c.key)
		if len(c.doc.Body) > store.HeadCacheBodyMax {
			continue
		}
		h.m[c.key] = h.lru.PushFront(c)
		h.bytes += len(c.doc.Body)
	}
	for len(h.m) > headsMax || h.bytes > store.HeadCacheBytes {
		h.remove(h.lru.Back().Value.(*head).key)
	}
}

// forget drops heads a transaction is about to replace: from its commit
// until put, a Get must read the database, which never goes back to an
// older head once it has shown a newer one.
func (h *heads) forget(hs []*head) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, c := range hs {
		h.remove(c.key)
	}
}

func (h *heads) remove(k store.DocKey) {
	if el := h.m[k]; el != nil {
		h.bytes -= len(el.Value.(*head).doc.Body)
		h.lru.Remove(el)
		delete(h.m, k)
	}
}

// headOf builds the cache entry for a write the writer just applied.
func headOf(wr *store.Write, seq int64, grants []store.Grant) *head {
	d := store.Doc{DB: wr.DB, ID: wr.ID, Rev: wr.Rev, Deleted: wr.Deleted, Seq: seq, Time: time.Unix(0, wr.Time.UnixNano()),
		Channels: slices.Clone(wr.Channels), HasGrants: len(grants) > 0}
	if !wr.Deleted {
		d.Body = slices.Clone(wr.Body) // the caller's buffer is its own
	}
	return &head{key: store.DocKey{App: wr.AppID, DB: wr.DB, ID: wr.ID}, doc: d, grants: slices.Clone(grants)}
}
