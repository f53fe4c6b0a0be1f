package postgres

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// pollEvery is the safety net under LISTEN: a lost notification (the
// listening connection dropped, the announcing node died between COMMIT
// and NOTIFY) delays a watcher by at most this much.
const pollEvery = time.Second

// watcher calls the Watch callbacks with each app's latest seq: at once
// for this node's commits, on NOTIFY for the other nodes', and from a poll
// of every app's seq in case a notification was lost. Callbacks see each
// app's seq only grow; a seq heard twice is told once.
type watcher struct {
	s    *Store
	conf *pgx.ConnConfig

	mu   sync.Mutex // held while callbacks run, so they see seqs in order
	fns  []func(appID, seq int64)
	last map[int64]int64

	cancel context.CancelFunc
	done   sync.WaitGroup
	// heard counts the notifications received (tests tell NOTIFY from
	// the poll with it).
	heard atomic.Int64
}

func startWatcher(ctx context.Context, s *Store, conf *pgx.ConnConfig) (*watcher, error) {
	w := &watcher{s: s, conf: conf, last: map[int64]int64{}}
	// Start from the seqs of now: a watcher hears of commits after Open.
	if err := w.poll(ctx, false); err != nil {
		return nil, err
	}
	conn, err := w.listen(ctx)
	if err != nil {
		return nil, err
	}
	bg, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	w.done.Add(2)
	go w.listenLoop(bg, conn)
	go w.pollLoop(bg)
	return w, nil
}

func (w *watcher) stop() {
	w.cancel()
	w.done.Wait()
}

func (w *watcher) add(fn func(appID, seq int64)) {
	w.mu.Lock()
	w.fns = append(w.fns, fn)
	w.mu.Unlock()
}

// seen tells the callbacks of app's seq, unless they heard of it already.
func (w *watcher) seen(app, seq int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if seq <= w.last[app] {
		return
	}
	w.last[app] = seq
	for _, fn := range w.fns {
		fn(app, seq)
	}
}

func (w *watcher) listen(ctx context.Context) (*pgx.Conn, error) {
	conn, err := pgx.ConnectConfig(ctx, w.conf)
	if err != nil {
		return nil, err
	}
	if _, err := conn.Exec(ctx, "LISTEN "+notifyChannel); err != nil {
		conn.Close(context.Background())
		return nil, err
	}
	return conn, nil
}

// listenLoop waits for notifications on a connection of its own, and
// reconnects when it drops; after a reconnect it polls, since what was
// announced meanwhile was missed.
func (w *watcher) listenLoop(ctx context.Context, conn *pgx.Conn) {
	defer w.done.Done()
	backoff := 50 * time.Millisecond
	for {
		if conn == nil {
			var err error
			if conn, err = w.listen(ctx); err != nil {
				select {
				case <-ctx.Done():
					return
				case <-time.After(backoff):
				}
				backoff = min(2*backoff, 5*time.Second)
				continue
			}
			backoff = 50 * time.Millisecond
			w.poll(ctx, true)
		}
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			conn.Close(context.Background())
			conn = nil
			if ctx.Err() != nil {
				return
			}
			continue
		}
		app, seq, ok := parsePayload(n.Payload)
		if ok {
			w.heard.Add(1)
			w.seen(app, seq)
		}
	}
}

func parsePayload(p string) (app, seq int64, ok bool) {
	a, s, found := strings.Cut(p, ":")
	if !found {
		return 0, 0, false
	}
	app, err1 := strconv.ParseInt(a, 10, 64)
	seq, err2 := strconv.ParseInt(s, 10, 64)
	return app, seq, err1 == nil && err2 == nil
}

func (w *watcher) pollLoop(ctx context.Context) {
	defer w.done.Done()
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.poll(ctx, true)
		}
	}
}

// poll reads every app's seq; with tell it tells the callbacks of those
// that moved, else it only records them.
func (w *watcher) poll(ctx context.Context, tell bool) error {
	rows, err := w.s.pool.Query(ctx, `SELECT id, seq FROM apps WHERE seq > 0`)
	if err != nil {
		return err
	}
	type appSeq struct{ app, seq int64 }
	seqs, err := collect(rows, func(row pgx.CollectableRow) (appSeq, error) {
		var a appSeq
		err := row.Scan(&a.app, &a.seq)
		return a, err
	})
	if err != nil {
		return err
	}
	for _, a := range seqs {
		if tell {
			w.seen(a.app, a.seq)
			continue
		}
		w.mu.Lock()
		w.last[a.app] = max(w.last[a.app], a.seq)
		w.mu.Unlock()
	}
	return nil
}
