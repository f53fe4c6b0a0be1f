package postgres

import (
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/handoff-run/handoff/store"
)

// Trusted heads. Most writes follow a write of the same document that this
// node just committed (a job's claim follows its put, its finish its
// claim), so the node knows those heads, grants included (hints.go). A
// batch whose every document is such a head, or is created by a write
// that expects no head, skips round trip 1: it checks its writes against
// what the node knows, and its transaction opens with a statement that
// locks the heads and fails unless each known one is still the one this
// node committed (same seq) and each expected absent is. That failure
// ends the transaction before it takes seqs or writes anything, and the
// batch runs again the usual way, reading the heads; so does a batch in
// which the known heads would refuse a write: a refusal is given only
// against heads read under lock. A document created by another node
// between the check and the insert fails the unique key of docs, as it
// does after round trip 1.

// sqlExpectHeads is the statement that locks the heads and fails with
// headsMovedCode unless each has the seq given, or none for 0 (migration
// 13).
const sqlExpectHeads = `SELECT handoff_expect_heads($1, $2::text[], $3::text[], $4::int8[])`

const headsMovedCode = "HH001"

// errHeadsMoved is a batch whose trusted heads were not all as expected.
var errHeadsMoved = errors.New("postgres store: a head this node committed moved since")

func headsMoved(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == headsMovedCode
}

// trustHeads fills states from what this node knows of the batch's heads
// and checks the writes against them. It returns the statements that open
// the batch's transaction in place of round trip 1, or nil, with results
// cleared, when some head is unknown or a write would be refused.
func (s *Store) trustHeads(app int64, batch []*commitReq, keys []docKey, states map[docKey]*docState, results []commitRes) (opening *pgx.Batch, accepted, grantWrites []int) {
	first := make(map[docKey]*store.Write, len(keys))
	for _, r := range batch {
		k := docKey{r.w.DB, r.w.ID}
		if first[k] == nil {
			first[k] = r.w
		}
	}
	hs := make([]*hint, len(keys))
	for i, k := range keys {
		h, known := s.hints.committed(store.DocKey{App: app, DB: k.db, ID: k.id})
		if !known && first[k].BaseRev != "" {
			return nil, nil, nil // a head this node does not know
		}
		if known {
			hs[i] = h
		}
	}
	var dbs, ids []string
	var seqs []int64
	for i, k := range keys { // sorted: every batch locks heads in one order
		seq := int64(0) // created: no head expected
		if h := hs[i]; h != nil {
			st := states[k]
			st.rev, st.found, st.hasGrants, st.grants = h.doc.Rev, true, h.doc.HasGrants, slices.Clone(h.grants)
			seq = h.doc.Seq
		}
		dbs, ids, seqs = append(dbs, k.db), append(ids, k.id), append(seqs, seq)
	}
	accepted, grantWrites = checkWrites(batch, states, results)
	if len(accepted) < len(batch) {
		// Round trip 1 fills the states afresh.
		clear(results)
		for _, st := range states {
			*st = docState{last: -1}
		}
		return nil, nil, nil
	}
	opening = &pgx.Batch{}
	opening.Queue("BEGIN")
	opening.Queue(sqlGenericPlans)
	opening.Queue(sqlExpectHeads, app, dbs, ids, seqs)
	return opening, accepted, grantWrites
}
