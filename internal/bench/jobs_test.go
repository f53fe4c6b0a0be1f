package bench

import (
	"testing"

	"github.com/handoff-run/handoff/store"
)

// hinting is a store that gives one hint.
type hinting struct {
	store.Store
	doc *store.Doc
}

func (h hinting) HeadHint(appID int64, db, id string) *store.Doc { return h.doc }

// TestWatchStoreHints: the bench's store passes the hints of a store that
// gives them, so the engine writes as it does under serve, and gives none
// over a store without them.
func TestWatchStoreHints(t *testing.T) {
	d := &store.Doc{ID: "x", Rev: "1-a"}
	var s store.Store = &watchStore{Store: hinting{doc: d}}
	h, ok := s.(store.HeadHinter)
	if !ok || h.HeadHint(1, "jobs", "x") != d {
		t.Fatalf("the bench's store does not pass its store's hints")
	}
	if got := (&watchStore{}).HeadHint(1, "jobs", "x"); got != nil {
		t.Fatalf("hint from a store without hints = %+v", got)
	}
}
