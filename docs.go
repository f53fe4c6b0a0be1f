package handoff

import (
	"context"
	"encoding/json"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
)

// Docs reads and writes the documents of one app as one writer: a user,
// from Instance.As, or a handler, in its run (and only until the run
// returns). Every write goes through the database's table, and reads show
// what the writer may read.
type Docs struct {
	e     *engine.Engine
	app   string
	actor engine.Actor
	// hc is a handler's own context, set in its runs: writes go through
	// it so that they continue the run's chain (engine.Actor's Depth and
	// Origin), which bounds how far handlers may write each other on.
	hc appcode.HandlerContext
}

// PutOptions are the conditions of a put.
type PutOptions struct {
	// IfRev commits only if the document's head is still this revision:
	// compare-and-set. A head that moved is code conflict; read it again
	// and decide again. This is how two workers claiming one job end
	// with one claim.
	IfRev string
	// IfAbsent creates the document only if no live one exists; otherwise
	// the put changes nothing and Result.Existing is true.
	IfAbsent bool
}

// Result is a committed revision, or with IfAbsent the existing one.
type Result struct {
	ID       string
	Rev      string
	Seq      int64 // the commit's place in the app's ledger; 0 if Existing
	Existing bool
}

// Put writes a document: doc is a struct or a map, encoded with
// encoding/json, or JSON itself as a Doc, json.RawMessage or []byte. Its
// _rev, if any, is dropped, so a document read and changed can be written
// back (pass the rev read as IfRev). id may be "": then the document's
// _id is used, or a new id is minted.
func (d *Docs) Put(ctx context.Context, db, id string, doc any, o PutOptions) (Result, error) {
	body, err := encode(doc, "document")
	if err != nil {
		return Result{}, err
	}
	var r appcode.WriteResult
	if d.hc != nil {
		r, err = d.hc.Put(ctx, db, id, body, appcode.PutOptions(o))
	} else {
		r, err = d.e.Put(ctx, d.actor, d.app, db, id, body, appcode.PutOptions(o))
	}
	return Result(r), err
}

// Delete writes a tombstone; ifRev, when not "", is the compare-and-set
// of PutOptions.IfRev. The table sees the delete (Write.Deleted). A
// document that is absent or deleted is code not_found.
func (d *Docs) Delete(ctx context.Context, db, id, ifRev string) (Result, error) {
	var r appcode.WriteResult
	var err error
	if d.hc != nil {
		r, err = d.hc.Delete(ctx, db, id, ifRev)
	} else {
		r, err = d.e.Delete(ctx, d.actor, d.app, db, id, ifRev)
	}
	return Result(r), err
}

// Get returns a live document with _id and _rev. One that is absent or
// deleted is code not_found.
func (d *Docs) Get(ctx context.Context, db, id string) (Doc, error) {
	raw, err := d.e.Get(ctx, d.actor, d.app, db, id)
	return Doc(raw), err
}

// Page is one page of a query. Next is the cursor of the next page, ""
// on the last one.
type Page struct {
	Docs []Doc
	Next string
}

// Query returns the live documents of db whose field (a top-level name
// or a dotted path) equals key, which is encoded as JSON, in id order:
// limit of them (0 for 100, at most 1000), from the cursor after ("" for
// the first page).
func (d *Docs) Query(ctx context.Context, db, field string, key any, limit int, after string) (Page, error) {
	k, err := encode(key, "key")
	if err != nil {
		return Page{}, err
	}
	p, err := d.e.Query(ctx, d.actor, d.app, db, field, k, limit, after)
	if err != nil {
		return Page{}, err
	}
	out := Page{Docs: make([]Doc, len(p.Docs)), Next: p.Next}
	for i, doc := range p.Docs {
		out.Docs[i] = Doc(doc)
	}
	return out, nil
}

// Revision is one entry of a document's history.
type Revision struct {
	Seq     int64
	Rev     string
	Deleted bool
	Doc     Doc
	// Who wrote it: a user (and the device signed with), and the
	// handler if one did.
	User, Device, Handler string
	Time                  time.Time
}

// History returns the revisions of a document, oldest first: the walk
// of its status through the state machine. It lists the revisions the
// reader may read; a document never written is code not_found.
func (d *Docs) History(ctx context.Context, db, id string) ([]Revision, error) {
	es, err := d.e.History(ctx, d.actor, d.app, db, id)
	if err != nil {
		return nil, err
	}
	out := make([]Revision, len(es))
	for i, e := range es {
		out[i] = Revision{Seq: e.Seq, Rev: e.Rev, Deleted: e.Deleted, Doc: Doc(e.Doc),
			User: e.Writer.User, Device: e.Writer.Device, Handler: e.Writer.Handler, Time: e.Time}
	}
	return out, nil
}

// encode returns v as JSON: as it is when it already is JSON.
func encode(v any, what string) ([]byte, error) {
	switch x := v.(type) {
	case Doc:
		return x, nil
	case json.RawMessage:
		return x, nil
	case []byte:
		return x, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, errs.New(errs.Invalid, "the %s does not encode as JSON: %v; pass a struct, a map or JSON bytes", what, err)
	}
	return b, nil
}
