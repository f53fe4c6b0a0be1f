package handoff_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/handoff-run/handoff"
	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
)

// job is the document of the tests: the job pattern, cut short.
type job struct {
	ID     string `json:"_id,omitempty"`
	Rev    string `json:"_rev,omitempty"`
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
}

var visible = handoff.Decision{Channels: []string{"jobs"}, Grant: handoff.Grant{Public: []string{"jobs"}}}

// jobs is pending → running → done, the moves kept for onChange, and
// "swept" for the scheduled handler.
func jobs(w *handoff.Write) (handoff.Decision, error) {
	var j, was job
	if err := w.Doc.Decode(&j); err != nil {
		return handoff.Decision{}, err
	}
	if w.Old == nil {
		if j.Status != "pending" && j.Status != "swept" {
			return handoff.Decision{}, handoff.Forbid("a new job starts as pending")
		}
		if j.Status == "swept" {
			if err := w.RequireBackend(handoff.HandlerScheduled); err != nil {
				return handoff.Decision{}, err
			}
		}
		return visible, nil
	}
	if err := w.Old.Decode(&was); err != nil {
		return handoff.Decision{}, err
	}
	switch was.Status + "->" + j.Status {
	case "pending->running", "running->done":
		if err := w.RequireBackend(handoff.HandlerOnChange); err != nil {
			return handoff.Decision{}, err
		}
		return visible, nil
	}
	return handoff.Decision{}, handoff.Forbid("no transition from " + was.Status + " to " + j.Status)
}

func open(t *testing.T, o handoff.Options) *handoff.Instance {
	t.Helper()
	h, err := handoff.Open(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
	})
	return h
}

