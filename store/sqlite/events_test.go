package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

// TestNextEventDue follows an app's outbox through the claim cursor's
// modes: NextEventDue names the earliest event that is neither held nor
// dead, whether the answer comes from the cursor or from a full scan.
func TestNextEventDue(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir())
	app := newApp(t, st)
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 0)
	commit := func(id string, at time.Time) {
		t.Helper()
		w := put(app, "jobs", id, `{}`)
		w.Time, w.Event = at, &store.EventSpec{NextAt: at}
		if _, err := st.Commit(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	due := func(want time.Time, wantOK bool) {
		t.Helper()
		at, ok, err := st.NextEventDue(ctx, app)
		if err != nil || ok != wantOK || (ok && !at.Equal(want)) {
			t.Fatalf("NextEventDue = %v, %v, %v; want %v, %v", at, ok, err, want, wantOK)
		}
	}
	due(time.Time{}, false)
	for i := range 3 {
		commit(fmt.Sprint("j", i), t0.Add(time.Duration(i)*time.Millisecond))
	}
	due(t0, true)
	evs, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0.Add(time.Second), Limit: 10, Lease: time.Minute})
	if err != nil || len(evs) != 3 {
		t.Fatalf("claim: %d events, %v", len(evs), err)
	}
	due(time.Time{}, false) // all held

	commit("j3", t0.Add(2*time.Second))
	due(t0.Add(2*time.Second), true) // above the cursor

	// A retry: the event is released and due again later.
	retryAt := t0.Add(10 * time.Second)
	if err := st.SettleEvent(ctx, app, evs[0].Seq, store.Settlement{Attempts: 1, NextAt: retryAt, LastError: "boom"}); err != nil {
		t.Fatal(err)
	}
	if err := st.SettleEvent(ctx, app, evs[1].Seq, store.Settlement{Ack: true}); err != nil {
		t.Fatal(err)
	}
	commit("j4", t0.Add(3*time.Second)) // behind the settlements in the writer's queue
	left, err := st.ListEvents(ctx, app, false, 0, 100)
	if err != nil || len(left) != 4 || left[0].Seq != evs[0].Seq || left[1].Seq != evs[2].Seq {
		t.Fatalf("after one ack and one retry the outbox holds %+v, %v; want all but seq %d", left, err, evs[1].Seq)
	}
	due(t0.Add(2*time.Second), true)
	evs, err = st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0.Add(4 * time.Second), Limit: 10, Lease: time.Minute})
	if err != nil || len(evs) != 2 {
		t.Fatalf("second claim: %d events, %v", len(evs), err)
	}
	due(retryAt, true) // only the retry is left unheld
	if err := st.SettleEvent(ctx, app, evs[0].Seq, store.Settlement{Dead: true, Attempts: 5, NextAt: t0}); err != nil {
		t.Fatal(err)
	}
	commit("j5", t0.Add(5*time.Second))
	due(t0.Add(5*time.Second), true) // the dead one, at t0, does not count
}

// TestClaimAfterManyRetries: when as many retries fall due at once as a
// claim takes, the full scan stops at its limit below events that are
// still leased; the claims after it must not hand those out again.
func TestClaimAfterManyRetries(t *testing.T) {
	t.Parallel()
	st := open(t, t.TempDir())
	app := newApp(t, st)
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 0)
	for i := range 30 {
		w := put(app, "jobs", fmt.Sprint("j", i), `{}`)
		w.Time, w.Event = t0, &store.EventSpec{NextAt: t0}
		if _, err := st.Commit(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	handed := map[int64]int{}
	claim := func(at time.Time) []store.Event {
		t.Helper()
		evs, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: at, Limit: 10, Lease: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			handed[ev.Seq]++
		}
		return evs
	}
	var first []store.Event
	for range 3 {
		first = append(first, claim(t0)...)
	}
	if len(first) != 30 {
		t.Fatalf("claimed %d of 30", len(first))
	}
	// As after shedding a backlog: memory no longer answers, the outbox does.
	st.recent.mu.Lock()
	st.recent.apps[app].covered = 1 << 62
	st.recent.mu.Unlock()
	retryAt := t0.Add(10 * time.Second)
	for _, ev := range first[:10] {
		if err := st.SettleEvent(ctx, app, ev.Seq, store.Settlement{Attempts: 1, NextAt: retryAt, LastError: "x"}); err != nil {
			t.Fatal(err)
		}
	}
	// The writer runs its queue in order: once this commit returns, the
	// settlements queued before it have landed and released their leases.
	if _, err := st.Commit(ctx, put(app, "other", "fence", `{}`)); err != nil {
		t.Fatal(err)
	}
	later := retryAt.Add(time.Second)
	if evs := claim(later); len(evs) != 10 || evs[0].Attempts != 1 {
		t.Fatalf("the due retries: %d events", len(evs))
	}
	for range 3 {
		if evs := claim(later); len(evs) != 0 {
			t.Fatalf("a claim handed out %d leased events again (seq %d…)", len(evs), evs[0].Seq)
		}
	}
	for seq, n := range handed {
		if want := map[bool]int{true: 2, false: 1}[seq <= first[9].Seq]; n != want {
			t.Errorf("seq %d handed out %d times, want %d", seq, n, want)
		}
	}
}
