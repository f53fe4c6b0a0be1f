package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/handoff-run/handoff/store"
)

// TestHeadsServeCommittedWrites: a head the writer committed is read from
// memory, with its grants, and the next write to it checks against that.
func TestHeadsServeCommittedWrites(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir())
	app := newApp(t, st)
	ctx := context.Background()
	w := put(app, "jobs", "j1", `{"status":"pending"}`)
	w.Channels = []string{"jobs"}
	w.Grants = []store.Grant{{Kind: "public", Channel: "jobs"}}
	if _, err := st.Commit(ctx, w); err != nil {
		t.Fatal(err)
	}
	// Reads that miss the cache now fail: what comes back is the cache's.
	st.rdb.Close()
	d, err := st.Get(ctx, app, "jobs", "j1")
	if err != nil || d == nil {
		t.Fatalf("Get of a committed head = %v, %v; want it from memory", d, err)
	}
	if d.Rev != "1-a" || string(d.Body) != `{"status":"pending"}` || !d.HasGrants || len(d.Channels) != 1 {
		t.Fatalf("cached head %+v", d)
	}
	if _, err := st.Get(ctx, app, "jobs", "other"); err == nil {
		t.Fatal("Get of a head never written answered without the database")
	}
	// The writer checks the base rev and the grants against memory: the
	// same grants are no change, and a stale base is refused.
	next := put(app, "jobs", "j1", `{"status":"running"}`)
	next.BaseRev, next.Rev, next.Grants = "1-a", "2-b", w.Grants
	if _, err := st.Commit(ctx, next); err != nil || next.GrantsChanged {
		t.Fatalf("second write: %v, grants changed %v", err, next.GrantsChanged)
	}
	stale := put(app, "jobs", "j1", `{}`)
	stale.BaseRev, stale.Rev = "1-a", "2-c"
	if _, err := st.Commit(ctx, stale); err != store.ErrHeadMoved {
		t.Fatalf("write on a stale base: %v, want ErrHeadMoved", err)
	}
	if d, _ := st.Get(ctx, app, "jobs", "j1"); d == nil || d.Rev != "2-b" {
		t.Fatalf("head after the second write %+v", d)
	}
}

// TestHeadsBounded: the cache keeps the newest heads up to its bound and
// leaves big documents to the database.
func TestHeadsBounded(t *testing.T) {
	t.Parallel()
	var h heads
	var hs []*head
	for i := range headsMax + 10 {
		hs = append(hs, &head{key: store.DocKey{App: 1, DB: "d", ID: fmt.Sprint(i)}, doc: store.Doc{Rev: "1-a"}})
	}
	h.put(hs)
	if len(h.m) != headsMax || h.lru.Len() != headsMax {
		t.Fatalf("%d heads cached, want %d", len(h.m), headsMax)
	}
	if h.get(store.DocKey{App: 1, DB: "d", ID: "0"}) != nil || h.get(store.DocKey{App: 1, DB: "d", ID: fmt.Sprint(headsMax + 9)}) == nil {
		t.Fatal("the oldest heads should go first")
	}
	big := &head{key: store.DocKey{App: 1, DB: "d", ID: "5000"}, doc: store.Doc{Rev: "2-b", Body: bytes.Repeat([]byte("x"), store.HeadCacheBodyMax+1)}}
	h.put([]*head{big})
	if h.get(big.key) != nil {
		t.Fatal("a document over store.HeadCacheBodyMax was cached")
	}
	// And by bytes.
	var b heads
	for i := range store.HeadCacheBytes/store.HeadCacheBodyMax + 10 {
		b.put([]*head{{key: store.DocKey{App: 1, DB: "d", ID: fmt.Sprint(i)}, doc: store.Doc{Body: make([]byte, store.HeadCacheBodyMax)}}})
	}
	if b.bytes > store.HeadCacheBytes {
		t.Fatalf("%d bytes of heads cached, bound %d", b.bytes, store.HeadCacheBytes)
	}
	// A head about to be replaced is read from the database until put.
	k := store.DocKey{App: 1, DB: "d", ID: fmt.Sprint(store.HeadCacheBytes/store.HeadCacheBodyMax + 9)}
	b.forget([]*head{{key: k}})
	if b.get(k) != nil {
		t.Fatal("a head being replaced is still served from memory")
	}
}

// TestNewDocumentCheckedByItsInsert: a write that takes its document to
// be new is not looked up when the cache does not hold the document; the
// head's insert is the check. A document that exists after all (written
// before the store was opened, so not cached) is refused with
// ErrHeadMoved, and the refusal costs no sequence number and leaves the
// rest of the transaction to commit.
func TestNewDocumentCheckedByItsInsert(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir)
	app := newApp(t, st)
	ctx := context.Background()
	if _, err := st.Commit(ctx, put(app, "jobs", "j1", `{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	st.Close()
	st = open(t, dir)

	dup := put(app, "jobs", "j1", `{"n":2}`)
	dup.Rev = "1-b"
	other := put(app, "jobs", "j2", `{"n":3}`)
	// One transaction for both: the writer is held by an op until both
	// are queued, then takes them together.
	hold, held := make(chan struct{}), make(chan struct{})
	if err := st.enqueue(func(*sql.Tx) error { close(held); <-hold; return nil }, nil); err != nil {
		t.Fatal(err)
	}
	<-held
	var wg sync.WaitGroup
	errs := make([]error, 2)
	seqs := make([]int64, 2)
	wg.Go(func() { seqs[0], errs[0] = st.Commit(ctx, dup) })
	for len(st.writes) < 1 {
		runtime.Gosched()
	}
	wg.Go(func() { seqs[1], errs[1] = st.Commit(ctx, other) })
	for len(st.writes) < 2 {
		runtime.Gosched()
	}
	close(hold)
	wg.Wait()
	if errs[0] != store.ErrHeadMoved {
		t.Fatalf("new write of an existing document: %v, want ErrHeadMoved", errs[0])
	}
	if errs[1] != nil || seqs[1] != 2 {
		t.Fatalf("the other write of the transaction: seq %d, %v; want seq 2", seqs[1], errs[1])
	}
	if d, err := st.Get(ctx, app, "jobs", "j1"); err != nil || d == nil || d.Rev != "1-a" {
		t.Fatalf("j1 after the refused write: %+v, %v", d, err)
	}
	if seq, err := st.LastSeq(ctx, app); err != nil || seq != 2 {
		t.Fatalf("last seq %d, %v; want 2", seq, err)
	}
}