func reason(err error) string {
	var e *errs.Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// TestRefusal: a write the table refuses comes back with code forbidden
// and the table's reason, and is not committed.
func TestRefusal(t *testing.T) {
	ctx := context.Background()
	h := open(t, handoff.Options{Apps: []handoff.App{{Name: "alice/work", Public: true, Tables: map[string]handoff.Table{"jobs": jobs}}}})
	bob := h.As("alice/work", "bob")
	for _, c := range []struct {
		doc    job
		reason string
	}{
		{job{Status: "done"}, "a new job starts as pending"},
		{job{Status: "swept"}, "only the backend's scheduled handler may make this change"},
	} {
		_, err := bob.Put(ctx, "jobs", "j1", c.doc, handoff.PutOptions{})
		if !errs.Is(err, errs.Forbidden) || reason(err) != c.reason {
			t.Errorf("put %s: %v, reason %q; want forbidden, %q", c.doc.Status, err, reason(err), c.reason)
		}
	}
	if _, err := bob.Get(ctx, "jobs", "j1"); !errs.Is(err, errs.NotFound) {
		t.Fatalf("a refused put was committed: get says %v", err)
	}
	r, err := bob.Put(ctx, "jobs", "j1", job{Status: "pending"}, handoff.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A client may not take the handler's step.
	_, err = bob.Put(ctx, "jobs", "j1", job{Status: "running"}, handoff.PutOptions{IfRev: r.Rev})
	if want := "only the backend's onChange handler may make this change"; reason(err) != want {
		t.Fatalf("client claim: %v; want the reason %q", err, want)
	}
}

// TestOnChangeWritesThroughTable: a handler's writes pass the table as
// the handler's, and one the table refuses comes back to the handler
// refused and is not committed.
func TestOnChangeWritesThroughTable(t *testing.T) {
	ctx := context.Background()
	var handlers []string
	table := func(w *handoff.Write) (handoff.Decision, error) {
		if w.Old != nil {
			handlers = append(handlers, w.Handler) // one document, one run at a time
		}
		return jobs(w)
	}
	refused := make(chan error, 1)
	done := make(chan struct{})
	work := func(ctx context.Context, c handoff.Change, db *handoff.Docs) error {
		var j job
		if err := c.Doc.Decode(&j); err != nil {
			return err
		}
		_, err := db.Put(ctx, c.DB, c.ID, job{Status: "done"}, handoff.PutOptions{IfRev: j.Rev})
		refused <- err
		if errs.Is(err, errs.Forbidden) {
			r, err := db.Put(ctx, c.DB, c.ID, job{Status: "running"}, handoff.PutOptions{IfRev: j.Rev})
			if err != nil {
				return err
			}
			if _, err = db.Put(ctx, c.DB, c.ID, job{Status: "done"}, handoff.PutOptions{IfRev: r.Rev}); err != nil {
				return err
			}
		}
		close(done)
		return nil
	}
	h := open(t, handoff.Options{Apps: []handoff.App{{
		Name: "alice/work", Public: true,
		Tables:   map[string]handoff.Table{"jobs": table},
		OnChange: handoff.OnChange{Handle: work, DBs: []string{"jobs"}, When: map[string][]any{"status": {"pending"}}, MaxAttempts: 1},
	}}})
	bob := h.As("alice/work", "bob")
	if _, err := bob.Put(ctx, "jobs", "j1", job{Status: "pending"}, handoff.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(t, done)
	if err := <-refused; reason(err) != "no transition from pending to done" {
		t.Fatalf("the handler's pending → done: %v; want refused by the table", err)
	}
	hist, err := bob.History(ctx, "jobs", "j1")
	if err != nil {
		t.Fatal(err)
	}
	var walk []string
	for _, r := range hist {
		var j job
		if err := r.Doc.Decode(&j); err != nil {
			t.Fatal(err)
		}
		walk = append(walk, j.Status+"/"+r.Handler)
	}
	if got := strings.Join(walk, " "); got != "pending/ running/onChange done/onChange" {
		t.Fatalf("history %s; want pending, then running and done by onChange", got)
	}
	// A write whose head moved under it is decided again: three or more.
	if len(handlers) < 3 || slices.ContainsFunc(handlers, func(h string) bool { return h != handoff.HandlerOnChange }) {
		t.Fatalf("the table saw the writes of %q; want onChange's three", handlers)
	}
}

// wait waits for ch to close; the limit only keeps a broken test from
// hanging.
func wait(t *testing.T, ch <-chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(30 * time.Second):
		t.Fatal("the handler never got there")
	}
}

// TestCompareAndSet: a put or delete with a stale IfRev is code conflict
// and changes nothing; IfAbsent leaves a live document as it is.
func TestCompareAndSet(t *testing.T) {
	ctx := context.Background()
	h := open(t, handoff.Options{Apps: []handoff.App{{Name: "alice/work"}}})
	alice := h.As("alice/work", "alice")
	r1, err := alice.Put(ctx, "notes", "n", job{Status: "a"}, handoff.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r2, err := alice.Put(ctx, "notes", "n", job{Status: "b"}, handoff.PutOptions{IfRev: r1.Rev})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Put(ctx, "notes", "n", job{Status: "c"}, handoff.PutOptions{IfRev: r1.Rev}); !errs.Is(err, errs.Conflict) {
		t.Fatalf("put on a stale rev: %v; want conflict", err)
	}
	if _, err := alice.Delete(ctx, "notes", "n", r1.Rev); !errs.Is(err, errs.Conflict) {
		t.Fatalf("delete on a stale rev: %v; want conflict", err)
	}
	r, err := alice.Put(ctx, "notes", "n", job{Status: "d"}, handoff.PutOptions{IfAbsent: true})
	if err != nil || !r.Existing || r.Rev != r2.Rev {
		t.Fatalf("ifAbsent on a live document: %+v, %v; want the existing rev %s", r, err, r2.Rev)
	}
	var j job
	doc, err := alice.Get(ctx, "notes", "n")
	if err == nil {
		err = doc.Decode(&j)
	}
	if err != nil || j.Status != "b" || j.Rev != r2.Rev {
		t.Fatalf("head %+v, %v; want b at %s", j, err, r2.Rev)
	}
}

// TestScheduledTicks: the scheduled handler ticks on the instance's
// clock, once per interval, and writes as itself through the table.
func TestScheduledTicks(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)
	clk := clock.NewVirtual(start)
	ticks := make(chan time.Time, 1)
	sweep := func(ctx context.Context, tick handoff.Tick, db *handoff.Docs) error {
		id := "sweep-" + tick.Planned.Format("150405")
		_, err := db.Put(ctx, "jobs", id, job{Status: "swept"}, handoff.PutOptions{})
		if err == nil {
			ticks <- tick.Planned
		}
		return err
	}
	h := open(t, handoff.Options{Clock: clk, Apps: []handoff.App{{
		Name: "alice/work", Public: true,
		Tables:    map[string]handoff.Table{"jobs": jobs},
		Scheduled: handoff.Scheduled{Handle: sweep, Interval: 10 * time.Second},
	}}})
	for _, want := range []time.Time{start.Add(10 * time.Second), start.Add(20 * time.Second)} {
		if at := nextTimer(t, clk); !at.Equal(want) {
			t.Fatalf("next timer at %v; want the tick at %v", at, want)
		}
		clk.AdvanceTo(want)
		select {
		case got := <-ticks:
			if !got.Equal(want) {
				t.Fatalf("tick planned at %v; want %v", got, want)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("no tick at %v", want)
		}
	}
	hist, err := h.As("alice/work", "bob").History(ctx, "jobs", "sweep-090010")
	if err != nil || len(hist) != 1 || hist[0].Handler != handoff.HandlerScheduled || hist[0].User != "alice" {
		t.Fatalf("the tick's write: %+v, %v; want one revision by alice's scheduled handler", hist, err)
	}
}

// nextTimer waits until a timer is armed on clk and returns when it is
// due.
func nextTimer(t *testing.T, clk *clock.Virtual) time.Time {
	t.Helper()
	for {
		added := clk.TimerAdded()
		if at, ok := clk.NextAt(); ok {
			return at
		}
		select {
		case <-added:
		case <-time.After(30 * time.Second):
			t.Fatal("no timer was armed")
		}
	}
}

// TestTablePanics: a table that panics refuses the write with code
// access_error, and the instance goes on.
func TestTablePanics(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int32
	table := func(w *handoff.Write) (handoff.Decision, error) {
		if calls.Add(1) == 1 {
			var m map[string]int
			m["boom"]++
		}
		return handoff.Decision{}, nil
	}
	h := open(t, handoff.Options{Apps: []handoff.App{{Name: "alice/work", Tables: map[string]handoff.Table{"jobs": table}}}})
	alice := h.As("alice/work", "alice")
	_, err := alice.Put(ctx, "jobs", "j", job{Status: "pending"}, handoff.PutOptions{})
	if !errs.Is(err, errs.AccessError) || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("put through a panicking table: %v; want access_error naming the panic", err)
	}
	if _, err := alice.Put(ctx, "jobs", "j", job{Status: "pending"}, handoff.PutOptions{}); err != nil {
		t.Fatalf("the next put: %v", err)
	}
}

// TestBadApps: mistakes in an app's definition are refused at open, with
// code invalid, before anything runs.
func TestBadApps(t *testing.T) {
	noop := func(context.Context, handoff.Change, *handoff.Docs) error { return nil }
	tick := func(context.Context, handoff.Tick, *handoff.Docs) error { return nil }
	for name, app := range map[string]handoff.App{
		"name":           {Name: "work"},
		"table name":     {Name: "a/b", Tables: map[string]handoff.Table{"no spaces": jobs}},
		"nil table":      {Name: "a/b", Tables: map[string]handoff.Table{"jobs": nil}},
		"when path":      {Name: "a/b", OnChange: handoff.OnChange{Handle: noop, When: map[string][]any{"a.b": {"x"}}}},
		"when empty":     {Name: "a/b", OnChange: handoff.OnChange{Handle: noop, When: map[string][]any{"status": {}}}},
		"when object":    {Name: "a/b", OnChange: handoff.OnChange{Handle: noop, When: map[string][]any{"status": {[]string{"x"}}}}},
		"no handle":      {Name: "a/b", OnChange: handoff.OnChange{Concurrency: 4}},
		"no interval":    {Name: "a/b", Scheduled: handoff.Scheduled{Handle: tick}},
		"short interval": {Name: "a/b", Scheduled: handoff.Scheduled{Handle: tick, Interval: time.Millisecond}},
	} {
		dir := filepath.Join(t.TempDir(), "data")
		h, err := handoff.Open(context.Background(), dir, handoff.Options{Apps: []handoff.App{app}})
		if err == nil {
			h.Close()
		}
		if !errs.Is(err, errs.Invalid) {
			t.Errorf("%s: %v; want invalid", name, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: the folder was made (%v) for an app that cannot run", name, err)
		}
	}
}

// TestDeleteThroughTable: the table sees a delete as one, with the id and
// the head it removes, and may refuse it.
func TestDeleteThroughTable(t *testing.T) {
	ctx := context.Background()
	var seen []string
	table := func(w *handoff.Write) (handoff.Decision, error) {
		seen = append(seen, fmt.Sprintf("%s deleted=%v old=%v", w.ID, w.Deleted, w.Old != nil))
		if w.Deleted {
			return handoff.Decision{}, w.RequireOwner()
		}
		return visible, nil
	}
	h := open(t, handoff.Options{Apps: []handoff.App{{Name: "alice/work", Public: true, Tables: map[string]handoff.Table{"jobs": table}}}})
	if _, err := h.As("alice/work", "bob").Put(ctx, "jobs", "j", job{Status: "pending"}, handoff.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.As("alice/work", "bob").Delete(ctx, "jobs", "j", ""); reason(err) != "only the app's owner may make this change" {
		t.Fatalf("bob deletes: %v", err)
	}
	if _, err := h.As("alice/work", "alice").Delete(ctx, "jobs", "j", ""); err != nil {
		t.Fatal(err)
	}
	want := "j deleted=false old=false|j deleted=true old=true|j deleted=true old=true"
	if got := strings.Join(seen, "|"); got != want {
		t.Fatalf("the table saw %s; want %s", got, want)
	}
}
