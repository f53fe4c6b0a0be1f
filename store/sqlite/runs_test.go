package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/handoff-run/handoff/store"
)

// runsEnv is a store with events to run, and the means to look at it as
// a crash would leave it.
type runsEnv struct {
	t   *testing.T
	dir string
	st  *Store
	app int64
	t0  time.Time
}

func newRunsEnv(t *testing.T, n int) (*runsEnv, []int64) {
	e := &runsEnv{t: t, dir: t.TempDir(), t0: time.Unix(1_800_000_000, 0)}
	e.st = open(t, e.dir)
	e.app = newApp(t, e.st)
	var seqs []int64
	for i := range n {
		w := put(e.app, "jobs", fmt.Sprint("j", i), `{}`)
		w.Time, w.Event = e.t0, &store.EventSpec{NextAt: e.t0}
		seq, err := e.st.Commit(context.Background(), w)
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, seq)
	}
	return e, seqs
}

func (e *runsEnv) claim(st *Store, n int) []store.Event {
	e.t.Helper()
	evs, err := st.ClaimEvents(context.Background(), store.Claim{AppID: e.app, Now: e.t0, Limit: n, Lease: time.Minute})
	if err != nil {
		e.t.Fatal(err)
	}
	return evs
}

func (e *runsEnv) start(seqs ...int64) {
	e.t.Helper()
	for _, s := range seqs {
		if err := e.st.StartEvent(context.Background(), e.app, s); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *runsEnv) settle(seq int64, s store.Settlement) {
	e.t.Helper()
	if err := e.st.SettleEvent(context.Background(), e.app, seq, s); err != nil {
		e.t.Fatal(err)
	}
}

// crashImage opens a copy of the store's files as they are now, as the
// process finds them on restart after being killed at this moment.
func (e *runsEnv) crashImage() *Store {
	e.t.Helper()
	dir := e.t.TempDir()
	for _, name := range []string{FileName, FileName + "-wal", FileName + runsSuffix} {
		b, err := os.ReadFile(filepath.Join(e.dir, name))
		if err != nil {
			e.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			e.t.Fatal(err)
		}
	}
	return open(e.t, dir)
}

// wantInterrupted checks that a claim's interrupted events are those of
// want, with its attempts.
func wantInterrupted(t *testing.T, evs []store.Event, want map[int64]int) {
	t.Helper()
	for _, ev := range evs {
		n, ok := want[ev.Seq]
		if ev.Interrupted != ok || ok && ev.Attempts != n {
			t.Errorf("event %d: interrupted %v, attempts %d; want %v, %d", ev.Seq, ev.Interrupted, ev.Attempts, ok, n)
		}
	}
}

// TestRunsOutcomesNotWritten: a process killed after its runs settled,
// but before the writer wrote the outcomes: a run given back does not
// count (its void is in the runs file), an ack that was lost does.
func TestRunsOutcomesNotWritten(t *testing.T) {
	t.Parallel()
	e, ss := newRunsEnv(t, 3)
	e.claim(e.st, 3)
	e.start(ss[0], ss[1])
	release, _ := holdWriter(t, e.st)
	before := e.st.wdb.Stats().WaitCount
	// A settlement other than an ack waits for the writer.
	go e.st.SettleEvent(context.Background(), e.app, ss[0], store.Settlement{Attempts: 0, NextAt: e.t0})
	waitWriterBlocked(t, e.st, before)
	e.settle(ss[1], store.Settlement{Ack: true})
	crashed := e.crashImage()
	release()
	wantInterrupted(t, e.claim(crashed, 10), map[int64]int{ss[1]: 1})
}

// TestRunsFileRewrite: past its size limit the runs file is rewritten
// with the runs in flight only, which still count after a crash.
func TestRunsFileRewrite(t *testing.T) {
	// Not parallel: it lowers the package's runsMax, which every store
	// of the other tests reads.
	defer func(n int64) { runsMax = n }(runsMax)
	runsMax = 4 * runLen
	e, ss := newRunsEnv(t, 2)
	e.claim(e.st, 2)
	e.start(ss[0])
	for i := range 10 {
		e.start(ss[1])
		e.settle(ss[1], store.Settlement{Attempts: i + 1, NextAt: e.t0})
		eventually(t, func() bool { return len(e.claim(e.st, 10)) == 1 })
	}
	if fi, err := os.Stat(filepath.Join(e.dir, FileName+runsSuffix)); err != nil || fi.Size() > runsMax {
		t.Fatalf("runs file: %v, %v; want at most %d bytes", fi, err, runsMax)
	}
	wantInterrupted(t, e.claim(e.crashImage(), 10), map[int64]int{ss[0]: 1})
}

// TestRunsReplayStartsOver: a dead event replayed has no run that
// counts, though the runs file still holds its start.
func TestRunsReplayStartsOver(t *testing.T) {
	t.Parallel()
	e, ss := newRunsEnv(t, 2)
	e.claim(e.st, 2)
	e.start(ss[0], ss[1]) // ss[1] keeps the runs file from starting over
	e.settle(ss[0], store.Settlement{Dead: true, Attempts: 1, NextAt: e.t0, LastError: "dead"})
	eventually(t, func() bool {
		evs, err := e.st.ListEvents(context.Background(), e.app, true, 0, 10)
		return err == nil && len(evs) == 1
	})
	if err := e.st.ReplayEvent(context.Background(), e.app, ss[0], e.t0); err != nil {
		t.Fatal(err)
	}
	wantInterrupted(t, e.claim(e.crashImage(), 10), map[int64]int{ss[1]: 1})
}

// TestRunsTornTail: a runs file cut short or garbled at its end (the
// machine died mid-write) is read up to the damage.
func TestRunsTornTail(t *testing.T) {
	t.Parallel()
	e, ss := newRunsEnv(t, 2)
	e.claim(e.st, 2)
	e.start(ss[0])
	e.st.Close()
	f, err := os.OpenFile(filepath.Join(e.dir, FileName+runsSuffix), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(encodeRun(nil, runStart, runKey{e.app, ss[1]}, 1)[:runLen-3])
	f.Close()
	wantInterrupted(t, e.claim(open(t, e.dir), 10), map[int64]int{ss[0]: 1})
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("not within 20 s")
		}
		time.Sleep(time.Millisecond)
	}
}
