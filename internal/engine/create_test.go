package engine_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
	"github.com/handoff-run/handoff/store/sqlite"
)

// countingGets counts the head reads a store serves, and offers hints
// (none), as a store whose reads cost a round trip does.
type countingGets struct {
	store.Store
	gets atomic.Int64
}

func (c *countingGets) HeadHint(int64, string, string) *store.Doc { return nil }

func (c *countingGets) Capabilities() store.Capabilities {
	caps := c.Store.Capabilities()
	caps.Heads = c
	return caps
}

func (c *countingGets) Get(ctx context.Context, appID int64, db, id string) (*store.Doc, error) {
	c.gets.Add(1)
	return c.Store.Get(ctx, appID, db, id)
}

// TestCreatesReadNoHead: on a store whose reads cost a round trip, a put
// with a minted id or ifAbsent decides against no head without reading
// one. When the document exists after all, the commit refuses that guess,
// and the write ends as it would have: ifAbsent reports the existing
// document, though access.js refuses the write it would be as a create,
// and a tombstone is written over at its next generation.
func TestCreatesReadNoHead(t *testing.T) {
	t.Parallel()
	sq, err := sqlite.OpenUnsynced(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sq.Close() })
	st := &countingGets{Store: sq}
	en := newFeedEnvOn(t, st, engine.Options{})
	en.app("admin/app", false)
	ctx, e, admin := en.ctx, en.e, feedAdmin
	if _, err := e.Deploy(ctx, admin, "admin/app", `export default function (doc, was) {
		if (!was && doc.n !== 1) throw { forbidden: "a new document starts at n: 1" };
		return { channels: ["all"] };
	}`, ""); err != nil {
		t.Fatal(err)
	}
	put := func(id, body string, o appcode.PutOptions) (appcode.WriteResult, int64) {
		t.Helper()
		before := st.gets.Load()
		res, err := e.Put(ctx, admin, "admin/app", "d", id, []byte(body), o)
		if err != nil {
			t.Fatalf("put %q %s: %v", id, body, err)
		}
		return res, st.gets.Load() - before
	}
	absent := appcode.PutOptions{IfAbsent: true}

	if res, gets := put("", `{"n":1}`, appcode.PutOptions{}); gets != 0 || res.ID == "" {
		t.Errorf("a put with a minted id read the head %d times (%+v), want none", gets, res)
	}
	first, gets := put("a", `{"n":1}`, absent)
	if gets != 0 {
		t.Errorf("an ifAbsent create read the head %d times, want none", gets)
	}
	again, gets := put("a", `{"n":2}`, absent)
	if !again.Existing || again.Rev != first.Rev {
		t.Fatalf("ifAbsent over an existing document = %+v, want it reported at %s", again, first.Rev)
	}
	if gets == 0 {
		t.Error("ifAbsent over an existing document never read its head")
	}
	if _, err := e.Delete(ctx, admin, "admin/app", "d", "a", ""); err != nil {
		t.Fatal(err)
	}
	if res, _ := put("a", `{"n":1}`, absent); !strings.HasPrefix(res.Rev, "3-") {
		t.Fatalf("ifAbsent over a tombstone made rev %s, want generation 3", res.Rev)
	}
	hist, err := e.History(ctx, admin, "admin/app", "d", "a")
	if err != nil {
		t.Fatal(err)
	}
	if len(hist) != 3 {
		t.Fatalf("history of a has %d revisions, want 3 (create, delete, create): %+v", len(hist), hist)
	}
	// A refusal decided against the guess stands only when a read agrees.
	_, err = e.Put(ctx, admin, "admin/app", "d", "b", []byte(`{"n":2}`), absent)
	if errs.CodeOf(err) != errs.Forbidden {
		t.Fatalf("ifAbsent create that access.js refuses = %v, want forbidden", err)
	}
}
