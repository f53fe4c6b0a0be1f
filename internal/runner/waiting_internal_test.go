package runner

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/store"
)

// settleOnly is a store whose settlements succeed; nothing else is called.
type settleOnly struct{ store.Store }

func (settleOnly) SettleEvent(context.Context, int64, int64, store.Settlement) error { return nil }

// TestBacklogFollowsTheOutbox: the backlog that keeps commits off the
// waiting list is marked when an event may be due unclaimed and cleared
// only by a claim that began after the last mark. An event a commit left
// in the outbox behind one of its document that this node holds falls due
// when that one settles; a give-back is due at once; an event left in
// the outbox alone makes nothing due when it settles. It goes through
// the entry points the engine and the runs use: Slot.Cancel, Poke and
// settle, on an app runner whose loops are not running.
func TestBacklogFollowsTheOutbox(t *testing.T) {
	const concurrency = 4
	r := &Runner{st: settleOnly{}, clock: clock.NewVirtual(time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)),
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), ctx: context.Background(), apps: map[int64]*appRunner{}}
	ar := &appRunner{r: r, id: 1, wake: make(chan struct{}, 1), inflight: concurrency, waiting: make([]waitingRun, 3)}
	r.apps[1] = ar
	app := App{ID: 1}
	event := func(seq int64, id string) store.Event {
		return store.Event{AppID: 1, Seq: seq, Rev: store.Revision{Doc: store.Doc{DB: "jobs", ID: id}}}
	}
	clear := func() {
		t.Helper()
		ar.mu.Lock()
		gen := ar.backlogGen
		ar.mu.Unlock()
		ar.caughtUp(gen) // a claim that began now came back short
		if !ar.fits(concurrency) {
			t.Fatal("the backlog stayed after a claim that saw the outbox came back short")
		}
	}
	if !ar.fits(concurrency) {
		t.Fatal("no room on the waiting list with one place free and no backlog")
	}
	ar.hold([]store.Event{event(1, "d0")}) // d0's first event runs here

	// A claim begins; then a commit of d0 finds the store will not claim
	// its event (d0's first is live), so it goes to the outbox.
	ar.mu.Lock()
	before := ar.backlogGen
	ar.mu.Unlock()
	(&Slot{ar: ar, doc: docKey{"jobs", "d0"}}).Cancel()
	ar.caughtUp(before)
	if ar.fits(concurrency) {
		t.Fatal("a claim that began before an event went to the outbox cleared the backlog")
	}
	clear() // d0's second event is not due yet

	// A commit that found no room: Poke, after the commit, marks again,
	// whatever a claim between its reservation and its commit saw.
	r.Poke(app)
	if ar.fits(concurrency) {
		t.Fatal("Poke did not mark the backlog")
	}
	clear()

	r.settle(ar, event(9, "other"), store.Settlement{Ack: true})
	if !ar.fits(concurrency) {
		t.Fatal("the settlement of a document with nothing behind it marked the backlog")
	}
	r.settle(ar, event(1, "d0"), store.Settlement{Ack: true}) // d0's first is done: its second is due
	if ar.fits(concurrency) {
		t.Fatal("a commit may take the waiting list ahead of d0's event that fell due")
	}
	clear()
	r.settle(ar, event(10, "other"), store.Settlement{NextAt: r.clock.Now()}) // given back: due at once
	if ar.fits(concurrency) {
		t.Fatal("a give-back did not mark the backlog")
	}
	clear()
	r.settle(ar, event(11, "other"), store.Settlement{Attempts: 1, NextAt: r.clock.Now().Add(time.Minute)})
	if !ar.fits(concurrency) {
		t.Fatal("a retry due later marked the backlog")
	}
}
