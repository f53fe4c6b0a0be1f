package sqlite

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

// TestRecentEventsMatchDatabase: events handed out from memory are the
// ones the outbox would give, field for field, including the replaced
// revision; after a reopen, when the writer no longer has the old body,
// the claim reads it from the database.
func TestRecentEventsMatchDatabase(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	st := open(t, dir)
	app := newApp(t, st)
	ctx := context.Background()
	t0 := time.Unix(1_800_000_000, 0)
	n := 0
	write := func(st *Store, id, base, rev, body string, deleted bool) {
		t.Helper()
		n++
		w := &store.Write{AppID: app, DB: "jobs", ID: id, BaseRev: base, Rev: rev, Deleted: deleted, Path: "onChange",
			Writer: store.Writer{User: "alice", Device: "d1", Handler: "onChange"}, Time: t0.Add(time.Duration(n) * time.Millisecond),
			Channels: []string{"jobs"}, Grants: []store.Grant{{Kind: "public", Channel: "jobs"}}, Event: &store.EventSpec{Depth: n % 3}}
		if !deleted {
			w.Body = []byte(body)
		}
		if d, _ := st.Get(ctx, app, "jobs", id); d != nil {
			w.PrevSeq = d.Seq
		}
		w.Event.NextAt = w.Time
		if _, err := st.Commit(ctx, w); err != nil {
			t.Fatal(err)
		}
	}
	// Leave full mode first, so the next claims may use memory.
	if evs, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0, Limit: 10, Lease: time.Minute}); err != nil || len(evs) != 0 {
		t.Fatalf("first claim: %v, %v", evs, err)
	}
	write(st, "a", "", "1-a", `{"status":"pending"}`, false)
	write(st, "a", "1-a", "2-a", `{"status":"running"}`, false)
	write(st, "b", "", "1-b", `{"n":1}`, false)
	write(st, "a", "2-a", "3-a", ``, true)
	want, err := st.ListEvents(ctx, app, false, 0, 100)
	if err != nil || len(want) != 4 {
		t.Fatalf("ListEvents: %d, %v", len(want), err)
	}
	// An exclusive claim takes a document's events together.
	got, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0.Add(time.Second), Limit: 10, Lease: time.Minute, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	if !sameEvents(got, want) {
		t.Fatalf("events from memory differ from the outbox:\n got %+v\nwant %+v", got, want)
	}

	// Reopened: the head of b is only in the database.
	st.Close()
	st = open(t, dir)
	// No leases survive a reopen: the four are due again.
	evs, err := st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0.Add(time.Second), Limit: 10, Lease: time.Minute, Exclusive: true})
	if err != nil || len(evs) != 4 {
		t.Fatalf("claim after reopen: %d, %v", len(evs), err)
	}
	write(st, "b", "1-b", "2-b", `{"n":2}`, false)
	write(st, "c", "", "1-c", `{}`, false)
	all, err := st.ListEvents(ctx, app, false, 0, 100)
	if err != nil || len(all) != 6 {
		t.Fatalf("ListEvents after reopen: %d, %v", len(all), err)
	}
	// Acked, the four no longer hold their documents back.
	for _, ev := range evs {
		if err := st.SettleEvent(ctx, app, ev.Seq, store.Settlement{Ack: true}); err != nil {
			t.Fatal(err)
		}
	}
	got, err = st.ClaimEvents(ctx, store.Claim{AppID: app, Now: t0.Add(time.Second), Limit: 10, Lease: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if !sameEvents(got, all[4:]) {
		t.Fatalf("events after reopen differ from the outbox:\n got %+v\nwant %+v", got, all[4:])
	}
	if got[0].Old == nil || string(got[0].Old.Body) != `{"n":1}` {
		t.Fatalf("the update of b lost its old body: %+v", got[0].Old)
	}
}

func sameEvents(a, b []store.Event) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if !x.NextAt.Equal(y.NextAt) || !x.Rev.Time.Equal(y.Rev.Time) {
			return false
		}
		x.NextAt, y.NextAt, x.Rev.Time, y.Rev.Time = time.Time{}, time.Time{}, time.Time{}, time.Time{}
		if len(x.Rev.Body) == 0 && len(y.Rev.Body) == 0 {
			x.Rev.Body, y.Rev.Body = nil, nil
		}
		if !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}

// TestRecentEventsBounded: memory holds at most recentMax events across
// apps; the biggest backlog sheds its oldest, and a claim among those
// goes back to the database.
func TestRecentEventsBounded(t *testing.T) {
	t.Parallel()
	var r recentEvents
	small := []recentEvent{{ev: store.Event{AppID: 2, Seq: 1}}, {ev: store.Event{AppID: 2, Seq: 2}}}
	r.add(small)
	var big []recentEvent
	for seq := int64(1); seq <= recentMax; seq++ {
		big = append(big, recentEvent{ev: store.Event{AppID: 1, Seq: seq}})
	}
	r.add(big)
	if r.n > recentMax {
		t.Fatalf("%d events held, bound %d", r.n, recentMax)
	}
	if _, ok := r.above(1, 0, 0, 10, takeAll); ok {
		t.Fatal("a claim below the shed events was answered from memory")
	}
	evs, ok := r.above(1, r.apps[1].covered, 0, 10, takeAll)
	if !ok || len(evs) != 10 || evs[0].Seq != r.apps[1].covered+1 {
		t.Fatalf("claim above the shed events: %d events from %v, ok %v", len(evs), evs, ok)
	}
	if evs, ok := r.above(2, 0, 0, 10, takeAll); !ok || len(evs) != 2 {
		t.Fatalf("the small app lost events: %v, %v", evs, ok)
	}
	// Bodies count too: a big one stays the database's, and many middling
	// ones shed the oldest.
	huge := store.Event{AppID: 3, Seq: 1, Rev: store.Revision{Doc: store.Doc{Body: make([]byte, store.HeadCacheBodyMax+1)}}}
	r.add([]recentEvent{{ev: huge}})
	if r.apps[3].covered != 1 || len(r.apps[3].evs) != 0 {
		t.Fatalf("a %d-byte event was kept in memory", store.HeadCacheBodyMax+1)
	}
	for seq := int64(2); seq < 2+2*recentBytesMax/store.HeadCacheBodyMax; seq++ {
		r.add([]recentEvent{{ev: store.Event{AppID: 3, Seq: seq, Rev: store.Revision{Doc: store.Doc{Body: make([]byte, store.HeadCacheBodyMax)}}}}})
	}
	if r.bytes > recentBytesMax {
		t.Fatalf("%d bytes of events held, bound %d", r.bytes, recentBytesMax)
	}
}

func takeAll(*store.Event) bool { return true }
