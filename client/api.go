package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/handoff-run/handoff/errs"
)

// Identity is the answer of WhoAmI.
type Identity struct {
	User   string `json:"user"`
	Admin  bool   `json:"admin"`
	Device string `json:"device,omitempty"`
}

// NewUser is a created user with its first token.
type NewUser struct {
	Name  string `json:"name"`
	Token string `json:"token"`
}

// App is an app as the API shows it.
type App struct {
	App    string   `json:"app"`
	Owner  string   `json:"owner"`
	Name   string   `json:"name"`
	Public bool     `json:"public"`
	Roles  []string `json:"roles,omitempty"` // the caller's roles, "owner" included
	// Signup is who may sign up as a visitor: closed, invite or open.
	Signup string `json:"signup,omitempty"`
}

// Member is one user's roles in an app.
type Member struct {
	User  string   `json:"user"`
	Roles []string `json:"roles"`
}

// Writer says who made a revision.
type Writer struct {
	User    string `json:"user,omitempty"`
	Device  string `json:"device,omitempty"`
	Handler string `json:"handler,omitempty"`
}

// Entry is one revision of the ledger (history and changes).
type Entry struct {
	Seq     int64           `json:"seq"`
	ID      string          `json:"id"`
	DB      string          `json:"db"`
	Rev     string          `json:"rev"`
	Deleted bool            `json:"deleted,omitempty"`
	Doc     json.RawMessage `json:"doc"`
	Writer  Writer          `json:"writer"`
	Path    string          `json:"path"`
	Time    time.Time       `json:"time"`
}

// Page is a page of documents; Next is the cursor of the next page, ""
// on the last one.
type Page struct {
	Docs []json.RawMessage `json:"docs"`
	Next string            `json:"next"`
}

// Changes is a page of the changes feed; Last is the sequence to resume
// from.
type Changes struct {
	Changes []Entry `json:"changes"`
	Last    int64   `json:"last"`
}

// WriteResult reports a committed revision, or with IfAbsent the one that
// already existed.
type WriteResult struct {
	OK       bool   `json:"ok"`
	ID       string `json:"id"`
	Rev      string `json:"rev"`
	Seq      int64  `json:"seq,omitempty"`
	Existing bool   `json:"existing,omitempty"`
}

// PutOptions are the conditions of a put.
type PutOptions struct {
	IfRev    string // commit only if the head is still this revision
	IfAbsent bool   // create only; an existing document is reported, not changed
}

// BulkOptions are the conditions of a bulk write.
type BulkOptions struct {
	IfAbsent bool
}

// BulkResult is the outcome of one document of a bulk write, in the order
// of the request. Error is set when OK is false.
type BulkResult struct {
	OK       bool        `json:"ok"`
	ID       string      `json:"id,omitempty"`
	Rev      string      `json:"rev,omitempty"`
	Existing bool        `json:"existing,omitempty"`
	Error    *errs.Error `json:"error,omitempty"`
}

// MaxBulkDocs is the most documents one Bulk call may carry.
const MaxBulkDocs = 1000

// Health checks that the server answers.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil)
}

// WhoAmI reports who the client's token belongs to.
func (c *Client) WhoAmI(ctx context.Context) (Identity, error) {
	var out Identity
	err := c.do(ctx, http.MethodGet, "/v1/whoami", nil, nil, &out)
	return out, err
}

// AddUser creates a user (admin only) and returns its first token.
func (c *Client) AddUser(ctx context.Context, name string) (NewUser, error) {
	var out NewUser
	err := c.do(ctx, http.MethodPost, "/v1/users", nil, map[string]string{"name": name}, &out)
	return out, err
}

// User is a user as the API shows it, with the apps they own.
type User struct {
	Name    string    `json:"name"`
	Admin   bool      `json:"admin,omitempty"`
	Created time.Time `json:"created"`
	Apps    []string  `json:"apps"`
}

