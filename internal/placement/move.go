package placement

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/store"
)

// FenceWait bounds how long a move waits for the writes in flight in the
// app's database when it starts.
var FenceWait = 30 * time.Second

// DropGrace is how long the database an app left keeps its copy after
// the switch, for the nodes that have not heard of it yet: their reads
// find the app as it was at the switch rather than nothing. Every node
// hears within the app watchers' 1 s poll, if not at once.
var DropGrace = 2 * time.Second

// Move moves app a to database to and returns the database it was in.
//
// The app's writes pause while it moves (they wait, up to WriteWait, and
// are then refused as unavailable, to retry); reads go on. Step by step:
// the move is recorded (moving_to); the source database refuses the
// app's writes (the fence) and the move waits for the transactions that
// could have written before; the app's data and sequence are copied to
// the target in one transaction, which lifts the fence there; the
// placement switches (moved_from records the source), every node is told;
// after DropGrace the source is emptied of the app, fenced still; the
// record is cleared.
//
// A move cut short (its node died, its database went away) leaves the
// record behind, and the app fenced in the source until it is moved
// again: moving it to the same target again finishes the move, and
// moving it to the database it is in undoes it. No step loses a row:
// until the switch the source holds every row and only the source may
// be written; after it only the target may, and holds them all.
// Events in flight keep their leases across the move; an event settled
// in the source after the copy is delivered again from the target (at
// least once, as always).
func (r *Router) Move(ctx context.Context, a store.App, to int) (from int, err error) {
	if to < 0 || to >= len(r.dbs) {
		return -1, errs.New(errs.Invalid, "there is no database %d: this server has databases 0 to %d, numbered in the order of its --postgres URLs", to, len(r.dbs)-1)
	}
	conn, err := r.pool.Acquire(ctx)
	if err != nil {
		return -1, err
	}
	defer conn.Release()
	var mine bool
	key := fmt.Sprintf("handoff placement %d", a.ID)
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock(hashtextextended($1, 0))`, key).Scan(&mine); err != nil {
		return -1, err
	}
	if !mine {
		return -1, errs.New(errs.Conflict, "app %s/%s is being moved already; wait for that move to end", a.Owner, a.Name)
	}
	defer conn.Exec(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock(hashtextextended($1, 0))`, key)

	p, err := r.read(ctx, conn, a.ID)
	if err != nil {
		return -1, err
	}
	from = p.db
	// What an earlier move cut short left behind.
	if p.movedFrom >= 0 {
		if p.movedFrom != p.db {
			if err := r.dbs[p.movedFrom].DropAppData(ctx, a.ID); err != nil {
				return from, fmt.Errorf("empty database %d of the app it left: %w", p.movedFrom, err)
			}
		}
		p.movedFrom = -1
		if err := r.save(ctx, a.ID, p); err != nil {
			return from, err
		}
	}
	if p.movingTo >= 0 && (p.movingTo != to || to == from) {
		if err := r.undo(ctx, a.ID, p); err != nil {
			return from, err
		}
		p.movingTo = -1
	}
	if to == from {
		// Nothing to move; lift a fence an app creation cut short left.
		return from, r.dbs[from].Unfence(ctx, a.ID)
	}

	p.movingTo = to
	if err := r.save(ctx, a.ID, p); err != nil {
		return from, err
	}
	copied := func() error {
		fctx, cancel := context.WithTimeout(ctx, FenceWait)
		defer cancel()
		if err := r.dbs[from].Fence(fctx, a.ID); err != nil {
			return fmt.Errorf("wait for the app's writes in flight in database %d: %w", from, err)
		}
		if err := r.dbs[from].CopyAppTo(ctx, r.dbs[to], a); err != nil {
			return fmt.Errorf("copy the app from database %d to %d: %w", from, to, err)
		}
		return nil
	}()
	if copied != nil {
		if err := r.undo(context.WithoutCancel(ctx), a.ID, p); err != nil {
			return from, errors.Join(copied, fmt.Errorf("and undoing the move failed, so the app's writes are refused: move it again (to finish) or to database %d (to undo): %w", from, err))
		}
		return from, copied
	}

	if err := r.save(ctx, a.ID, place{db: to, movingTo: -1, movedFrom: from}); err != nil {
		return from, err
	}
	r.forget(a.ID)
	if err := r.dbs[0].TouchApp(ctx, a.ID); err != nil {
		return from, fmt.Errorf("the app moved, but telling the other nodes failed (they find out at their next write): %w", err)
	}
	select {
	case <-ctx.Done():
		return from, fmt.Errorf("the app moved, but the request ended before database %d was emptied of it; move it again to finish: %w", from, ctx.Err())
	case <-time.After(DropGrace):
	}
	if err := r.dbs[from].DropAppData(ctx, a.ID); err != nil {
		return from, fmt.Errorf("the app moved, but emptying database %d of it failed; move it again to finish: %w", from, err)
	}
	return from, r.save(ctx, a.ID, place{db: to, movingTo: -1, movedFrom: -1})
}

// undo ends a move p records before its switch: the target is emptied of
// the copy, the source takes writes again.
func (r *Router) undo(ctx context.Context, app int64, p place) error {
	if p.movingTo != p.db {
		if err := r.dbs[p.movingTo].DropAppData(ctx, app); err != nil {
			return err
		}
	}
	if err := r.dbs[p.db].Unfence(ctx, app); err != nil {
		return err
	}
	p.movingTo = -1
	return r.save(ctx, app, p)
}

// save records where app lives.
func (r *Router) save(ctx context.Context, app int64, p place) error {
	opt := func(n int) any {
		if n < 0 {
			return nil
		}
		return n
	}
	_, err := r.pool.Exec(ctx, `INSERT INTO placements (app_id, db, moving_to, moved_from) VALUES ($1, $2, $3, $4)
		ON CONFLICT (app_id) DO UPDATE SET db = $2, moving_to = $3, moved_from = $4`,
		app, p.db, opt(p.movingTo), opt(p.movedFrom))
	return err
}
