package postgres

import (
	"context"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5"
)

// Seqs without a hot row.
//
// A commit's seqs come from handoff_seq, one sequence per database
// (schema.go, migration 12). nextval does not wait for other transactions,
// so no commit holds anything another commit of its app needs through its
// WAL flush; the price is that seqs are handed out in one order and
// committed in another. A reader therefore reads only up to a horizon
// below which every seq handed out has ended (committed or rolled back):
//
//   - handoff_take_seqs, after the batch has locked its heads, first takes
//     a shared advisory lock whose key is the next seq the sequence will
//     hand out (handoff_seq_taken()+1), then takes its seqs with nextval:
//     all of them are at least that key. The lock is the transaction's, so
//     PostgreSQL lets go of it only after the commit is visible to new
//     snapshots (or after the rollback).
//   - handoff_horizon reads how far the sequence has handed out (taken),
//     then the smallest key held (m). A seq s ≤ taken was handed out
//     before taken was read, so its transaction locked a key ≤ s before
//     that: either it has ended, or its key is among those held, so
//     m ≤ s. Hence every seq below m, and up to taken, has ended: the
//     horizon is min(taken, m−1). A lock still waited for is no key held:
//     its transaction has taken no seq yet, and will take them above
//     taken.
//   - A reader waits (for the lock of m, in its own transaction) until
//     the horizon reaches the highest seq of the app it can already see,
//     so what it reads covers every commit that was visible when it
//     asked: read-your-writes, and every seq a Watch callback was told.
//     LastSeq answers below the horizon too, so a follower that starts
//     from it after reading a snapshot misses no commit still in flight.
//   - The rows are read by a later statement than the horizon, so with a
//     later snapshot, which sees every commit below the horizon.
//
// The keys are int8 advisory locks in shared mode; handoff's other
// advisory locks are exclusive (or take two int4 keys), so the horizon
// never mistakes them for a commit.
//
// Per document, order holds as before: a batch takes its seqs after it
// has locked its heads, so a later write of a document takes later seqs.
// A batch's own seqs need not be consecutive (other batches take theirs
// at the same time): the statements of the batch find the j-th in the
// array that handoff_take_seqs leaves in the setting handoff.seqs.

// writeBarrier is the advisory lock (two int4 keys, "hdwr" and 0) every
// commit holds in shared mode from taking its seqs to its end. Taking it
// exclusively waits for the commits under way and holds back new ones: a
// fence's barrier (Fence), and what keeps a sequence moved by hand from
// meeting a nextval (raiseSeq).
const writeBarrier = 0x68647772

var writeBarrierSQL = strconv.Itoa(writeBarrier) + ", 0"

const (
	// sqlTakeSeqs takes the batch's $2 seqs (writer.go, queueWrites), if
	// app $1 exists.
	sqlTakeSeqs = `SELECT handoff_take_seqs($2::int4) FROM apps WHERE id = $1`
	// batchSeqs is the batch's seqs as its later statements read them,
	// evaluated once per statement (OFFSET 0 keeps it from being
	// flattened into each row); $2 is the batch's number of writes, which
	// its callers pass along.
	batchSeqs = `(SELECT current_setting('handoff.seqs')::int8[] AS a, $2::int8 AS n OFFSET 0) s`
	// sqlHorizon leaves app $1's horizon in the session for the next
	// statement of the same round trip, which reads with a later snapshot.
	sqlHorizon = `SELECT set_config('handoff.horizon', handoff_horizon($1)::text, false)`
	// belowHorizon bounds a read of the ledger by it.
	belowHorizon = `seq <= current_setting('handoff.horizon')::int8`
)

// readBelowHorizon runs query (which bounds its seqs by belowHorizon) in
// the round trip that computes app's horizon, and hands its rows to read.
func (s *Store) readBelowHorizon(ctx context.Context, app int64, read func(pgx.Rows) error, query string, args ...any) error {
	b := &pgx.Batch{}
	b.Queue(sqlHorizon, app)
	b.Queue(query, args...).Query(read)
	return s.pool.SendBatch(ctx, b).Close()
}

// raiseSeq makes handoff_seq hand out only seqs above min, for an app
// whose seqs reach min and that moves into this database. It holds the
// write barrier, so no nextval runs between its read and its setval: the
// sequence never goes back.
func (s *Store) raiseSeq(ctx context.Context, min int64) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+writeBarrierSQL+`)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `SELECT setval('handoff_seq', $1) WHERE handoff_seq_taken() < $1`, min)
		if err != nil {
			return fmt.Errorf("raise the sequence to %d: %w", min, err)
		}
		return nil
	})
}
