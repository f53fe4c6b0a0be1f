package sqlite

import (
	"database/sql"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io/fs"
	"os"
)

// The runs file records the onChange runs in flight, beside the
// database. StartEvent appends a record with one write, no fsync and no
// turn in the writer's queue: a write survives the death of this process
// (the kernel holds it), and that is all it must survive. A handler that
// kills the process finds its run counted when the store is next opened
// (recoverRuns). A turn in the writer's queue before each run would cost
// it a group commit's wait under load.
//
// The database stays the truth of every outcome: a record only says that
// run number attempt of an event started. On open, a live event whose
// attempts are below that number never settled that run: it was
// interrupted. A settlement that lowers the attempts (a run given back,
// a replay) first appends a record that voids the start.
const runsSuffix = "-runs"

const (
	runStart byte = 'S'
	runVoid  byte = 'V'
	// runLen is one record: kind, app, seq, attempt, CRC-32 of the rest.
	runLen = 1 + 8 + 8 + 4 + 4
)

// runsMax is the size past which the file is rewritten with only the
// runs still in flight (a variable for tests).
var runsMax int64 = 1 << 20

type runKey struct{ app, seq int64 }

// runs is the runs file and the runs in flight. Guarded by leases.mu.
type runs struct {
	path string
	f    *os.File
	size int64
	// live are the runs started whose settlement is not yet written: the
	// attempt number of each.
	live map[runKey]int
}

func encodeRun(b []byte, kind byte, k runKey, attempt int) []byte {
	var r [runLen]byte
	r[0] = kind
	binary.LittleEndian.PutUint64(r[1:], uint64(k.app))
	binary.LittleEndian.PutUint64(r[9:], uint64(k.seq))
	binary.LittleEndian.PutUint32(r[17:], uint32(attempt))
	binary.LittleEndian.PutUint32(r[21:], crc32.ChecksumIEEE(r[:21]))
	return append(b, r[:]...)
}

// readRuns returns the runs a file says are in flight. A torn or garbled
// tail (a crash of the machine mid-write) ends the reading.
func readRuns(b []byte) map[runKey]int {
	live := map[runKey]int{}
	for ; len(b) >= runLen; b = b[runLen:] {
		if binary.LittleEndian.Uint32(b[21:]) != crc32.ChecksumIEEE(b[:21]) {
			break
		}
		k := runKey{int64(binary.LittleEndian.Uint64(b[1:])), int64(binary.LittleEndian.Uint64(b[9:]))}
		switch b[0] {
		case runStart:
			live[k] = int(binary.LittleEndian.Uint32(b[17:]))
		case runVoid:
			delete(live, k)
		}
	}
	return live
}

// openRuns counts the runs that were in flight when the store was last
// closed or its process died, then starts an empty runs file. It runs
// before the writer starts, on the write connection.
func openRuns(db *sql.DB, path string) (*runs, error) {
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if live := readRuns(b); len(live) > 0 {
		tx, err := db.Begin()
		if err != nil {
			return nil, err
		}
		for k, n := range live {
			// Only a run that was never settled: a settled one recorded
			// its attempts, an acked one is gone.
			if _, err := tx.Exec(`UPDATE events SET attempts = ?, running = 1 WHERE app_id = ? AND seq = ? AND dead = 0 AND attempts < ?`,
				n, k.app, k.seq, n); err != nil {
				tx.Rollback()
				return nil, err
			}
		}
		// Durable before the file is emptied: else a crash in between
		// would lose the count.
		if err := tx.Commit(); err != nil {
			return nil, err
		}
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &runs{path: path, f: f, live: map[runKey]int{}}, nil
}

// start records that run number attempt of an event begins.
func (r *runs) start(k runKey, attempt int) error {
	if err := r.append(encodeRun(nil, runStart, k, attempt)); err != nil {
		return err
	}
	r.live[k] = attempt
	return nil
}

// void records that no start of the event recorded so far counts any
// more: its attempts are about to go down.
func (r *runs) void(k runKey) error {
	if r.size == 0 {
		return nil
	}
	return r.append(encodeRun(nil, runVoid, k, 0))
}

// settled forgets a run once its settlement is written. With no run left
// in flight, the file starts over.
func (r *runs) settled(k runKey) {
	delete(r.live, k)
	if len(r.live) == 0 && r.size > 0 {
		if r.f.Truncate(0) == nil {
			r.size = 0
		}
	}
}

func (r *runs) append(rec []byte) error {
	if r.size+int64(len(rec)) > runsMax {
		if err := r.rewrite(); err != nil {
			return err
		}
	}
	n, err := r.f.Write(rec)
	r.size += int64(n)
	return err
}

// rewrite replaces the file with the starts of the runs in flight. The
// rename swaps them in one step, so a crash leaves one or the other.
func (r *runs) rewrite() error {
	var b []byte
	for k, n := range r.live {
		b = encodeRun(b, runStart, k, n)
	}
	// Opened before the rename, so the handle kept is the file that is
	// in place whatever happens after.
	tmp := r.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err = f.Write(b); err == nil {
		err = os.Rename(tmp, r.path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	r.f.Close()
	r.f, r.size = f, int64(len(b))
	return nil
}

func (r *runs) close() error { return r.f.Close() }
