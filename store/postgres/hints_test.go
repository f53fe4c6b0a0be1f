package postgres

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/handoff-run/handoff/store"
)

// TestHeadHints: after each commit, the hint of every document it wrote
// is what Get then reads (channels nil or empty, grants, tombstones, two
// writes of one document in one batch); a refused write leaves no hint,
// and a big document is not kept.
func TestHeadHints(t *testing.T) {
	t.Parallel()
	st := openAt(t, freshDB(t))
	defer st.Close()
	ctx := context.Background()
	app := newApp(t, st, "jobs")
	// same checks the hint before Get reads, since Get leaves a hint of
	// its own.
	same := func(id string) {
		t.Helper()
		hint := st.HeadHint(app, "jobs", id)
		got, err := st.Get(ctx, app, "jobs", id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(hint, got) {
			t.Fatalf("hint of %s = %+v, Get = %+v", id, hint, got)
		}
	}
	if h := st.HeadHint(app, "jobs", "a"); h != nil {
		t.Fatalf("hint of a document never written = %+v", h)
	}
	w := doc(app, "a", "", "1-a", `{"n":1}`)
	w.Channels = []string{}
	if _, err := st.Commit(ctx, w); err != nil {
		t.Fatal(err)
	}
	same("a")
	w = doc(app, "a", "1-a", "2-b", `{"n":2}`)
	w.Channels = []string{"c1", "c2"}
	w.Grants = []store.Grant{{Kind: "public", Channel: "c1"}}
	if _, err := st.Commit(ctx, w); err != nil {
		t.Fatal(err)
	}
	same("a")
	// Two writes of b in one batch: the hint is the second.
	release, blocker := stallApp(t, st, app)
	ps := commitInOrder(t, st, ctx, doc(app, "b", "", "1-a", `{"v":1}`), doc(app, "b", "1-a", "2-b", `{"v":2}`))
	release()
	wait(blocker)
	wait(ps...)
	if ps[1].err != nil {
		t.Fatal(ps[1].err)
	}
	same("b")
	if h := st.HeadHint(app, "jobs", "b"); h.Rev != "2-b" {
		t.Fatalf("hint of b after two writes in a batch is at %s, want 2-b", h.Rev)
	}
	del := &store.Write{AppID: app, DB: "jobs", ID: "a", BaseRev: "2-b", Rev: "3-c", Deleted: true, Path: "http", Time: t0}
	if _, err := st.Commit(ctx, del); err != nil {
		t.Fatal(err)
	}
	same("a")
	// A refused write: its hint goes, the next write reads.
	if _, err := st.Commit(ctx, doc(app, "b", "1-a", "2-x", `{}`)); !errors.Is(err, store.ErrHeadMoved) {
		t.Fatalf("commit on an old base = %v, want ErrHeadMoved", err)
	}
	if h := st.HeadHint(app, "jobs", "b"); h != nil {
		t.Fatalf("hint after a refused write = %+v, want none", h)
	}
	if _, err := st.Get(ctx, app, "jobs", "b"); err != nil {
		t.Fatal(err)
	}
	same("b") // Get brought it back
	big := `{"s":"` + strings.Repeat("x", store.HeadCacheBodyMax) + `"}`
	if _, err := st.Commit(ctx, doc(app, "b", "2-b", "3-c", big)); err != nil {
		t.Fatal(err)
	}
	if h := st.HeadHint(app, "jobs", "b"); h != nil {
		t.Fatalf("hint of a %d-byte document is kept", len(big))
	}
}

// TestHintsBounded: the hints never hold more than their bounds, and a
// hint is replaced only by a later head.
func TestHintsBounded(t *testing.T) {
	t.Parallel()
	var h hints
	body := []byte(strings.Repeat("x", 4096))
	for i := range 3 * maxHints {
		h.put(store.DocKey{App: 1, DB: "d", ID: string(rune(i))}, &store.Doc{Rev: "1-a", Seq: int64(i), Body: body})
		if len(h.m) > maxHints || h.bytes > store.HeadCacheBytes {
			t.Fatalf("after %d puts: %d hints, %d bytes", i+1, len(h.m), h.bytes)
		}
	}
	k := store.DocKey{App: 2, DB: "d", ID: "x"}
	h.put(k, &store.Doc{Rev: "2-b", Seq: 10})
	h.put(k, &store.Doc{Rev: "1-a", Seq: 9})
	if d := h.get(k); d.Rev != "2-b" {
		t.Fatalf("an older head replaced a newer hint: %s", d.Rev)
	}
	total := 0
	for kk, e := range h.m {
		total += hintBytes(kk, e)
	}
	if total != h.bytes {
		t.Fatalf("bytes = %d, entries add up to %d", h.bytes, total)
	}
}
