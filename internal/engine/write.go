package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/runner"
	"github.com/handoff-run/handoff/store"
)

// maxHeadRetries bounds how often a write re-reads a head that moved under
// it before giving up; each retry means another writer committed.
const maxHeadRetries = 1000

// Put writes a document. id may be empty: then the body's _id is used, or
// a new id is minted.
func (e *Engine) Put(ctx context.Context, a Actor, appRef, db, id string, body []byte, o appcode.PutOptions) (appcode.WriteResult, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return appcode.WriteResult{}, err
	}
	if err := ValidDB(db); err != nil {
		return appcode.WriteResult{}, err
	}
	if o.IfRev != "" && o.IfAbsent {
		return appcode.WriteResult{}, errs.New(errs.Invalid, "ifRev and ifAbsent exclude each other: ifRev updates an existing document, ifAbsent only creates; pass one")
	}
	p, err := parseDoc(body, e.maxDoc)
	if err != nil {
		return appcode.WriteResult{}, err
	}
	// A create needs no read of the head it expects not to find: a minted
	// id is new, and ifAbsent says the caller expects none. The commit
	// checks that guess like a hint's (no base on an existing document is
	// refused), and then the write reads the head and decides again.
	absent := o.IfAbsent
	switch {
	case id == "" && p.id == "":
		if o.IfRev != "" {
			return appcode.WriteResult{}, errs.New(errs.Invalid, "ifRev needs a document id; pass the id of the document to update")
		}
		if o.IfAbsent {
			// A minted id is new every time, so the write could never be
			// the no-op that ifAbsent promises on a re-run.
			return appcode.WriteResult{}, errs.New(errs.Invalid, "ifAbsent needs a document id: without one a new document is minted each time; pass an id or give the body an _id")
		}
		id, absent = mintID(e.clock.Now()), true
	case id == "":
		id = p.id
	case p.id != "" && p.id != id:
		return appcode.WriteResult{}, errs.New(errs.Invalid, "the body's _id %q differs from the id %q of the request; drop one of them", p.id, id)
	}
	if err := ValidID(id); err != nil {
		return appcode.WriteResult{}, err
	}
	return e.write(ctx, a, app, db, id, false, p.body, o, absent)
}

// Delete writes a tombstone. Deleting a missing or deleted document is
// not_found.
func (e *Engine) Delete(ctx context.Context, a Actor, appRef, db, id, ifRev string) (appcode.WriteResult, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return appcode.WriteResult{}, err
	}
	if err := ValidDB(db); err != nil {
		return appcode.WriteResult{}, err
	}
	if err := ValidID(id); err != nil {
		return appcode.WriteResult{}, err
	}
	return e.write(ctx, a, app, db, id, true, nil, appcode.PutOptions{IfRev: ifRev}, false)
}

// write is the critical section of docs/architecture.md, "Storage and the write path": read the head, check the
// conditions, decide, and commit only if the head is still the one read.
// A head that moved means another writer won the race: read it again and
// decide again, never overwrite blindly. absent: the caller expects no
// document, so the first try decides against none without reading.
func (e *Engine) write(ctx context.Context, a Actor, app *appState, db, id string, deleted bool, body []byte, o appcode.PutOptions, absent bool) (res appcode.WriteResult, err error) {
	if err := e.spendFanOut(app, a); err != nil {
		return appcode.WriteResult{}, err
	}
	defer clock.Busy(e.clock)() // a commit in progress (WaitIdle)
	defer func() {
		if err != nil || res.Existing {
			e.refundFanOut(app, a) // nothing was written
		}
	}()
	gate := app.gate(db)
	if gate == nil {
		if err := e.mayWrite(a, app); err != nil {
			return appcode.WriteResult{}, err
		}
	}
	hints := e.caps.Heads
	// Only where a read costs a round trip (a store that hints) is the
	// guess worth a refused commit when it is wrong.
	absent = absent && hints != nil
	for range maxHeadRetries {
		// A hint saves the read, but it may be stale: the commit checks
		// it, and a refusal stands only once a fresh read agrees.
		var head *store.Doc
		hinted := false
		if hints != nil {
			head = hints.HeadHint(app.ID, db, id)
			hinted = head != nil
			hints = nil
		}
		if !hinted && absent {
			hinted = true // that there is none
		}
		absent = false
		if !hinted {
			var err error
			if head, err = e.st.Get(ctx, app.ID, db, id); err != nil {
				return appcode.WriteResult{}, internal(err)
			}
		}
		res, done, err := e.writeAt(ctx, a, app, gate, db, id, deleted, body, o, head)
		// Only what the head decided is checked again, never the outcome
		// of a commit: one that failed may still have been applied.
		if hinted && done && (res.Existing || err != nil && !errors.Is(err, errCommit)) {
			fresh, gerr := e.st.Get(ctx, app.ID, db, id)
			if gerr != nil {
				return appcode.WriteResult{}, internal(gerr)
			}
			if (fresh == nil) != (head == nil) || fresh != nil && fresh.Rev != head.Rev {
				continue
			}
		}
		if ce, ok := err.(commitError); ok {
			err = ce.error
		}
		if done || err != nil {
			return res, err
		}
	}
	return appcode.WriteResult{}, errs.New(errs.Unavailable, "document %q changed %d times while this write tried to commit; retry later", id, maxHeadRetries)
}