// Users lists every user (admin only).
func (c *Client) Users(ctx context.Context) ([]User, error) {
	var out struct {
		Users []User `json:"users"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/users", nil, nil, &out)
	return nonNil(out.Users), err
}

// RemoveUser deletes a user with their tokens, devices and roles in apps
// (admin only). The admin, and a user who owns apps, cannot be removed.
func (c *Client) RemoveUser(ctx context.Context, user string) error {
	if user == "" {
		return errs.New(errs.Invalid, "user name is empty; pass the user to remove")
	}
	return c.do(ctx, http.MethodDelete, "/v1/users/"+url.PathEscape(user), nil, nil, nil)
}

// RotateToken gives user a new token and revokes all the user's others:
// the admin may do it for anyone, a user for themself.
func (c *Client) RotateToken(ctx context.Context, user string) (NewUser, error) {
	var out NewUser
	if user == "" {
		return out, errs.New(errs.Invalid, "user name is empty; pass the user whose token to replace")
	}
	err := c.do(ctx, http.MethodPost, "/v1/users/"+url.PathEscape(user)+"/token", nil, map[string]string{}, &out)
	return out, err
}

// CreateApp creates the app "owner/name".
func (c *Client) CreateApp(ctx context.Context, app string, public bool) (App, error) {
	var out App
	err := c.do(ctx, http.MethodPost, "/v1/apps", nil, map[string]any{"app": app, "public": public}, &out)
	return out, err
}

// Apps lists the apps the caller can see.
func (c *Client) Apps(ctx context.Context) ([]App, error) {
	var out struct {
		Apps []App `json:"apps"`
	}
	err := c.do(ctx, http.MethodGet, "/v1/apps", nil, nil, &out)
	return nonNil(out.Apps), err
}

// AddMember gives user a role in app.
func (c *Client) AddMember(ctx context.Context, app, user, role string) error {
	p, err := appPath(app)
	if err != nil {
		return err
	}
	return c.do(ctx, http.MethodPost, p+"/members", nil, map[string]string{"user": user, "role": role}, nil)
}

// Members lists the members of app.
func (c *Client) Members(ctx context.Context, app string) ([]Member, error) {
	p, err := appPath(app)
	if err != nil {
		return nil, err
	}
	var out struct {
		Members []Member `json:"members"`
	}
	err = c.do(ctx, http.MethodGet, p+"/members", nil, nil, &out)
	return nonNil(out.Members), err
}

// Databases lists the databases of app.
func (c *Client) Databases(ctx context.Context, app string) ([]string, error) {
	p, err := appPath(app)
	if err != nil {
		return nil, err
	}
	var out struct {
		DBs []string `json:"dbs"`
	}
	err = c.do(ctx, http.MethodGet, p+"/dbs", nil, nil, &out)
	return nonNil(out.DBs), err
}

// Put writes doc (a JSON object). With id "" the body's _id is used, or
// the server mints one.
func (c *Client) Put(ctx context.Context, app, db, id string, doc json.RawMessage, o PutOptions) (WriteResult, error) {
	var (
		p      string
		err    error
		method = http.MethodPut
	)
	if id == "" {
		method = http.MethodPost
		if p, err = dbPath(app, db); err == nil {
			p += "/docs"
		}
	} else {
		p, err = docPath(app, db, id)
	}
	if err != nil {
		return WriteResult{}, err
	}
	q := url.Values{}
	if o.IfRev != "" {
		q.Set("ifRev", o.IfRev)
	}
	if o.IfAbsent {
		q.Set("ifAbsent", "true")
	}
	if doc == nil {
		doc = json.RawMessage{}
	}
	var out WriteResult
	err = c.do(ctx, method, p, q, doc, &out)
	return out, err
}

// Get reads the live document id, with _id and _rev.
func (c *Client) Get(ctx context.Context, app, db, id string) (json.RawMessage, error) {
	p, err := docPath(app, db, id)
	if err != nil {
		return nil, err
	}
	var out json.RawMessage
	err = c.do(ctx, http.MethodGet, p, nil, nil, &out)
	return out, err
}

// History lists every revision of id, oldest first, tombstones included.
func (c *Client) History(ctx context.Context, app, db, id string) ([]Entry, error) {
	p, err := docPath(app, db, id)
	if err != nil {
		return nil, err
	}
	var out struct {
		History []Entry `json:"history"`
	}
	err = c.do(ctx, http.MethodGet, p+"/history", nil, nil, &out)
	return nonNil(out.History), err
}

// Delete writes a tombstone for id, only if its head is ifRev when ifRev
// is not "".
func (c *Client) Delete(ctx context.Context, app, db, id, ifRev string) (WriteResult, error) {
	p, err := docPath(app, db, id)
	if err != nil {
		return WriteResult{}, err
	}
	q := url.Values{}
	if ifRev != "" {
		q.Set("ifRev", ifRev)
	}
	var out WriteResult
	err = c.do(ctx, http.MethodDelete, p, q, nil, &out)
	return out, err
}

// Query lists live documents whose field equals key (a JSON value), one
// page of at most limit (0: the server's default) after the cursor after.
func (c *Client) Query(ctx context.Context, app, db, field string, key json.RawMessage, limit int, after string) (Page, error) {
	return c.query(ctx, app, db, url.Values{"field": {field}, "key": {string(key)}}, limit, after)
}

// QueryRange lists live documents whose field holds a number or string
// from from (inclusive) to to (exclusive), both JSON values; nil leaves
// that end open. Numbers come before strings; the page is in order of
// the field's value, then id.
func (c *Client) QueryRange(ctx context.Context, app, db, field string, from, to json.RawMessage, limit int, after string) (Page, error) {
	q := url.Values{"field": {field}}
	if from != nil {
		q.Set("from", string(from))
	}
	if to != nil {
		q.Set("to", string(to))
	}
	return c.query(ctx, app, db, q, limit, after)
}

// QueryPrefix lists live documents whose field is a string that starts
// with prefix, in order of the field's value, then id.
func (c *Client) QueryPrefix(ctx context.Context, app, db, field, prefix string, limit int, after string) (Page, error) {
	return c.query(ctx, app, db, url.Values{"field": {field}, "prefix": {prefix}}, limit, after)
}

func (c *Client) query(ctx context.Context, app, db string, sel url.Values, limit int, after string) (Page, error) {
	p, err := dbPath(app, db)
	if err != nil {
		return Page{}, err
	}
	q := pageQuery(limit, after)
	for k, v := range sel {
		q[k] = v
	}
	var out Page
	err = c.do(ctx, http.MethodGet, p+"/query", q, nil, &out)
	out.Docs = nonNil(out.Docs)
	return out, err
}

// Scan lists the live documents of a database by id, one page at a time.
func (c *Client) Scan(ctx context.Context, app, db string, limit int, after string) (Page, error) {
	p, err := dbPath(app, db)
	if err != nil {
		return Page{}, err
	}
	var out Page
	err = c.do(ctx, http.MethodGet, p+"/docs", pageQuery(limit, after), nil, &out)
	out.Docs = nonNil(out.Docs)
	return out, err
}

// Changes lists revisions committed after since, in commit order; db ""
// reads the feed of the whole app.
func (c *Client) Changes(ctx context.Context, app, db string, since int64, limit int) (Changes, error) {
	var p string
	var err error
	if db == "" {
		p, err = appPath(app)
	} else {
		p, err = dbPath(app, db)
	}
	if err != nil {
		return Changes{}, err
	}
	q := pageQuery(limit, "")
	if since > 0 {
		q.Set("since", strconv.FormatInt(since, 10))
	}
	var out Changes
	err = c.do(ctx, http.MethodGet, p+"/changes", q, nil, &out)
	out.Changes = nonNil(out.Changes)
	return out, err
}

// Bulk writes up to MaxBulkDocs documents (each with its _id, or minted)
// in one request. The error is for the request as a whole; each document's
// own outcome is in its BulkResult, in the order of docs.
func (c *Client) Bulk(ctx context.Context, app, db string, docs []json.RawMessage, o BulkOptions) ([]BulkResult, error) {
	p, err := dbPath(app, db)
	if err != nil {
		return nil, err
	}
	if len(docs) > MaxBulkDocs {
		return nil, errs.New(errs.Invalid, "a bulk write carries at most %d documents, not %d; split it", MaxBulkDocs, len(docs))
	}
	body := struct {
		Docs     []json.RawMessage `json:"docs"`
		IfAbsent bool              `json:"ifAbsent,omitempty"`
	}{nonNil(docs), o.IfAbsent}
	var out struct {
		Results []BulkResult `json:"results"`
	}
	if err := c.do(ctx, http.MethodPost, p+"/bulk", nil, body, &out); err != nil {
		return nil, err
	}
	if len(out.Results) != len(docs) {
		return nil, errs.New(errs.Internal, "the server answered a bulk write of %d documents with %d results", len(docs), len(out.Results))
	}
	return out.Results, nil
}

func pageQuery(limit int, after string) url.Values {
	q := url.Values{}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if after != "" {
		q.Set("after", after)
	}
	return q
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
