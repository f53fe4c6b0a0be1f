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

// maxHints bounds the entries (and store.HeadCacheBytes their size):
// enough for the heads a busy node is working on.
const maxHints = 16384

// hints maps documents to their latest known heads. Eviction is by
// whichever entry the map yields first, which is as good as any order for
// hints: a miss costs only the read it would have saved.
type hints struct {
	mu    sync.Mutex
	m     map[store.DocKey]*hint
	bytes int
}

// hint is a head, and, when this node committed it, the grants it gives:
// a batch whose heads are all such hints can trust them instead of
// reading them (expect.go).
type hint struct {
	doc    *store.Doc
	grants []store.Grant
	known  bool // grants are the head's
}

func docBytes(k store.DocKey, d *store.Doc) int {
	n := 160 + len(k.DB) + len(k.ID) + len(d.Rev) + len(d.Body)
	for _, c := range d.Channels {
		n += 16 + len(c)
	}
	return n
}

// put remembers d as the head of k unless a later head is known already:
// two commits of one document may finish in either order here.
func (h *hints) put(k store.DocKey, d *store.Doc) { h.add(k, &hint{doc: d}) }

// putCommitted remembers the head a commit of this node left, with the
// grants it gives.
func (h *hints) putCommitted(k store.DocKey, d *store.Doc, grants []store.Grant) {
	h.add(k, &hint{doc: d, grants: slices.Clone(grants), known: true})
}

func (h *hints) add(k store.DocKey, e *hint) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old := h.m[k]
	if old != nil && old.doc.Seq > e.doc.Seq {
		return
	}
	if old != nil && old.known && !e.known && old.doc.Seq == e.doc.Seq {
		// A read of the head this node committed: the grants still hold.
		e.grants, e.known = old.grants, true
	}
	if old != nil {
		h.bytes -= hintBytes(k, old)
		delete(h.m, k)
	}
	if len(e.doc.Body) > store.HeadCacheBodyMax {
		return
	}
	if h.m == nil {
		h.m = map[store.DocKey]*hint{}
	}
	n := hintBytes(k, e)
	for kk, ee := range h.m {
		if len(h.m) < maxHints && h.bytes+n <= store.HeadCacheBytes {
			break
		}
		h.bytes -= hintBytes(kk, ee)
		delete(h.m, kk)
	}
	h.m[k] = e
	h.bytes += n
}

func hintBytes(k store.DocKey, e *hint) int {
	n := docBytes(k, e.doc)
	for _, g := range e.grants {
		n += 48 + len(g.Kind) + len(g.Principal) + len(g.Channel)
	}
	return n
}

func (h *hints) get(k store.DocKey) *store.Doc {
	h.mu.Lock()
	defer h.mu.Unlock()
	if e := h.m[k]; e != nil {
		return e.doc
	}
	return nil
}

// committed is the hint of k if this node committed it, grants known.
func (h *hints) committed(k store.DocKey) (*hint, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e := h.m[k]
	return e, e != nil && e.known
}

// drop forgets k, whose hint proved stale.
func (h *hints) drop(k store.DocKey) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if old := h.m[k]; old != nil {
		h.bytes -= hintBytes(k, old)
		delete(h.m, k)
	}
}

// HeadHint returns the latest head of the document this node committed or
// read, or nil; see store.HeadHinter.
func (s *Store) HeadHint(appID int64, db, id string) *store.Doc {
	return s.hints.get(store.DocKey{App: appID, DB: db, ID: id})
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
