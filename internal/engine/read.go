package engine

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// Query and changes page sizes.
const (
	DefaultLimit = 100
	MaxLimit     = 1000
)

// Get returns a live document as JSON with _id and _rev.
func (e *Engine) Get(ctx context.Context, a Actor, appRef, db, id string) (json.RawMessage, error) {
	app, v, err := e.readable(ctx, a, appRef, db, false)
	if err != nil {
		return nil, err
	}
	if err := ValidID(id); err != nil {
		return nil, err
	}
	d, err := e.st.Get(ctx, app.ID, db, id)
	if err != nil {
		return nil, internal(err)
	}
	if d == nil || d.Deleted {
		return nil, errs.New(errs.NotFound, "document %q not found in database %q", id, db)
	}
	if !v.sees(app, db, d.Channels) {
		return nil, notReadable(id)
	}
	return appcode.DocJSON(d.ID, d.Rev, false, d.Body), nil
}

// Entry is one ledger entry as the API shows it.
type Entry struct {
	Seq     int64           `json:"seq"`
	ID      string          `json:"id"`
	DB      string          `json:"db"`
	Rev     string          `json:"rev"`
	Deleted bool            `json:"deleted,omitempty"`
	Doc     json.RawMessage `json:"doc"`
	Writer  store.Writer    `json:"writer"`
	Path    string          `json:"path"`
	Time    time.Time       `json:"time"`
}

func entry(r store.Revision) Entry {
	return Entry{Seq: r.Seq, ID: r.ID, DB: r.DB, Rev: r.Rev, Deleted: r.Deleted,
		Doc: appcode.DocJSON(r.ID, r.Rev, r.Deleted, r.Body), Writer: r.Writer, Path: r.Path, Time: r.Time.UTC()}
}

// History returns every revision of a document, oldest first.
func (e *Engine) History(ctx context.Context, a Actor, appRef, db, id string) ([]Entry, error) {
	app, v, err := e.readable(ctx, a, appRef, db, false)
	if err != nil {
		return nil, err
	}
	if err := ValidID(id); err != nil {
		return nil, err
	}
	revs, err := e.st.History(ctx, app.ID, db, id)
	if err != nil {
		return nil, internal(err)
	}
	if len(revs) == 0 {
		return nil, errs.New(errs.NotFound, "document %q not found in database %q", id, db)
	}
	out := make([]Entry, 0, len(revs))
	for _, r := range revs {
		if v.sees(app, db, r.Channels) {
			out = append(out, entry(r))
		}
	}
	if len(out) == 0 {
		return nil, notReadable(id)
	}
	return out, nil
}

// Query lists live documents whose field equals key (JSON), by id.
func (e *Engine) Query(ctx context.Context, a Actor, appRef, db, field string, key json.RawMessage, limit int, after string) (appcode.Page, error) {
	if key == nil {
		key = json.RawMessage{}
	}
	return e.Select(ctx, a, appRef, db, Selector{Field: field, Key: key}, limit, after)
}

// Scan lists the live documents of a database by id.
func (e *Engine) Scan(ctx context.Context, a Actor, appRef, db string, limit int, after string) (appcode.Page, error) {
	app, v, err := e.readable(ctx, a, appRef, db, false)
	if err != nil {
		return appcode.Page{}, err
	}
	limit, err = pageLimit(limit)
	if err != nil {
		return appcode.Page{}, err
	}
	afterID, err := decodeCursor(after)
	if err != nil {
		return appcode.Page{}, err
	}
	return e.fillPage(app, v, db, limit, pos{id: afterID}, nil, func(after pos, n int) ([]store.Doc, error) {
		return e.st.Scan(ctx, app.ID, db, after.id, n)
	})
}

