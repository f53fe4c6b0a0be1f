package jstest

import (
	"cmp"
	"encoding/json"
	"slices"
	"sync"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/sim"
)

// Coverage counts the transitions of one field that the tests committed
// and saw refused. An app's correctness is its transition table, so an
// edge no test committed, or none tried against the table, is where a bug
// can hide; Untested lists the edges a server's history took that no test
// committed.
type Coverage struct {
	Field     string       `json:"field"`
	Edges     []Edge       `json:"edges"`
	Untested  []Transition `json:"untested,omitempty"`
	mu        sync.Mutex
	committed map[Transition]int
	refused   map[Transition]int
}

// Transition is one move of the field in one database. From is New for a
// document's first revision; To is Deleted for a deletion; a missing field
// is None.
type Transition struct {
	DB   string `json:"db"`
	From string `json:"from"`
	To   string `json:"to"`
}

// Edge is a transition with its counts.
type Edge struct {
	Transition
	Committed int `json:"committed"`
	Refused   int `json:"refused"`
}

// Names of the ends that are not values.
const (
	New     = "(new)"
	Deleted = "(deleted)"
	None    = "(none)"
)

func newCoverage(field string) *Coverage {
	return &Coverage{Field: field, committed: map[Transition]int{}, refused: map[Transition]int{}}
}

// value renders the field of a document: a string as itself, anything
// else as JSON, None when absent.
func value(doc json.RawMessage, field string) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(doc, &m) != nil {
		return None
	}
	raw, ok := m[field]
	if !ok {
		return None
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	return string(raw)
}

// Rev is what Transitions needs of a ledger entry.
type Rev struct {
	DB, ID  string
	Deleted bool
	Doc     json.RawMessage
}

// Transitions reads the moves of field in a ledger (commit order).
func Transitions(ledger []Rev, field string) map[Transition]int {
	out := map[Transition]int{}
	last := map[[2]string]string{}
	for _, e := range ledger {
		k := [2]string{e.DB, e.ID}
		from, ok := last[k]
		if !ok {
			from = New
		}
		to := Deleted
		if !e.Deleted {
			to = value(e.Doc, field)
		}
		if e.Deleted {
			delete(last, k)
		} else {
			last[k] = to
		}
		if from == to || (from == New || from == None) && to == None {
			continue // not a move of the field
		}
		out[Transition{DB: e.DB, From: from, To: to}]++
	}
	return out
}

// committed adds a test's ledger.
func (c *Coverage) addLedger(revs []sim.Revision) {
	ledger := make([]Rev, len(revs))
	for i, r := range revs {
		ledger[i] = Rev{DB: r.DB, ID: r.ID, Deleted: r.Deleted, Doc: r.Doc}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, n := range Transitions(ledger, c.Field) {
		c.committed[t] += n
	}
}

// sawAccess notes a write that access.js refused.
func (tr *testRun) sawAccess(in appcode.AccessInput, err error) {
	if !errs.Is(err, errs.Forbidden) {
		return
	}
	field := tr.f.cov.Field
	from := New
	if in.OldDoc != nil {
		from = value(in.OldDoc, field)
	}
	to := value(in.Doc, field)
	var del struct {
		Deleted bool `json:"_deleted"`
	}
	if json.Unmarshal(in.Doc, &del) == nil && del.Deleted {
		to = Deleted
	}
	tr.mu.Lock()
	tr.refused = append(tr.refused, Transition{DB: in.DB, From: from, To: to})
	tr.mu.Unlock()
}

// cov adds the refusals a test saw.
func (tr *testRun) cov(c *Coverage) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range tr.refused {
		c.refused[t]++
	}
}

// Finish fills in Edges, and Untested from a server's history (nil for
// none).
func (c *Coverage) Finish(history map[Transition]int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	all := map[Transition]bool{}
	for t := range c.committed {
		all[t] = true
	}
	for t := range c.refused {
		all[t] = true
	}
	c.Edges = []Edge{}
	for t := range all {
		c.Edges = append(c.Edges, Edge{Transition: t, Committed: c.committed[t], Refused: c.refused[t]})
	}
	slices.SortFunc(c.Edges, func(a, b Edge) int { return compare(a.Transition, b.Transition) })
	c.Untested = nil
	for t := range history {
		if c.committed[t] == 0 {
			c.Untested = append(c.Untested, t)
		}
	}
	slices.SortFunc(c.Untested, compare)
}

func compare(a, b Transition) int {
	return cmp.Or(cmp.Compare(a.DB, b.DB), cmp.Compare(a.From, b.From), cmp.Compare(a.To, b.To))
}
