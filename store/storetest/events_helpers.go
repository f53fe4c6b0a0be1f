package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

// over is a write of db/id that replaces its current head (body ""
// deletes it), linked to that head as the engine links it.
func (e *env) over(app int64, db, id, body string) *store.Write {
	e.t.Helper()
	base, prev, n := "", int64(0), 1
	if d := e.get(app, db, id); d != nil {
		base, prev, n = d.Rev, d.Seq, gen(e.t, d.Rev)+1
	}
	w := e.write(app, db, id, base, fmt.Sprintf("%d-%s", n, id), body)
	w.PrevSeq = prev
	return w
}

// emit commits a write of jobs/id with an event due at at, and returns
// the write and its seq.
func (e *env) emit(app int64, id, body string, at time.Time) (*store.Write, int64) {
	e.t.Helper()
	w := e.over(app, "jobs", id, body)
	w.Event = &store.EventSpec{NextAt: at}
	return w, e.commit(w)
}

// emitN commits n documents j0…j{n-1} with events due at at, and
// returns their seqs.
func (e *env) emitN(app int64, n int, at time.Time) []int64 {
	e.t.Helper()
	var ss []int64
	for i := range n {
		_, s := e.emit(app, fmt.Sprint("j", i), `{}`, at)
		ss = append(ss, s)
	}
	return ss
}

func (e *env) claimFor(app int64, now time.Time, limit int, d time.Duration) []store.Event {
	e.t.Helper()
	evs, err := e.st.ClaimEvents(e.ctx, store.Claim{AppID: app, Now: now, Limit: limit, Lease: d})
	if err != nil {
		e.t.Fatalf("ClaimEvents(at %v, limit %d): %v", now, limit, err)
	}
	for _, ev := range evs {
		if ev.AppID != app || ev.Dead || ev.Rev.Seq != ev.Seq {
			e.t.Fatalf("ClaimEvents(app %d) handed out %+v", app, ev)
		}
	}
	return evs
}

// wantClaim claims with the suite's lease and checks the seqs handed out.
func (e *env) wantClaim(app int64, now time.Time, limit int, want ...int64) []store.Event {
	e.t.Helper()
	evs := e.claimFor(app, now, limit, lease)
	if got := seqs(evs); !slices.Equal(got, want) {
		e.t.Fatalf("ClaimEvents(at %v, limit %d) = seqs %v, want %v", now, limit, got, want)
	}
	return evs
}

// wantExclusive is wantClaim with an exclusive claim.
func (e *env) wantExclusive(app int64, now time.Time, limit int, want ...int64) []store.Event {
	e.t.Helper()
	evs, err := e.st.ClaimEvents(e.ctx, store.Claim{AppID: app, Now: now, Limit: limit, Lease: lease, Exclusive: true})
	if err != nil {
		e.t.Fatalf("ClaimEvents(exclusive, at %v, limit %d): %v", now, limit, err)
	}
	if got := seqs(evs); !slices.Equal(got, want) {
		e.t.Fatalf("ClaimEvents(exclusive, at %v, limit %d) = seqs %v, want %v", now, limit, got, want)
	}
	return evs
}

func (e *env) listEvents(app int64, dead bool) []store.Event {
	e.t.Helper()
	evs, err := e.st.ListEvents(e.ctx, app, dead, 0, 1000)
	if err != nil {
		e.t.Fatalf("ListEvents(dead=%v): %v", dead, err)
	}
	return evs
}

func (e *env) settle(app, seq int64, s store.Settlement) {
	e.t.Helper()
	if err := e.st.SettleEvent(e.ctx, app, seq, s); err != nil {
		e.t.Fatalf("SettleEvent(%d, %+v): %v", seq, s, err)
	}
}

func (e *env) eventApps() []int64 {
	e.t.Helper()
	apps, err := e.st.EventApps(e.ctx)
	if err != nil {
		e.t.Fatalf("EventApps: %v", err)
	}
	slices.Sort(apps)
	return apps
}

func (e *env) nextDue(app int64) (time.Time, bool) {
	e.t.Helper()
	at, ok, err := e.st.NextEventDue(e.ctx, app)
	if err != nil {
		e.t.Fatalf("NextEventDue: %v", err)
	}
	return at, ok
}

// wantDue checks NextEventDue; the zero time means none.
func (e *env) wantDue(app int64, want time.Time) {
	e.t.Helper()
	at, ok := e.nextDue(app)
	if ok != !want.IsZero() || (ok && !at.Equal(want)) {
		e.t.Fatalf("NextEventDue = %v, %v; want %v, %v", at, ok, want, !want.IsZero())
	}
}

// waitFor polls until cond holds. A settlement may become durable after
// SettleEvent returns; tests that need it to have landed wait for it.
func (e *env) waitFor(what string, cond func() bool) {
	e.t.Helper()
	const patience = 20 * time.Second
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: not seen within %v", what, patience)
		}
		time.Sleep(time.Millisecond)
	}
}

// waitGone waits for an ack to land: the event is listed no more.
func (e *env) waitGone(app, seq int64) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("ack of event %d", seq), func() bool {
		return find(e.listEvents(app, false), seq) == nil && find(e.listEvents(app, true), seq) == nil
	})
}