// fillPage reads pages from the store until it has limit documents the
// reader may see (or the end), so filtering never returns a short page
// with more to come. It reads one extra document to know whether there
// is a next page. keyOf, for queries in (value, id) order, gives the
// value a cursor resumes after; nil means id order.
func (e *Engine) fillPage(app *appState, v *view, db string, limit int, after pos, keyOf func(store.Doc) json.RawMessage, fetch func(after pos, n int) ([]store.Doc, error)) (appcode.Page, error) {
	p := appcode.Page{Docs: make([]json.RawMessage, 0, min(limit, 64))}
	var last pos
	at := func(d store.Doc) pos {
		if keyOf == nil {
			return pos{id: d.ID}
		}
		return pos{id: d.ID, key: keyOf(d)}
	}
	for {
		docs, err := fetch(after, limit+1)
		if err != nil {
			return appcode.Page{}, internal(err)
		}
		for _, d := range docs {
			if !v.sees(app, db, d.Channels) {
				after = at(d)
				continue
			}
			if len(p.Docs) == limit {
				if keyOf == nil {
					p.Next = encodeCursor(last.id)
				} else {
					p.Next = encodeRangeCursor(last.key, last.id)
				}
				return p, nil
			}
			p.Docs = append(p.Docs, appcode.DocJSON(d.ID, d.Rev, false, d.Body))
			last = at(d)
			after = last
		}
		if len(docs) <= limit {
			return p, nil
		}
	}
}

// Changes is a page of the changes feed. Last is the sequence to resume
// from.
type Changes struct {
	Changes []Entry `json:"changes"`
	Last    int64   `json:"last"`
}

// Changes lists revisions after since, in commit order; db "" means all.
func (e *Engine) Changes(ctx context.Context, a Actor, appRef, db string, since int64, limit int) (Changes, error) {
	app, v, err := e.readable(ctx, a, appRef, db, true)
	if err != nil {
		return Changes{}, err
	}
	if since < 0 {
		return Changes{}, errs.New(errs.Invalid, "since must be 0 or a sequence number from an earlier answer")
	}
	limit, err = pageLimit(limit)
	if err != nil {
		return Changes{}, err
	}
	// Last advances past filtered entries too, so a reader resumes after
	// them instead of reading them again. Filtering keeps reading until
	// the page is full or the feed is exhausted.
	c := Changes{Changes: []Entry{}, Last: since}
	for len(c.Changes) < limit {
		revs, err := e.st.Changes(ctx, app.ID, db, c.Last, limit)
		if err != nil {
			return Changes{}, internal(err)
		}
		for _, r := range revs {
			if len(c.Changes) == limit {
				break
			}
			if v.sees(app, r.DB, r.Channels) {
				c.Changes = append(c.Changes, entry(r))
			}
			c.Last = r.Seq
		}
		if len(revs) < limit {
			break
		}
	}
	return c, nil
}

// Databases lists the app's databases.
func (e *Engine) Databases(ctx context.Context, a Actor, appRef string) ([]string, error) {
	app, _, err := e.readable(ctx, a, appRef, "", true)
	if err != nil {
		return nil, err
	}
	dbs, err := e.st.Databases(ctx, app.ID)
	if err != nil {
		return nil, internal(err)
	}
	if dbs == nil {
		dbs = []string{}
	}
	return dbs, nil
}

// readable resolves the app and what a may read of it; allDBs lets db be
// "" for reads that span the whole app.
func (e *Engine) readable(ctx context.Context, a Actor, appRef, db string, allDBs bool) (*appState, *view, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return nil, nil, err
	}
	if db != "" || !allDBs {
		if err := ValidDB(db); err != nil {
			return nil, nil, err
		}
	}
	v, err := e.readView(ctx, a, app)
	if err != nil {
		return nil, nil, err
	}
	return app, v, nil
}

func notReadable(id string) error {
	return &errs.Error{Code: errs.Forbidden, Reason: "no channel of this document is granted to you",
		Message: "you may not read document " + strconv.Quote(id) + ": none of its channels is granted to you; the access function decides who reads what"}
}

func pageLimit(limit int) (int, error) {
	switch {
	case limit == 0:
		return DefaultLimit, nil
	case limit < 0 || limit > MaxLimit:
		return 0, errs.New(errs.Invalid, "limit %d is out of range; use 1 to %d", limit, MaxLimit)
	}
	return limit, nil
}

// Cursors are opaque to clients: base64 of the last id of the page, so
// the next page starts strictly after it (keyset pagination never skips
// or repeats a document that stays in the result).
func encodeCursor(id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte("i:" + id))
}

func decodeCursor(c string) (string, error) {
	if c == "" {
		return "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	// The id goes to the store as text, which must be UTF-8 without NUL.
	if err != nil || !bytes.HasPrefix(b, []byte("i:")) || !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0 {
		return "", errs.New(errs.Invalid, "cursor %q is not one this server returned; pass the next value of the previous page, or none to start over", c)
	}
	return string(b[2:]), nil
}
