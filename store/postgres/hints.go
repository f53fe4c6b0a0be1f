package postgres

import (
	"slices"
	"sync"

	"github.com/handoff-run/handoff/store"
)

// Every write first reads its document's head, a round trip here. Most
// writes follow a write or a read this node just made of the same
// document (a job's claim follows its put, its finish its claim), so the
// node remembers the heads it committed and read and hands them out as
// hints (store.HeadHinter). Another node may have moved a head since:
// the commit checks every write's base rev against the locked head, so a
// stale hint costs one retry, never a wrong write.

const (
	// maxHints and maxHintBytes bound the memory: enough for the heads a
	// busy node is working on, nowhere near a whole database.
	maxHints     = 16384
	maxHintBytes = 32 << 20
	// maxHintBody keeps big documents out: one would crowd out many.
	maxHintBody = 64 << 10
)

type hintKey struct {
	app    int64
	db, id string
}

// hints maps documents to their latest known heads. Eviction is by
// whichever entry the map yields first, which is as good as any order for
// hints: a miss costs only the read it would have saved.
type hints struct {
	mu    sync.Mutex
	m     map[hintKey]*store.Doc
	bytes int
}

func docBytes(k hintKey, d *store.Doc) int {
	n := 160 + len(k.db) + len(k.id) + len(d.Rev) + len(d.Body)
	for _, c := range d.Channels {
		n += 16 + len(c)
	}
	return n
}

// put remembers d as the head of k unless a later head is known already:
// two commits of one document may finish in either order here.
func (h *hints) put(k hintKey, d *store.Doc) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.m[k]
	if old != nil && old.Seq > d.Seq {
		return
	}
	if old != nil {
		h.bytes -= docBytes(k, old)
		delete(h.m, k)
	}
	if len(d.Body) > maxHintBody {
		return
	}
	if h.m == nil {
		h.m = map[hintKey]*store.Doc{}
	}
	n := docBytes(k, d)
	for kk, dd := range h.m {
		if len(h.m) < maxHints && h.bytes+n <= maxHintBytes {
			break
		}
		h.bytes -= docBytes(kk, dd)
		delete(h.m, kk)
	}
	h.m[k] = d
	h.bytes += n
}

func (h *hints) get(k hintKey) *store.Doc {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.m[k]
}

// drop forgets k, whose hint proved stale.
func (h *hints) drop(k hintKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.m[k]; old != nil {
		h.bytes -= docBytes(k, old)
		delete(h.m, k)
	}
}

// HeadHint returns the latest head of the document this node committed or
// read, or nil; see store.HeadHinter.
func (s *Store) HeadHint(appID int64, db, id string) *store.Doc {
	return s.hints.get(hintKey{appID, db, id})
}

// committedHead is the head a committed write leaves, as Get reads it.
func committedHead(w *store.Write, seq int64, hasGrants bool) *store.Doc {
	d := &store.Doc{DB: w.DB, ID: w.ID, Rev: w.Rev, Deleted: w.Deleted, Seq: seq, Time: fromNanos(w.Time.UnixNano()),
		Channels: slices.Clone(w.Channels), HasGrants: hasGrants}
	if !w.Deleted {
		d.Body = slices.Clone(w.Body) // the caller's buffer is its own
	}
	return d
}
