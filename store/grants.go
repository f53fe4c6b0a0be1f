package store

import (
	"cmp"
	"slices"
	"strings"
)

// GrantTally is the grant accounting of one transaction, written once for
// every driver. A driver keeps two tables: each live document's grants,
// and each grant's count (how many live documents give it), which makes
// "who may read what" cost the number of distinct grants, not of
// documents. The tally tells the driver which documents' grant rows to
// replace (Replace), by how much each count moves, netted over the whole
// transaction so a burst of documents giving one grant costs one update
// (Deltas), and, once the driver has moved the counts (Counted), which
// apps saw a grant appear or vanish (Moved): their caches of who may read
// what must be cleared.
type GrantTally struct {
	deltas map[AppGrant]int64
	moved  map[int64]bool
}

// AppGrant is one grant of one app.
type AppGrant struct {
	App int64
	Grant
}

// GrantDelta is the net change of one grant's count.
type GrantDelta struct {
	AppGrant
	Delta int64
}

// Replace notes that a document of app goes from grants old to grants
// new (nil for none, as when it is deleted). It reports false, and notes
// nothing, when both hold the same grants in any order: the common case,
// in which the driver touches no grant row.
func (t *GrantTally) Replace(app int64, old, new []Grant) bool {
	if SameGrants(old, new) {
		return false
	}
	if t.deltas == nil {
		t.deltas = map[AppGrant]int64{}
	}
	for _, g := range old {
		t.deltas[AppGrant{app, g}]--
	}
	for _, g := range new {
		t.deltas[AppGrant{app, g}]++
	}
	return true
}

// Deltas lists the counts to move, those whose net change is not zero, in
// one order (app, kind, principal, channel) so that concurrent
// transactions update the counts in the same order.
func (t *GrantTally) Deltas() []GrantDelta {
	var out []GrantDelta
	for k, d := range t.deltas {
		if d != 0 {
			out = append(out, GrantDelta{k, d})
		}
	}
	slices.SortFunc(out, func(a, b GrantDelta) int {
		return cmp.Or(cmp.Compare(a.App, b.App), strings.Compare(a.Kind, b.Kind),
			strings.Compare(a.Principal, b.Principal), strings.Compare(a.Channel, b.Channel))
	})
	return out
}

// Counted takes the count of d's grant after the driver moved it by
// d.Delta, and reports whether the grant appeared (from zero) or vanished
// (to zero); at zero the driver drops the count's row.
func (t *GrantTally) Counted(d GrantDelta, n int64) bool {
	crossed := (n > 0) != (n-d.Delta > 0)
	if crossed {
		if t.moved == nil {
			t.moved = map[int64]bool{}
		}
		t.moved[d.App] = true
	}
	return crossed
}

// Moved reports whether a grant of app appeared or vanished.
func (t *GrantTally) Moved(app int64) bool { return t.moved[app] }

// MovedApps lists the apps of which a grant appeared or vanished.
func (t *GrantTally) MovedApps() []int64 {
	var out []int64
	for app := range t.moved {
		out = append(out, app)
	}
	slices.Sort(out)
	return out
}
