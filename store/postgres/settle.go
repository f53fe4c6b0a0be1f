package postgres

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/handoff-run/handoff/store"
)

// Acks are the most frequent settlement by far (one per delivered
// event), and each alone is a transaction of its own: four statements
// for one row. The acks waiting at one moment share one transaction
// instead, one DELETE per app, the way Commits share theirs. Each
// SettleEvent still returns only once its ack is in the database, so
// nothing reads an acked event back as leased. The marks of StartEvent,
// one per run too, share the same transactions.

// ackReq is one ack, or one start of a run, waiting for the next flush.
type ackReq struct {
	app, seq int64
	start    bool
	done     chan error
	// taken and dropped are guarded by acker.mu, as for commitReq.
	taken, dropped bool
}

// acker queues acks; one goroutine, running while any wait, flushes
// everything queued in one transaction after another.
type acker struct {
	mu      sync.Mutex
	queue   []*ackReq
	running bool
	closed  bool
	wg      sync.WaitGroup
	// flushes counts the transactions run, for tests.
	flushes atomic.Int64
}

// ack deletes the settled event (app, seq) in the next flush and waits
// for it; with start, it marks a run of it started instead (StartEvent).
func (s *Store) ack(ctx context.Context, app, seq int64, start bool) error {
	a := &s.acks
	req := &ackReq{app: app, seq: seq, start: start, done: make(chan error, 1)}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return errClosed
	}
	a.queue = append(a.queue, req)
	if !a.running {
		a.running = true
		a.wg.Add(1)
		go s.runAcks()
	}
	a.mu.Unlock()
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
	}
	a.mu.Lock()
	if !req.taken {
		req.dropped = true
		a.mu.Unlock()
		return ctx.Err()
	}
	a.mu.Unlock()
	return <-req.done
}

// Under a stream of acks (one per delivered event), the flusher waits
// ackGather before each flush after its first, unless ackGatherMax are
// queued already: a flush costs a round trip and a transaction however
// few acks it carries, and at full load they came three to a flush. A
// lone ack is flushed at once, by a flusher that has just started.
const (
	ackGather    = 500 * time.Microsecond
	ackGatherMax = 16
)

// runAcks flushes the queue until it is empty.
func (s *Store) runAcks() {
	a := &s.acks
	defer a.wg.Done()
	for first := true; ; first = false {
		a.mu.Lock()
		if !first && len(a.queue) < ackGatherMax {
			a.mu.Unlock()
			time.Sleep(ackGather)
			a.mu.Lock()
		}
		var batch []*ackReq
		for _, r := range a.queue {
			if !r.dropped {
				r.taken = true
				batch = append(batch, r)
			}
		}
		a.queue = nil
		if len(batch) == 0 {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		started, err := s.flushAcks(batch)
		for _, r := range batch {
			if err == nil && r.start && !started[eventKey{r.app, r.seq}] {
				r.done <- fmt.Errorf("event %d is not leased to this node: %w", r.seq, store.ErrNotFound)
				continue
			}
			r.done <- err
		}
	}
}

type eventKey struct{ app, seq int64 }

const (
	// sqlKeyPlans: a flush does not wait for the WAL flush, and runs one
	// generic plan per connection, without scans and bitmaps, which a plan
	// made for a small table would pick. nextDue reads events_due under
	// the same settings. (dead IS NOT TRUE below is NOT dead for a column
	// never NULL, but leaves the partial indexes on NOT dead out.)
	sqlKeyPlans = `SELECT set_config('synchronous_commit', 'off', true), set_config('plan_cache_mode', 'force_generic_plan', true),
		set_config('enable_seqscan', 'off', true), set_config('enable_bitmapscan', 'off', true)`
	// sqlAck and sqlStart find each event through a LATERAL lookup of
	// its key (seq = ANY would be a filter on app_id's rows in a plan made
	// for a small table), lock it, and then change the row they locked, by
	// its ctid, which the lock keeps from moving.
	sqlAck = `DELETE FROM events WHERE ctid = ANY(ARRAY(SELECT e.ctid FROM unnest($2::int8[]) AS k(seq),
		LATERAL (SELECT ctid FROM events WHERE app_id = $1 AND seq = k.seq FOR UPDATE OFFSET 0) e))`
	sqlStart = `UPDATE events SET attempts = attempts + 1, running = true WHERE ctid = ANY(ARRAY(SELECT e.ctid FROM unnest($2::int8[]) AS k(seq),
		LATERAL (SELECT ctid FROM events WHERE app_id = $1 AND seq = k.seq AND lease_owner = $3 AND dead IS NOT TRUE FOR UPDATE OFFSET 0) e))
		RETURNING seq`
)

// flushAcks deletes a batch of settled events and marks the runs started
// in one transaction that, like every settlement, does not wait for the
// WAL flush. It returns the runs it marked: those this node still
// leases.
func (s *Store) flushAcks(batch []*ackReq) (map[eventKey]bool, error) {
	type seqs struct{ acks, starts []int64 }
	byApp := map[int64]*seqs{}
	var apps []int64
	for _, r := range batch {
		ss := byApp[r.app]
		if ss == nil {
			ss = &seqs{}
			byApp[r.app] = ss
			apps = append(apps, r.app)
		}
		if r.start {
			ss.starts = append(ss.starts, r.seq)
		} else {
			ss.acks = append(ss.acks, r.seq)
		}
	}
	slices.Sort(apps)
	started := map[eventKey]bool{}
	b := &pgx.Batch{} // one implicit transaction, as asyncBatch
	b.Queue(sqlKeyPlans)
	for _, app := range apps {
		ss := byApp[app]
		if len(ss.acks) > 0 {
			slices.Sort(ss.acks)
			b.Queue(sqlAck, app, ss.acks)
		}
		if len(ss.starts) > 0 {
			slices.Sort(ss.starts)
			b.Queue(sqlStart, app, ss.starts, s.node).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var seq int64
					if err := rows.Scan(&seq); err != nil {
						return err
					}
					started[eventKey{app, seq}] = true
				}
				return rows.Err()
			})
		}
	}
	s.acks.flushes.Add(1)
	// Bounded, so a connection that hangs cannot hold every later ack (and
	// the deliveries waiting on them): an ack lost this way costs one more
	// delivery once its lease runs out.
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	return started, s.pool.SendBatch(ctx, b).Close()
}

// ackTimeout bounds one flush of acks (a variable for tests).
var ackTimeout = 30 * time.Second

// closeAcks refuses new acks and waits for those in flight.
func (s *Store) closeAcks() {
	s.acks.mu.Lock()
	s.acks.closed = true
	s.acks.mu.Unlock()
	s.acks.wg.Wait()
}
