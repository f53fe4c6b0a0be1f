// Package storetest is the conformance suite every store.Store must pass
// (docs/architecture.md, "Storage and the write path"): one suite, every driver runs it. It checks the Store
// contract directly (commits, heads, the ledger, the per-app sequence,
// queries, changes, identity, durability across a reopen, the outbox of
// onChange events, scheduled ticks) and the engine's semantics on top of
// the store (ifRev, ifAbsent, tombstones, cursors, racing writers),
// because the engine's guarantees only hold if the store keeps its side
// of the contract.
//
// A driver's test runs it with a Harness:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, storetest.Harness{
//			Open: func(t *testing.T) func() store.Store {
//				dir := t.TempDir()
//				return func() store.Store {
//					st, err := sqlite.Open(dir)
//					if err != nil {
//						t.Fatal(err)
//					}
//					return st
//				}
//			},
//		})
//	}
package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/store"
)

// Harness tells the suite how to get stores of one driver.
type Harness struct {
	// Open prepares a fresh location (a directory, a database schema) that
	// no other test shares, and returns a function that opens a store
	// there. The suite calls the returned function again after closing
	// the previous store, to check what survives a reopen; it closes
	// every store it opens. Open reports its own failures with t.Fatal,
	// removes the location with t.Cleanup, and must be safe to call from
	// parallel tests.
	Open func(t *testing.T) (open func() store.Store)
}

// Start is the virtual clock's start. It has whole microseconds, so a
// driver storing microseconds (PostgreSQL) keeps times exactly.
var Start = time.Date(2031, time.March, 4, 5, 6, 7, 891011000, time.UTC)

type test struct {
	name string
	fn   func(t *testing.T, e *env)
}

// Run runs the whole suite against the harness's stores. Every subtest
// gets its own location and runs in parallel with the others.
func Run(t *testing.T, h Harness) {
	if h.Open == nil {
		t.Fatal("storetest: Harness.Open is nil")
	}
	groups := []struct {
		name  string
		tests []test
	}{
		{"Store", storeTests},
		{"Engine", engineTests},
		{"Events", eventTests},
		{"Visitors", visitorTests},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, tc := range g.tests {
				t.Run(tc.name, func(t *testing.T) {
					t.Parallel()
					tc.fn(t, newEnv(t, h))
				})
			}
		})
	}
}

// env is one test's store, engine and clock.
type env struct {
	t    *testing.T
	ctx  context.Context
	open func() store.Store
	st   store.Store
	clk  *clock.Virtual
	eng  *engine.Engine
}

func newEnv(t *testing.T, h Harness) *env {
	t.Helper()
	open := h.Open(t)
	if open == nil {
		t.Fatal("storetest: Harness.Open returned nil")
	}
	e := &env{t: t, ctx: context.Background(), open: open, clk: clock.NewVirtual(Start)}
	e.st = open()
	t.Cleanup(func() {
		if e.st != nil {
			if err := e.st.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		}
	})
	e.eng = engine.New(e.st, engine.Options{Clock: e.clk})
	return e
}

// reopen closes the store and opens the same location again, with a new
// engine on the same clock.
func (e *env) reopen() {
	e.t.Helper()
	st := e.st
	e.st = nil
	if err := st.Close(); err != nil {
		e.t.Fatalf("Close: %v", err)
	}
	e.st = e.open()
	e.eng = engine.New(e.st, engine.Options{Clock: e.clk})
}

// tick moves the virtual clock on, so consecutive writes get distinct
// times.
func (e *env) tick() time.Time {
	e.clk.Advance(1500 * time.Millisecond)
	return e.clk.Now()
}

// ---- store-level helpers ----

// user creates a user in the store, if it does not exist yet.
func (e *env) user(name string, admin bool) {
	e.t.Helper()
	err := e.st.CreateUser(e.ctx, store.User{Name: name, Admin: admin, Created: e.clk.Now()})
	if err != nil && !errors.Is(err, store.ErrExists) {
		e.t.Fatalf("CreateUser(%s): %v", name, err)
	}
}

// app creates owner/name in the store (and its owner) and returns its id.
func (e *env) app(owner, name string) int64 {
	e.t.Helper()
	e.user(owner, false)
	a, err := e.st.CreateApp(e.ctx, store.App{Owner: owner, Name: name, Created: e.clk.Now()})
	if err != nil {
		e.t.Fatalf("CreateApp(%s/%s): %v", owner, name, err)
	}
	if a.ID == 0 {
		e.t.Fatalf("CreateApp(%s/%s) returned id 0", owner, name)
	}
	return a.ID
}

