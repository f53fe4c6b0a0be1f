package postgres

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

func ackQueue(st *Store) int {
	st.acks.mu.Lock()
	defer st.acks.mu.Unlock()
	return len(st.acks.queue)
}

// TestAcksShareTransactions: acks that arrive while one is being written
// wait for it and are then written together, in one transaction. Each
// returns once its event is gone; one whose caller gives up while it is
// still queued is not written, and its event stays leased.
func TestAcksShareTransactions(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	const n = 20
	var seqs []int64
	for i := range n + 1 {
		seqs = append(seqs, putEvent(t, st, app, string(rune('a'+i)), t0))
	}
	evs, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0, Limit: n + 1, Lease: time.Minute})
	if err != nil || len(evs) != n+1 {
		t.Fatalf("claim = %d events, %v", len(evs), err)
	}

	// Hold the first event's row: the first flush waits for it, and the
	// acks behind it queue.
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM events WHERE app_id = $1 AND seq = $2 FOR UPDATE`, app, seqs[0]); err != nil {
		t.Fatal(err)
	}
	errsOut := make([]error, n+1)
	var wg sync.WaitGroup
	wg.Go(func() { errsOut[0] = st.SettleEvent(ctx, app, seqs[0], store.Settlement{Ack: true}) })
	waitUntil(t, 30*time.Second, "the first flush to wait for the row", func() bool { return lockWaiters(t, st) == 1 })
	cctx, cancel := context.WithCancel(ctx)
	gone := make(chan error, 1)
	go func() { gone <- st.SettleEvent(cctx, app, seqs[n], store.Settlement{Ack: true}) }()
	for i := 1; i < n; i++ {
		wg.Go(func() { errsOut[i] = st.SettleEvent(ctx, app, seqs[i], store.Settlement{Ack: true}) })
	}
	waitUntil(t, 30*time.Second, "the acks to queue", func() bool { return ackQueue(st) == n })
	cancel()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled queued ack = %v, want context.Canceled", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range errsOut[:n] {
		if err != nil {
			t.Fatalf("ack of seq %d: %v", seqs[i], err)
		}
	}
	if got := st.acks.flushes.Load(); got != 2 {
		t.Errorf("%d acks took %d transactions, want 2 (the first, then the rest together)", n, got)
	}
	left, err := st.ListEvents(ctx, app, false, 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 1 || left[0].Seq != seqs[n] {
		t.Fatalf("events left = %v, want only the cancelled ack's seq %d", seqsOf(left), seqs[n])
	}
	// Still leased: not handed out again before its lease ends.
	if again, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0, Limit: 10, Lease: time.Minute}); err != nil || len(again) != 0 {
		t.Fatalf("claim before the lease ends = %v, %v", seqsOf(again), err)
	}
}

// TestAckAfterClose: an ack that comes after Close is refused with the
// store's error, not sent to a closed pool.
func TestAckAfterClose(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	app := newApp(t, st, "jobs")
	seq := putEvent(t, st, app, "a", t0)
	st.Close()
	if err := st.SettleEvent(context.Background(), app, seq, store.Settlement{Ack: true}); !errors.Is(err, errClosed) {
		t.Fatalf("ack after Close = %v, want %v", err, errClosed)
	}
}

// TestAckFlushTimesOut: a flush that cannot finish (here, its row is
// locked) gives up after its timeout with an error, the event stays
// leased, and the acks queued behind it still go through.
func TestAckFlushTimesOut(t *testing.T) {
	// Not parallel: it lowers ackTimeout, which every store of the
	// package reads.
	st := openAt(t, freshDB(t))
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	a := putEvent(t, st, app, "a", t0)
	b := putEvent(t, st, app, "b", t0)
	if evs, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0, Limit: 10, Lease: time.Minute}); err != nil || len(evs) != 2 {
		t.Fatalf("claim = %d events, %v", len(evs), err)
	}
	old := ackTimeout
	ackTimeout = 200 * time.Millisecond
	t.Cleanup(func() { ackTimeout = old })
	tx, err := st.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT 1 FROM events WHERE app_id = $1 AND seq = $2 FOR UPDATE`, app, a); err != nil {
		t.Fatal(err)
	}
	if err := st.SettleEvent(ctx, app, a, store.Settlement{Ack: true}); err == nil {
		t.Fatal("ack of a locked row succeeded; want the flush to time out")
	}
	ackTimeout = old // the next flush is not on a clock of 200 ms on a loaded machine
	if err := st.SettleEvent(ctx, app, b, store.Settlement{Ack: true}); err != nil {
		t.Fatalf("ack after a timed-out flush: %v", err)
	}
	left, err := st.ListEvents(ctx, app, false, 0, -1)
	if err != nil || len(left) != 1 || left[0].Seq != a {
		t.Fatalf("events left = %v, %v; want only %d", seqsOf(left), err, a)
	}
}
