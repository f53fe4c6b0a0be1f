package store_test

import (
	"slices"
	"testing"

	"github.com/handoff-run/handoff/store"
)

// TestGrantTally: the tally nets a transaction's grant changes per grant
// across documents and apps, skips documents whose grants stay the same
// in another order, and names the apps of which a grant appeared or
// vanished once the counts are known.
func TestGrantTally(t *testing.T) {
	crew := store.Grant{Kind: "role", Principal: "crew", Channel: "jobs"}
	pub := store.Grant{Kind: "public", Channel: "board"}
	sam := store.Grant{Kind: "user", Principal: "sam", Channel: "jobs"}
	var tally store.GrantTally
	if tally.Replace(1, []store.Grant{crew, pub}, []store.Grant{pub, crew}) {
		t.Fatal("a document keeping its grants in another order counted as a change")
	}
	// App 1: two documents start giving crew, one stops giving pub; app
	// 2: one document moves from sam to crew, another from crew to sam.
	for _, c := range []struct {
		app      int64
		old, new []store.Grant
	}{
		{1, nil, []store.Grant{crew}},
		{1, nil, []store.Grant{crew}},
		{1, []store.Grant{pub}, nil},
		{2, []store.Grant{sam}, []store.Grant{crew}},
		{2, []store.Grant{crew}, []store.Grant{sam}},
	} {
		if !tally.Replace(c.app, c.old, c.new) {
			t.Fatalf("app %d: %v -> %v not counted as a change", c.app, c.old, c.new)
		}
	}
	want := []store.GrantDelta{
		{AppGrant: store.AppGrant{App: 1, Grant: pub}, Delta: -1},
		{AppGrant: store.AppGrant{App: 1, Grant: crew}, Delta: 2},
	}
	got := tally.Deltas()
	if !slices.Equal(got, want) {
		t.Fatalf("deltas %+v, want %+v (app 2's changes net to nothing)", got, want)
	}
	// crew already had 3 documents in app 1 (now 5): no news. pub had one
	// (now none): it vanished.
	if tally.Counted(got[1], 5) || !tally.Counted(got[0], 0) {
		t.Fatal("Counted: a count from 3 to 5 or from 1 to 0 misread")
	}
	if !tally.Moved(1) || tally.Moved(2) || !slices.Equal(tally.MovedApps(), []int64{1}) {
		t.Fatalf("moved apps %v, want [1]", tally.MovedApps())
	}
	var fresh store.GrantTally
	fresh.Replace(3, nil, []store.Grant{sam})
	if d := fresh.Deltas(); len(d) != 1 || !fresh.Counted(d[0], 1) {
		t.Fatal("a grant given by its first document did not count as appearing")
	}
}
