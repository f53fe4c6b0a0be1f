package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

// TestClaimsAfterHandOffsReadNothing: a claim made on the wake-up of a
// commit whose event went straight to its committer (direct hand-off)
// finds nothing due without asking the database, as long as the last look
// is recent. An event nobody claimed, a settlement, or another node's
// commit makes the next claim look again, and it finds what is due.
func TestClaimsAfterHandOffsReadNothing(t *testing.T) {
	t.Parallel()
	dbURL := freshDB(t)
	st := openAt(t, dbURL)
	defer st.Close()
	st.dueLife = time.Hour // the memo outlives the test, however slow
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	now := time.Now()
	claim := func(what string, reads int64, want ...int64) {
		t.Helper()
		before := st.dueReads.Load()
		evs, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: now, Limit: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		if got := seqsOf(evs); !slices.Equal(got, want) {
			t.Fatalf("%s: claimed %v, want %v", what, got, want)
		}
		if got := st.dueReads.Load() - before; got != reads {
			t.Fatalf("%s: %d looks at events_due, want %d", what, got, reads)
		}
	}
	handOff := func(id string) {
		t.Helper()
		w := &store.Write{AppID: app, DB: "jobs", ID: id, Rev: "1-a", Body: []byte(`{}`), Path: "http", Time: now,
			Event: &store.EventSpec{NextAt: now, ClaimUntil: now.Add(time.Minute)}}
		if _, err := st.Commit(ctx, w); err != nil || !w.Event.Claimed {
			t.Fatalf("hand-off commit: claimed %v, %v", w.Event.Claimed, err)
		}
	}

	claim("first claim", 1)
	handOff("a")
	claim("claim after a hand-off", 0)
	// The memo took in the handed-off event's lease.
	at, ok, err := st.NextEventDue(ctx, app)
	if err != nil || !ok || !at.Equal(fromNanos(now.Add(time.Minute).UnixNano())) {
		t.Fatalf("NextEventDue = %v, %v, %v; want the lease's end", at, ok, err)
	}
	if st.dueReads.Load() != 1 {
		t.Fatalf("NextEventDue looked again: %d looks", st.dueReads.Load())
	}

	b := putEvent(t, st, app, "b", now) // nobody claims it
	claim("claim after an unclaimed event", 1, b)
	handOff("c")
	claim("claim after a hand-off, again", 1) // the claim of b read nothing new
	claim("and again", 0)

	// A settlement may bring an event due.
	if err := st.SettleEvent(ctx, app, b, store.Settlement{Attempts: 1, NextAt: now}); err != nil {
		t.Fatal(err)
	}
	claim("claim after a retry was set", 1, b)
	claim("nothing left", 1)

	// Another node's commit, heard by its notification.
	other := openAt(t, dbURL)
	defer other.Close()
	heard := st.watch.heard.Load()
	d := putEvent(t, other, app, "d", now)
	waitUntil(t, 30*time.Second, "the other node's commit to be heard", func() bool {
		_, memo := st.dues.get(app)
		return st.watch.heard.Load() > heard && !memo
	})
	claim("claim after another node's commit", 1, d)
}

// TestMemoOfALookOvertaken: a look at events_due under way while the
// app's events change (a commit of an event nobody claimed, a settlement)
// read them as they were, and leaves no memo: the claim on the change's
// wake-up looks again and finds what is due.
func TestMemoOfALookOvertaken(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	st.dueLife = time.Hour
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	now := time.Now()
	claim := func() []int64 {
		t.Helper()
		evs, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: now, Limit: 10, Lease: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		return seqsOf(evs)
	}
	// A commit lands while the first claim's look is under way.
	var b int64
	st.afterDueRead = func() { st.afterDueRead = nil; b = putEvent(t, st, app, "b", now) }
	if got := claim(); len(got) != 0 {
		t.Fatalf("first claim took %v", got)
	}
	if got := claim(); !slices.Equal(got, []int64{b}) {
		t.Fatalf("claim after the commit took %v, want [%d]", got, b)
	}
	// A retry due at once is set while a look is under way.
	st.afterDueRead = func() {
		st.afterDueRead = nil
		if err := st.SettleEvent(ctx, app, b, store.Settlement{Attempts: 1, NextAt: now}); err != nil {
			t.Error(err)
		}
	}
	if got := claim(); len(got) != 0 {
		t.Fatalf("claim during the settlement took %v", got)
	}
	if got := claim(); !slices.Equal(got, []int64{b}) {
		t.Fatalf("claim after the retry was set took %v, want [%d]", got, b)
	}
}

// TestDueMemoDroppedDuringALook: the memo a look stores is refused once
// the app's memo was dropped after the look began.
func TestDueMemoDroppedDuringALook(t *testing.T) {
	var d dueMemos
	drops := d.drops(7)
	d.drop(7)
	d.set(7, drops, dueMemo{ok: false, read: time.Now()})
	if _, ok := d.get(7); ok {
		t.Fatal("a look begun before a drop stored its memo")
	}
	d.set(7, d.drops(7), dueMemo{ok: true, at: 5, read: time.Now()})
	d.leased(7, 3)
	if m, ok := d.get(7); !ok || m.at != 3 {
		t.Fatalf("memo after a lease ending at 3: %+v, %v", m, ok)
	}
}