// errCommit marks an error of the commit itself, as opposed to a
// decision taken from the head.
var errCommit = errors.New("commit failed")

type commitError struct{ error }

func (e commitError) Is(target error) bool { return target == errCommit }
func (e commitError) Unwrap() error        { return e.error }

// writeAt decides a write against head and commits it if head is still
// the document's head. done is false when it was not: decide again.
func (e *Engine) writeAt(ctx context.Context, a Actor, app *appState, gate appcode.AccessFunc, db, id string, deleted bool, body []byte, o appcode.PutOptions, head *store.Doc) (res appcode.WriteResult, done bool, err error) {
	live := head != nil && !head.Deleted
	if o.IfRev != "" {
		switch {
		case head == nil:
			return res, true, errs.New(errs.Conflict, "document %q does not exist, so ifRev %s cannot match; put it without ifRev to create it", id, o.IfRev)
		case head.Deleted:
			return res, true, errs.New(errs.Conflict, "document %q was deleted at rev %s; read it again before writing", id, head.Rev)
		case head.Rev != o.IfRev:
			return res, true, errs.New(errs.Conflict, "document %q is at rev %s, not %s; read it again and retry with the new rev", id, head.Rev, o.IfRev)
		}
	}
	if deleted && !live {
		return res, true, errs.New(errs.NotFound, "document %q not found in database %q", id, db)
	}
	if o.IfAbsent && live {
		return appcode.WriteResult{ID: id, Rev: head.Rev, Existing: true}, true, nil
	}
	w := &store.Write{
		AppID: app.ID, DB: db, ID: id,
		Deleted: deleted, Body: body,
		Writer: a.Writer(), Path: a.LedgerPath(), Time: e.clock.Now(),
	}
	if head != nil {
		w.BaseRev, w.PrevSeq = head.Rev, head.Seq
	}
	if gate != nil {
		// The decision is made against this head; the commit below
		// happens only if the head is still this one.
		dec, err := gate.Check(ctx, e.accessInput(ctx, a, app, db, id, deleted, body, head, live))
		if err == nil {
			err = checkDecision(dec)
		}
		if err != nil {
			if errs.Is(err, errs.AccessError) {
				// The writer gets the error too, but the app's developer
				// is often someone else: the log keeps it for them.
				e.appLog(app, "access", "error", fmt.Sprintf("access.js failed on a write of %s/%s: %v", db, id, err),
					appcode.LogFields("db", db, "id", id, "user", a.User, "handler", a.Handler))
			}
			return res, true, err
		}
		w.Channels, w.Grants = dec.Channels, dec.Grants
		if w.Channels == nil {
			w.Channels = []string{}
		}
		if deleted {
			// Whoever could read the document sees it go.
			w.Channels, w.Grants = head.Channels, nil
		}
	}
	w.Rev = nextRev(w.BaseRev, deleted, body)
	var guarded bool
	w.Event, guarded = e.eventFor(a, app, w, head)
	var slot *runner.Slot
	var ra runner.App // the app as the runner sees it, when there is an event
	if w.Event != nil {
		ra = app.forRunner()
		slot = e.runner.Reserve(ra, w)
	}
	seq, err := e.st.Commit(ctx, w)
	if errors.Is(err, store.ErrHeadMoved) {
		slot.Cancel()
		return res, false, nil
	}
	if err != nil {
		slot.Cancel()
		return res, true, commitError{internal(err)}
	}
	if w.GrantsChanged {
		app.grants.clear()
	}
	switch {
	case slot != nil && w.Event.Claimed:
		slot.Start(ra, w, head, seq, e.clock.Now())
	case w.Event != nil:
		slot.Cancel()
		e.runner.Poke(ra)
	}
	if guarded {
		e.loopGuarded(a, app, w)
	}
	return appcode.WriteResult{ID: id, Rev: w.Rev, Seq: seq}, true, nil
}

func (e *Engine) accessInput(ctx context.Context, a Actor, app *appState, db, id string, deleted bool, body []byte, head *store.Doc, live bool) appcode.AccessInput {
	in := appcode.AccessInput{App: app.ref(), DB: db, ID: id, Deleted: deleted, Handler: a.Handler, Timeout: app.accessTimeout(), HeapLimit: app.heapLimit(), Now: e.clock.Now()}
	if deleted {
		in.Doc = appcode.DocJSON(id, "", true, nil)
	} else {
		in.Doc = appcode.DocJSON(id, "", false, body)
	}
	if live {
		in.OldDoc = appcode.DocJSON(id, head.Rev, false, head.Body)
	}
	if a.User != "" {
		u := &appcode.AccessUser{ID: a.User, IsOwner: a.User == app.Owner, Device: a.Device}
		var docRoles []string
		if g, err := e.grantsFor(ctx, app, a.User); err == nil {
			docRoles, in.ReadChannels = g.roles, g.channels
		}
		u.Roles = app.rolesOf(a.User, docRoles)
		if u.Roles == nil {
			u.Roles = []string{}
		}
		in.User = u
	}
	return in
}
