package runner

import "testing"

// TestBacklogFollowsTheOutbox: the backlog that keeps commits off the
// waiting list is marked when an event may be due unclaimed and cleared
// only by a claim that began after the last mark: an event left in the
// outbox behind an earlier one of its document falls due when that one
// settles, and a give-back is due at once.
func TestBacklogFollowsTheOutbox(t *testing.T) {
	const concurrency = 4
	d0 := docKey{"jobs", "d0"}
	ar := &appRunner{inflight: concurrency, waiting: make([]waitingRun, 3)}
	if !ar.fits(concurrency) {
		t.Fatal("no room on the waiting list with one place free and no backlog")
	}
	// A claim begins; then d0's second event goes to the outbox behind
	// its first, which is live.
	ar.mu.Lock()
	before := ar.backlogGen
	ar.toOutbox(d0)
	ar.mu.Unlock()
	ar.caughtUp(before) // the claim that began before came back short
	if ar.fits(concurrency) {
		t.Fatal("a claim that began before an event went to the outbox cleared the backlog")
	}
	ar.mu.Lock()
	gen := ar.backlogGen
	ar.mu.Unlock()
	ar.caughtUp(gen) // a later claim came back short: d0's event is not due
	if !ar.fits(concurrency) {
		t.Fatal("the backlog stayed after a claim that saw the outbox came back short")
	}
	ar.settled(docKey{"jobs", "other"}, false)
	if !ar.fits(concurrency) {
		t.Fatal("a settlement of a document with nothing in the outbox marked the backlog")
	}
	ar.settled(d0, false) // d0's first event is acked: its second is due
	if ar.fits(concurrency) {
		t.Fatal("a commit may take the waiting list ahead of d0's event that fell due")
	}
	ar.mu.Lock()
	gen = ar.backlogGen
	ar.mu.Unlock()
	ar.caughtUp(gen)
	ar.settled(docKey{"jobs", "other"}, true) // given back: due at once
	if ar.fits(concurrency) {
		t.Fatal("a give-back did not mark the backlog")
	}
}