func (e *env) write(app int64, db, id, base, rev, body string) *store.Write {
	w := &store.Write{AppID: app, DB: db, ID: id, BaseRev: base, Rev: rev,
		Writer: store.Writer{User: "alice"}, Path: "http", Time: e.clk.Now()}
	if body == "" {
		w.Deleted = true
	} else {
		w.Body = []byte(body)
	}
	return w
}

// commit commits a write that must succeed and returns its sequence.
func (e *env) commit(w *store.Write) int64 {
	e.t.Helper()
	seq, err := e.st.Commit(e.ctx, w)
	if err != nil {
		e.t.Fatalf("Commit(%s/%s base %q rev %q): %v", w.DB, w.ID, w.BaseRev, w.Rev, err)
	}
	return seq
}

// commitAll commits writes concurrently (a few at a time, so the
// driver's group commit is used) and fails on any error.
func (e *env) commitAll(ws []*store.Write) {
	e.t.Helper()
	parallel(e.t, len(ws), 16, func(i int) error {
		_, err := e.st.Commit(e.ctx, ws[i])
		return err
	})
}

func (e *env) get(app int64, db, id string) *store.Doc {
	e.t.Helper()
	d, err := e.st.Get(e.ctx, app, db, id)
	if err != nil {
		e.t.Fatalf("Get(%s/%s): %v", db, id, err)
	}
	return d
}

func (e *env) history(app int64, db, id string) []store.Revision {
	e.t.Helper()
	h, err := e.st.History(e.ctx, app, db, id)
	if err != nil {
		e.t.Fatalf("History(%s/%s): %v", db, id, err)
	}
	return h
}

func (e *env) changes(app int64, db string, since int64, limit int) []store.Revision {
	e.t.Helper()
	c, err := e.st.Changes(e.ctx, app, db, since, limit)
	if err != nil {
		e.t.Fatalf("Changes(%q, %d, %d): %v", db, since, limit, err)
	}
	return c
}

func (e *env) lastSeq(app int64) int64 {
	e.t.Helper()
	s, err := e.st.LastSeq(e.ctx, app)
	if err != nil {
		e.t.Fatalf("LastSeq: %v", err)
	}
	return s
}

func (e *env) query(q store.Query) []store.Doc {
	e.t.Helper()
	docs, err := e.st.Query(e.ctx, q)
	if err != nil {
		e.t.Fatalf("Query(%s = %s after %q): %v", q.Field, q.Key, q.After, err)
	}
	return docs
}

// ---- engine-level helpers ----

// The engine fixture: the admin, users alice (owner of alice/jobs and
// alice/other), bob and carol.
const (
	appJobs  = "alice/jobs"
	appOther = "alice/other"
)

var (
	admin = engine.Actor{User: engine.AdminUser, Admin: true}
	alice = engine.Actor{User: "alice"}
	bob   = engine.Actor{User: "bob"}
)

// fixture creates the engine fixture and returns the admin's token.
func (e *env) fixture() string {
	e.t.Helper()
	tok, err := e.eng.Bootstrap(e.ctx, "")
	if err != nil || tok == "" {
		e.t.Fatalf("Bootstrap: %q, %v", tok, err)
	}
	for _, u := range []string{"alice", "bob", "carol"} {
		if _, err := e.eng.AddUser(e.ctx, admin, u); err != nil {
			e.t.Fatalf("AddUser(%s): %v", u, err)
		}
	}
	for _, a := range []string{appJobs, appOther} {
		if _, err := e.eng.CreateApp(e.ctx, alice, a, false); err != nil {
			e.t.Fatalf("CreateApp(%s): %v", a, err)
		}
	}
	return tok
}

func (e *env) appID(ref string) int64 {
	e.t.Helper()
	owner, name, _ := strings.Cut(ref, "/")
	a, err := e.st.App(e.ctx, owner, name)
	if err != nil {
		e.t.Fatalf("App(%s): %v", ref, err)
	}
	return a.ID
}

// seqOf is the app's LastSeq, by reference.
func (e *env) seqOf(ref string) int64 {
	e.t.Helper()
	return e.lastSeq(e.appID(ref))
}

