package postgres

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// Acks are the most frequent settlement by far (one per delivered
// event), and each alone is a transaction of its own: four statements
// for one row. The acks waiting at one moment share one transaction
// instead, one DELETE per app, the way Commits share theirs. Each
// SettleEvent still returns only once its ack is in the database, so
// nothing reads an acked event back as leased.

// ackReq is one ack waiting for the next flush.
type ackReq struct {
	app, seq int64
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
// for it.
func (s *Store) ack(ctx context.Context, app, seq int64) error {
	a := &s.acks
	req := &ackReq{app: app, seq: seq, done: make(chan error, 1)}
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

// runAcks flushes the queue until it is empty.
func (s *Store) runAcks() {
	a := &s.acks
	defer a.wg.Done()
	for {
		a.mu.Lock()
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
		err := s.flushAcks(batch)
		for _, r := range batch {
			r.done <- err
		}
	}
}

// flushAcks deletes a batch of settled events in one transaction that,
// like every settlement, does not wait for the WAL flush.
func (s *Store) flushAcks(batch []*ackReq) error {
	byApp := map[int64][]int64{}
	var apps []int64
	for _, r := range batch {
		if _, ok := byApp[r.app]; !ok {
			apps = append(apps, r.app)
		}
		byApp[r.app] = append(byApp[r.app], r.seq)
	}
	slices.Sort(apps)
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SET LOCAL synchronous_commit = off")
	for _, app := range apps {
		seqs := byApp[app]
		slices.Sort(seqs)
		b.Queue(`DELETE FROM events WHERE app_id = $1 AND seq = ANY($2::int8[])`, app, seqs)
	}
	b.Queue("COMMIT")
	s.acks.flushes.Add(1)
	// Bounded, so a connection that hangs cannot hold every later ack (and
	// the deliveries waiting on them): an ack lost this way costs one more
	// delivery once its lease runs out.
	ctx, cancel := context.WithTimeout(context.Background(), ackTimeout)
	defer cancel()
	return s.pool.SendBatch(ctx, b).Close()
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
