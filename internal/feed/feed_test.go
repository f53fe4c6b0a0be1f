package feed_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/handoff-run/handoff/internal/feed"
	"github.com/handoff-run/handoff/store"
)

// ledger is a Source of one app's revisions, seq 1 to n, that counts its
// reads of the ledger.
type ledger struct {
	mu    sync.Mutex
	revs  []store.Revision
	reads int
}

func (l *ledger) commit(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range n {
		seq := int64(len(l.revs) + 1)
		l.revs = append(l.revs, store.Revision{Doc: store.Doc{DB: "d", ID: fmt.Sprint("x", seq), Seq: seq, Body: []byte(`{}`)}})
	}
}

func (l *ledger) LastSeq(context.Context, int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return int64(len(l.revs)), nil
}

func (l *ledger) Changes(_ context.Context, _ int64, _ string, since int64, limit int) ([]store.Revision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	end := min(int64(len(l.revs)), since+int64(limit))
	if since >= end {
		return nil, nil
	}
	return append([]store.Revision(nil), l.revs[since:end]...), nil
}

func (l *ledger) readCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reads
}

// wantSeqs checks that revs are the seqs from, from+1, … to.
func wantSeqs(t *testing.T, what string, revs []store.Revision, from, to int64) {
	t.Helper()
	if int64(len(revs)) != to-from+1 {
		t.Fatalf("%s: %d revisions, want seqs %d to %d", what, len(revs), from, to)
	}
	for i, r := range revs {
		if r.Seq != from+int64(i) {
			t.Fatalf("%s: revision %d has seq %d, want %d", what, i, r.Seq, from+int64(i))
		}
	}
}

// TestFollowersShareOneRead: followers of one app are woken by a commit,
// and the first to read the new revisions reads them from the ledger for
// all: the others copy them from the ring.
func TestFollowersShareOneRead(t *testing.T) {
	ctx := context.Background()
	l := &ledger{}
	l.commit(3)
	h := feed.NewHub(l, feed.Limits{})
	a, err := h.Open(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := h.Open(ctx, 1)
	defer a.Close()
	defer b.Close()
	last, wake := a.State()
	if last != 3 {
		t.Fatalf("latest seq %d, want 3", last)
	}
	l.commit(2)
	h.Notify(1, 5)
	select {
	case <-wake:
	default:
		t.Fatal("a commit did not wake the app's followers")
	}
	if last, _ = b.State(); last != 5 {
		t.Fatalf("latest seq after the commit %d, want 5", last)
	}
	h.Notify(1, 4) // heard late: seqs only grow
	if last, _ = b.State(); last != 5 {
		t.Fatalf("latest seq after an older notice %d, want 5", last)
	}
	revs, err := a.Read(ctx, 3, 5, 100)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, "first follower", revs, 4, 5)
	before := l.readCount()
	revs, _ = b.Read(ctx, 3, 5, 100)
	wantSeqs(t, "second follower", revs, 4, 5)
	if n := l.readCount() - before; n != 0 {
		t.Fatalf("the second follower read the ledger %d times; the ring had its revisions", n)
	}
	h.Notify(2, 9) // an app nobody follows: nothing to do
}

// TestFollowerBehindTheRingReadsTheLedger: a follower resuming from a seq
// the ring no longer holds gets every revision after it, in order, and
// within its limit.
func TestFollowerBehindTheRingReadsTheLedger(t *testing.T) {
	ctx := context.Background()
	l := &ledger{}
	h := feed.NewHub(l, feed.Limits{})
	a, _ := h.Open(ctx, 1)
	defer a.Close()
	l.commit(6000) // more than the ring holds
	h.Notify(1, 6000)
	revs, err := a.Read(ctx, 5990, 6000, 100)
	if err != nil {
		t.Fatal(err)
	}
	wantSeqs(t, "live follower", revs, 5991, 6000)
	for since := int64(0); since < 6000; since += int64(len(revs)) {
		if revs, err = a.Read(ctx, since, 6000, 500); err != nil || len(revs) == 0 {
			t.Fatalf("read after %d: %d revisions, %v", since, len(revs), err)
		}
		wantSeqs(t, fmt.Sprint("backlog after ", since), revs, since+1, since+int64(len(revs)))
	}
}

// TestLastFollowerLetsTheRingGo: once an app's last follower closes, its
// revisions are let go; a new follower reads them from the ledger again.
func TestLastFollowerLetsTheRingGo(t *testing.T) {
	ctx := context.Background()
	l := &ledger{}
	l.commit(4)
	h := feed.NewHub(l, feed.Limits{})
	a, _ := h.Open(ctx, 1)
	if _, err := a.Read(ctx, 0, 4, 10); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b, _ := h.Open(ctx, 1)
	defer b.Close()
	before := l.readCount()
	revs, _ := b.Read(ctx, 0, 4, 10)
	wantSeqs(t, "after the ring was let go", revs, 1, 4)
	if l.readCount() == before {
		t.Fatal("the ring outlived the app's last follower")
	}
}