func (e *env) put(a engine.Actor, app, db, id, body string, o appcode.PutOptions) appcode.WriteResult {
	e.t.Helper()
	r, err := e.eng.Put(e.ctx, a, app, db, id, []byte(body), o)
	if err != nil {
		e.t.Fatalf("Put(%s %s/%s %s %+v): %v", app, db, id, body, o, err)
	}
	return r
}

// putAll puts bodies[id] for every id concurrently as alice.
func (e *env) putAll(app, db string, bodies map[string]string) {
	e.t.Helper()
	ids := sortedKeys(bodies)
	parallel(e.t, len(ids), 16, func(i int) error {
		_, err := e.eng.Put(e.ctx, alice, app, db, ids[i], []byte(bodies[ids[i]]), appcode.PutOptions{})
		return err
	})
}

func (e *env) del(a engine.Actor, app, db, id, ifRev string) appcode.WriteResult {
	e.t.Helper()
	r, err := e.eng.Delete(e.ctx, a, app, db, id, ifRev)
	if err != nil {
		e.t.Fatalf("Delete(%s %s/%s ifRev %q): %v", app, db, id, ifRev, err)
	}
	return r
}

// doc gets a live document as a map.
func (e *env) doc(app, db, id string) map[string]any {
	e.t.Helper()
	raw, err := e.eng.Get(e.ctx, alice, app, db, id)
	if err != nil {
		e.t.Fatalf("Get(%s %s/%s): %v", app, db, id, err)
	}
	return decodeObject(e.t, raw)
}

func (e *env) hist(app, db, id string) []engine.Entry {
	e.t.Helper()
	h, err := e.eng.History(e.ctx, alice, app, db, id)
	if err != nil {
		e.t.Fatalf("History(%s %s/%s): %v", app, db, id, err)
	}
	return h
}

// ---- generic helpers ----

// parallel runs fn(0..n-1) with at most width at a time and reports
// every error.
func parallel(t *testing.T, n, width int, fn func(i int) error) {
	t.Helper()
	sem := make(chan struct{}, width)
	errc := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				errc <- fmt.Errorf("#%d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// wantCode checks that err carries the engine error code.
func wantCode(t *testing.T, err error, code errs.Code, what string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: succeeded, want error %s", what, code)
	}
	if got := errs.CodeOf(err); got != code {
		t.Fatalf("%s: error %v (code %s), want code %s", what, err, got, code)
	}
	var ee *errs.Error
	if !errors.As(err, &ee) || ee.Message == "" {
		t.Fatalf("%s: error %v has no message for the user", what, err)
	}
}

// gen is the generation of a "<generation>-<hash>" rev.
func gen(t *testing.T, rev string) int {
	t.Helper()
	g, _, ok := strings.Cut(rev, "-")
	n, err := strconv.Atoi(g)
	if !ok || err != nil || n < 1 {
		t.Fatalf("rev %q is not <generation>-<hash>", rev)
	}
	return n
}

func decodeAny(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("not JSON: %s: %v", raw, err)
	}
	return v
}

func decodeObject(t *testing.T, raw []byte) map[string]any {
	t.Helper()
	m, ok := decodeAny(t, raw).(map[string]any)
	if !ok {
		t.Fatalf("not a JSON object: %s", raw)
	}
	return m
}

// sameJSON reports whether a and b are the same JSON value, whatever the
// key order and spacing. Numbers compare by their value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("not JSON: %s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("not JSON: %s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

func wantJSON(t *testing.T, got []byte, want string, what string) {
	t.Helper()
	if !sameJSON(t, got, []byte(want)) {
		t.Fatalf("%s: got %s, want %s", what, got, want)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func docIDs(docs []store.Doc) []string {
	ids := make([]string, len(docs))
	for i, d := range docs {
		ids[i] = d.ID
	}
	return ids
}

func pageIDs(t *testing.T, p appcode.Page) []string {
	t.Helper()
	ids := make([]string, len(p.Docs))
	for i, d := range p.Docs {
		id, _ := decodeObject(t, d)["_id"].(string)
		ids[i] = id
	}
	return ids
}

func wantIDs(t *testing.T, got, want []string, what string) {
	t.Helper()
	if len(got) == 0 && len(want) == 0 {
		return
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: got ids %q, want %q", what, got, want)
	}
}
