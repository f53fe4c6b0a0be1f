package feed_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/handoff-run/handoff/internal/feed"
	"github.com/handoff-run/handoff/store"
)

// ledger is a Source of one app's revisions that counts its reads of
// the ledger. Its seqs are 1 to n, or with step, 1, 1+step, 1+2*step, …
type ledger struct {
	mu    sync.Mutex
	step  int64
	revs  []store.Revision
	reads int
}

func (l *ledger) commit(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for range n {
		seq := int64(len(l.revs))*max(l.step, 1) + 1
		l.revs = append(l.revs, store.Revision{Doc: store.Doc{DB: "d", ID: fmt.Sprint("x", seq), Seq: seq, Body: []byte(`{}`)}})
	}
}

func (l *ledger) LastSeq(context.Context, int64) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.revs) == 0 {
		return 0, nil
	}
	return l.revs[len(l.revs)-1].Seq, nil
}

func (l *ledger) Changes(_ context.Context, _ int64, _ string, since int64, limit int) ([]store.Revision, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reads++
	i := sort.Search(len(l.revs), func(i int) bool { return l.revs[i].Seq > since })
	return slices.Clone(l.revs[i:min(len(l.revs), i+limit)]), nil
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

// TestRingWithGapsInSeqs: seqs only grow; a store may skip numbers. The
// ring serves a read from any position it covers, a number between two
// seqs included, and sends one from before what it covers to the ledger;
// either way the reader gets every revision after its position once, in
// order.
func TestRingWithGapsInSeqs(t *testing.T) {
	ctx := context.Background()
	l := &ledger{step: 3} // seqs 1, 4, 7, …
	l.commit(10)
	h := feed.NewHub(l, feed.Limits{Slots: 8})
	af, err := h.Open(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer af.Close()
	seqsAfter := func(since int64) []int64 {
		var out []int64
		for _, r := range l.revs {
			if r.Seq > since {
				out = append(out, r.Seq)
			}
		}
		return out
	}
	read := func(since int64) []int64 {
		t.Helper()
		last, _ := af.State()
		revs, err := af.Read(ctx, since, last, 100)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]int64, len(revs))
		for i, r := range revs {
			got[i] = r.Seq
		}
		return got
	}
	// The first read fills the ring with every revision after 7: seqs 10
	// to 28. Reads from 7 on, seqs or numbers between them, are the
	// ring's alone.
	covered := func(what string, since ...int64) {
		t.Helper()
		reads := l.readCount()
		for _, s := range since {
			if got, want := read(s), seqsAfter(s); !slices.Equal(got, want) {
				t.Fatalf("%s, from %d: %v, want %v", what, s, got, want)
			}
		}
		if n := l.readCount() - reads; n != 0 {
			t.Fatalf("%s: reads the ring covers went to the ledger %d times", what, n)
		}
	}
	if got, want := read(7), seqsAfter(7); !slices.Equal(got, want) {
		t.Fatalf("from 7: %v, want %v", got, want)
	}
	covered("first fill", 7, 8, 9, 10, 11, 27)
	// Before what the ring covers: from the ledger, still in full.
	for _, since := range []int64{0, 1, 4, 6} {
		if got, want := read(since), seqsAfter(since); !slices.Equal(got, want) {
			t.Fatalf("from %d: %v, want %v", since, got, want)
		}
	}
	// Two more commits (31 and 34) push the oldest (10) out of the 8
	// slots: the ring now covers every seq after 10.
	l.commit(2)
	last, _ := l.LastSeq(ctx, 1)
	h.Notify(1, last)
	if got, want := read(last-1), seqsAfter(last-1); !slices.Equal(got, want) {
		t.Fatalf("from %d: %v, want %v", last-1, got, want)
	}
	covered("after more commits", 10, 11, 12, 28, 31, 33)
	for _, since := range []int64{0, 7, 9} {
		if got, want := read(since), seqsAfter(since); !slices.Equal(got, want) {
			t.Fatalf("after more commits, from %d: %v, want %v", since, got, want)
		}
	}
}