// waitDead waits for an event to be listed dead.
func (e *env) waitDead(app, seq int64) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("death of event %d", seq), func() bool { return find(e.listEvents(app, true), seq) != nil })
}

// waitRetry waits for a retry to be listed with its attempts and time.
func (e *env) waitRetry(app, seq int64, s store.Settlement) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("retry of event %d", seq), func() bool {
		ev := find(e.listEvents(app, false), seq)
		return ev != nil && ev.Attempts == s.Attempts && ev.NextAt.Equal(s.NextAt)
	})
}

// waitDue waits until NextEventDue reports at: the event due then is
// neither leased nor dead any more.
func (e *env) waitDue(app int64, at time.Time) {
	e.t.Helper()
	e.waitFor(fmt.Sprintf("NextEventDue = %v", at), func() bool {
		got, ok := e.nextDue(app)
		return ok && got.Equal(at)
	})
}

func find(evs []store.Event, seq int64) *store.Event {
	for i := range evs {
		if evs[i].Seq == seq {
			return &evs[i]
		}
	}
	return nil
}

func seqs(evs []store.Event) []int64 {
	var out []int64
	for _, ev := range evs {
		out = append(out, ev.Seq)
	}
	return out
}

// wantState checks an event's delivery state.
func wantState(t *testing.T, what string, ev *store.Event, attempts int, lastError string, nextAt time.Time) {
	t.Helper()
	if ev == nil {
		t.Fatalf("%s: no event", what)
	}
	if ev.Attempts != attempts || ev.LastError != lastError || (!nextAt.IsZero() && !ev.NextAt.Equal(nextAt)) {
		t.Fatalf("%s: attempts %d, last error %q, next at %v; want %d, %q, %v", what, ev.Attempts, ev.LastError, ev.NextAt, attempts, lastError, nextAt)
	}
}

// wantRev checks that an event's revision is the one w committed at seq.
func wantRev(t *testing.T, what string, got store.Revision, w *store.Write, seq int64) {
	t.Helper()
	if got.DB != w.DB || got.ID != w.ID || got.Rev != w.Rev || got.Deleted != w.Deleted || got.Seq != seq ||
		!got.Time.Equal(w.Time) || got.Writer != w.Writer || got.Path != w.Path {
		t.Fatalf("%s: revision %s/%s %s deleted=%v seq %d at %v by %+v via %q; want %s/%s %s deleted=%v seq %d at %v by %+v via %q",
			what, got.DB, got.ID, got.Rev, got.Deleted, got.Seq, got.Time, got.Writer, got.Path,
			w.DB, w.ID, w.Rev, w.Deleted, seq, w.Time, w.Writer, w.Path)
	}
	if w.Deleted {
		if len(got.Body) != 0 {
			t.Fatalf("%s: tombstone with body %s", what, got.Body)
		}
	} else if len(got.Body) == 0 || !sameJSON(t, got.Body, w.Body) {
		t.Fatalf("%s: body %s, want %s", what, got.Body, w.Body)
	}
	if (got.Channels == nil) != (w.Channels == nil) || !slices.Equal(got.Channels, w.Channels) {
		t.Fatalf("%s: channels %#v, want %#v", what, got.Channels, w.Channels)
	}
}

// wantOld checks an event's Old: the revision w committed at seq, or nil
// when w is nil.
func wantOld(t *testing.T, what string, got *store.Revision, w *store.Write, seq int64) {
	t.Helper()
	if w == nil {
		if got != nil {
			t.Fatalf("%s: old revision %+v, want none", what, *got)
		}
		return
	}
	if got == nil {
		t.Fatalf("%s: no old revision, want %s at seq %d", what, w.Rev, seq)
	}
	if got.DB != w.DB || got.ID != w.ID || got.Rev != w.Rev || got.Seq != seq || got.Deleted || !sameJSON(t, got.Body, w.Body) {
		t.Fatalf("%s: old revision %s/%s %s seq %d deleted=%v %s; want %s/%s %s seq %d %s",
			what, got.DB, got.ID, got.Rev, got.Seq, got.Deleted, got.Body, w.DB, w.ID, w.Rev, seq, w.Body)
	}
}

func (e *env) start(app, seq int64) {
	e.t.Helper()
	if err := e.st.StartEvent(e.ctx, app, seq); err != nil {
		e.t.Fatalf("StartEvent(%d): %v", seq, err)
	}
}

// claimed commits n events of a new app, due now, and claims them.
func (e *env) claimed(n int) (app int64, now time.Time, ss []int64) {
	e.t.Helper()
	app, now = e.app("alice", "jobs"), e.clk.Now()
	ss = e.emitN(app, n, now)
	e.wantClaim(app, now, 10, ss...)
	return app, now, ss
}

// wantInterrupted checks that of a claim's events only the one of seq (0
// for none) comes back interrupted.
func wantInterrupted(t *testing.T, what string, evs []store.Event, seq int64) {
	t.Helper()
	for _, ev := range evs {
		if ev.Interrupted != (ev.Seq == seq) {
			t.Fatalf("%s: event %d interrupted = %v; want only event %d interrupted", what, ev.Seq, ev.Interrupted, seq)
		}
	}
}
