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
//
// It hears the same way of commits that changed an app's grants (told to
// the WatchGrants callbacks before the Watch callbacks hear of that seq)
// and of changes to an app's settings (WatchApps), which the database's
// triggers count in the apps row and announce (schema.go, migration 2).
type watcher struct {
	s    *Store
	conf *pgx.ConnConfig

	mu     sync.Mutex // held while callbacks run, so they see seqs in order
	fns    []func(appID, seq int64)
	grants []func(appID int64)
	apps   []func(appID int64)
	// revoked hears of credentials revoked on any node (revoke.go).
	revoked []func(user string)
	last    map[int64]appMarks

	cancel context.CancelFunc
	done   sync.WaitGroup
	// heard counts the notifications received (tests tell NOTIFY from
	// the poll with it).
	heard atomic.Int64
}

func startWatcher(ctx context.Context, s *Store, conf *pgx.ConnConfig) (*watcher, error) {
	w := &watcher{s: s, conf: conf, last: map[int64]appMarks{}}
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

// appMarks is what the callbacks were last told of an app: its seq, the
// seq of its latest grant change, and its settings counter.
type appMarks struct{ seq, grants, conf int64 }

func (w *watcher) add(fn func(appID, seq int64)) {
	w.mu.Lock()
	w.fns = append(w.fns, fn)
	w.mu.Unlock()
}

func (w *watcher) addGrants(fn func(appID int64)) {
	w.mu.Lock()
	w.grants = append(w.grants, fn)
	w.mu.Unlock()
}

func (w *watcher) addApps(fn func(appID int64)) {
	w.mu.Lock()
	w.apps = append(w.apps, fn)
	w.mu.Unlock()
}

// committed tells the callbacks of a batch committed on this node, up to
// seq, a grant change among its writes first. The batch calls it once its
// writes are durable.
func (w *watcher) committed(app, seq int64, grantsChanged bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if grantsChanged {
		w.grantsLocked(app, seq)
	}
	w.seenLocked(app, seq)
}

// seenLocked tells the callbacks of app's seq, unless they heard of it
// already.
func (w *watcher) seenLocked(app, seq int64) {
	m := w.last[app]
	if seq <= m.seq {
		return
	}
	m.seq = seq
	w.last[app] = m
	for _, fn := range w.fns {
		fn(app, seq)
	}
}

// grantsLocked tells the grant callbacks that the commit at seq changed
// app's grants, unless that is the change they heard of last. Two such
// commits may end in either order (seqs.go), so an earlier seq heard
// later is told too.
func (w *watcher) grantsLocked(app, seq int64) {
	m := w.last[app]
	if seq == m.grants || seq == 0 {
		return
	}
	m.grants = max(m.grants, seq)
	w.last[app] = m
	for _, fn := range w.grants {
		fn(app)
	}
}

// settingsLocked tells the app callbacks that app's settings counter
// reached conf, unless they heard of it already.
func (w *watcher) settingsLocked(app, conf int64) {
	m := w.last[app]
	if conf <= m.conf {
		return
	}
	m.conf = conf
	w.last[app] = m
	for _, fn := range w.apps {
		fn(app)
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
			// Revocations announced meanwhile are lost, and no poll
			// finds them: every feed checks its reader again.
			w.tellRevoked("")
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
		if user, ok := strings.CutPrefix(n.Payload, revokedPrefix); ok {
			w.heard.Add(1)
			w.tellRevoked(user)
			continue
		}
		kind, app, v, ok := parsePayload(n.Payload)
		if !ok {
			continue
		}
		w.heard.Add(1)
		w.mu.Lock()
		switch kind {
		case "":
			if _, ours := w.s.pids.Load(n.PID); !ours {
				w.s.dues.drop(app) // another node's commit: its events may be due
			}
			w.seenLocked(app, v)
		case "g":
			w.grantsLocked(app, v)
		case "c":
			w.settingsLocked(app, v)
		}
		w.mu.Unlock()
	}
}

// parsePayload reads "app:seq" (a commit), "g:app:seq" (a commit that
// changed grants) or "c:app:conf" (a change of settings).
func parsePayload(p string) (kind string, app, n int64, ok bool) {
	if k, rest, found := strings.Cut(p, ":"); found && (k == "g" || k == "c") {
		kind, p = k, rest
	}
	a, s, found := strings.Cut(p, ":")
	if !found {
		return "", 0, 0, false
	}
	app, err1 := strconv.ParseInt(a, 10, 64)
	n, err2 := strconv.ParseInt(s, 10, 64)
	return kind, app, n, err1 == nil && err2 == nil
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

// poll reads every app's seq, grant change and settings counter; with
// tell it tells the callbacks of those that moved (a grant change before
// the seq), else it only records them.
func (w *watcher) poll(ctx context.Context, tell bool) error {
	rows, err := w.s.pool.Query(ctx, `SELECT a.id, coalesce((SELECT max(seq) FROM revisions r WHERE r.app_id = a.id), 0), a.grants_seq, a.conf
		FROM apps a`)
	if err != nil {
		return err
	}
	type appRow struct {
		app int64
		appMarks
	}
	apps, err := collect(rows, func(row pgx.CollectableRow) (appRow, error) {
		var a appRow
		err := row.Scan(&a.app, &a.seq, &a.grants, &a.conf)
		return a, err
	})
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range apps {
		if tell {
			w.settingsLocked(a.app, a.conf)
			w.grantsLocked(a.app, a.grants)
			if a.seq > w.last[a.app].seq {
				w.s.dues.drop(a.app)
			}
			w.seenLocked(a.app, a.seq)
			continue
		}
		m := w.last[a.app]
		w.last[a.app] = appMarks{max(m.seq, a.seq), max(m.grants, a.grants), max(m.conf, a.conf)}
	}
	return nil
}
