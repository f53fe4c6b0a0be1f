package backend_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/handoff-run/handoff/clock"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/backend"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// start is where every virtual clock of the tests begins.
var start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// env is a Compiler on a virtual clock.
type env struct {
	t     testing.TB
	clock *clock.Virtual
	c     *backend.Compiler
	logs  *syncBuffer // the server logger's output
}

func newEnv(t testing.TB) *env { return newEnvWith(t, nil) }

// newEnvWith passes setup as Options.Setup.
func newEnvWith(t testing.TB, setup func(vm *jsvm.VM) error) *env {
	v := clock.NewVirtual(start)
	logs := &syncBuffer{}
	return &env{t: t, clock: v, logs: logs, c: backend.New(backend.Options{
		Now:       v.Now,
		AfterFunc: virtualAfterFunc(v),
		Setup:     setup,
		Logger:    slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})}
}

func virtualAfterFunc(v *clock.Virtual) func(time.Duration, func()) func() bool {
	return func(d time.Duration, f func()) func() bool { return v.AfterFunc(d, f).Stop }
}

// compile compiles src as backend.js and closes it when the test ends.
func (e *env) compile(src string) appcode.Backend {
	e.t.Helper()
	b, err := e.c.CompileBackend("backend.js", src)
	if err != nil {
		e.t.Fatalf("CompileBackend: %v", err)
	}
	e.t.Cleanup(b.Close)
	return b
}

// refused compiles src and wants an invalid error containing every part.
func (e *env) refused(src string, parts ...string) *errs.Error {
	e.t.Helper()
	b, err := e.c.CompileBackend("backend.js", src)
	if err == nil {
		b.Close()
		e.t.Fatalf("CompileBackend succeeded, want a refusal for:\n%s", src)
	}
	var ee *errs.Error
	if !errors.As(err, &ee) || ee.Code != errs.Invalid {
		e.t.Fatalf("got %v (%T), want an *errs.Error with code invalid", err, err)
	}
	for _, p := range parts {
		if !strings.Contains(ee.Message, p) {
			e.t.Fatalf("message %q does not contain %q", ee.Message, p)
		}
	}
	return ee
}

// waitTimers blocks until at least n timers are armed on the clock: the
// handler has reached its await. The real-time bound only keeps a broken
// test from hanging; nothing waits on it when things work.
func (e *env) waitTimers(n int) {
	e.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		added := e.clock.TimerAdded()
		if e.clock.Pending() >= n {
			return
		}
		select {
		case <-added:
		case <-deadline:
			e.t.Fatalf("timed out waiting for %d armed timers (have %d)", n, e.clock.Pending())
		}
	}
}

// onChangeAsync runs OnChange on its own goroutine.
func onChangeAsync(b appcode.Backend, ev appcode.ChangeEvent, hc appcode.HandlerContext) <-chan error {
	done := make(chan error, 1)
	go func() { done <- b.OnChange(context.Background(), ev, hc) }()
	return done
}

// wait returns the result of an async run, failing after a real-time
// safety bound.
func wait(t testing.TB, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("handler did not return")
		return nil
	}
}

// event is a change event of a document as the fake stores it.
func event(db, id string, doc json.RawMessage) appcode.ChangeEvent {
	return appcode.ChangeEvent{DB: db, DocID: id, Doc: doc, Seq: 1, Attempt: 1}
}

// fakeHC is an in-memory appcode.HandlerContext: revisions, ifRev and
// ifAbsent as the engine does them, queries by field, a log and secrets.
type fakeHC struct {
	owner, name string
	secrets     map[string]string
	// forbid, when set, refuses writes for which it returns a reason.
	forbid func(db string, doc map[string]any) string

	// logged receives every logged message, so a test can wait until a
	// handler has reached a point it announces.
	logged chan string

	mu   sync.Mutex
	docs map[string]map[string]map[string]any // db → id → live doc
	gen  map[string]int                       // db/id → last generation
	logs []logLine
	ids  int
}

type logLine struct {
	Level, Message string
	Fields         string
}

func newFake() *fakeHC {
	return &fakeHC{owner: "alice", name: "jobs", secrets: map[string]string{},
		docs: map[string]map[string]map[string]any{}, gen: map[string]int{}, logged: make(chan string, 1000)}
}

func (f *fakeHC) App() (string, string) { return f.owner, f.name }

func (f *fakeHC) Put(_ context.Context, db, id string, body json.RawMessage, o appcode.PutOptions) (appcode.WriteResult, error) {
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		return appcode.WriteResult{}, errs.New(errs.Invalid, "the document is not a JSON object: %v", err)
	}
	delete(doc, "_rev") // a _rev in the body is ignored, as by the engine
	f.mu.Lock()
	defer f.mu.Unlock()
	if id == "" {
		if s, ok := doc["_id"].(string); ok {
			id = s
		} else {
			f.ids++
			id = fmt.Sprintf("minted-%d", f.ids)
		}
	}
	doc["_id"] = id
	if f.forbid != nil {
		if reason := f.forbid(db, doc); reason != "" {
			return appcode.WriteResult{}, &errs.Error{Code: errs.Forbidden, Reason: reason, Message: "access.js refused the write: " + reason}
		}
	}
	head := f.docs[db][id]
	if o.IfAbsent && head != nil {
		return appcode.WriteResult{ID: id, Rev: head["_rev"].(string), Existing: true}, nil
	}
	if o.IfRev != "" && (head == nil || head["_rev"] != o.IfRev) {
		return appcode.WriteResult{}, errs.New(errs.Conflict, "%s/%s is no longer at revision %s; read it again and retry", db, id, o.IfRev)
	}
	return f.commit(db, id, doc), nil
}

func (f *fakeHC) commit(db, id string, doc map[string]any) appcode.WriteResult {
	key := db + "/" + id
	f.gen[key]++
	rev := fmt.Sprintf("%d-r", f.gen[key])
	if doc == nil {
		delete(f.docs[db], id)
		return appcode.WriteResult{ID: id, Rev: rev}
	}
	doc["_rev"] = rev
	if f.docs[db] == nil {
		f.docs[db] = map[string]map[string]any{}
	}
	f.docs[db][id] = doc
	return appcode.WriteResult{ID: id, Rev: rev}
}

func (f *fakeHC) Get(_ context.Context, db, id string) (json.RawMessage, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	doc := f.docs[db][id]
	if doc == nil {
		return nil, nil
	}
	return json.Marshal(doc)
}

func (f *fakeHC) Delete(_ context.Context, db, id, ifRev string) (appcode.WriteResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	head := f.docs[db][id]
	if head == nil {
		return appcode.WriteResult{}, errs.New(errs.NotFound, "%s/%s does not exist", db, id)
	}
	if ifRev != "" && head["_rev"] != ifRev {
		return appcode.WriteResult{}, errs.New(errs.Conflict, "%s/%s is no longer at revision %s", db, id, ifRev)
	}
	return f.commit(db, id, nil), nil
}

func (f *fakeHC) Query(_ context.Context, db, field string, key json.RawMessage, limit int, after string) (appcode.Page, error) {
	if limit <= 0 {
		limit = 100
	}
	var want any
	if err := json.Unmarshal(key, &want); err != nil {
		return appcode.Page{}, errs.New(errs.Invalid, "bad key: %v", err)
	}
	wantJSON, _ := json.Marshal(want)
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id, doc := range f.docs[db] {
		got, _ := json.Marshal(doc[field])
		if _, ok := doc[field]; ok && bytes.Equal(got, wantJSON) && id > after {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, cmp.Compare)
	var page appcode.Page
	for i, id := range ids {
		if i == limit {
			page.Next = ids[i-1]
			break
		}
		data, _ := json.Marshal(f.docs[db][id])
		page.Docs = append(page.Docs, data)
	}
	return page, nil
}

func (f *fakeHC) Log(level, message string, fields json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, logLine{level, message, string(fields)})
	select {
	case f.logged <- message:
	default:
	}
}

// waitLog blocks until the handler logs msg.
func (f *fakeHC) waitLog(t testing.TB, msg string) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m := <-f.logged:
			if m == msg {
				return
			}
		case <-deadline:
			t.Fatalf("handler never logged %q; log: %v", msg, f.lines())
		}
	}
}

func (f *fakeHC) Secret(name string) (string, bool) {
	s, ok := f.secrets[name]
	return s, ok
}

// seed stores doc in db as a committed revision and returns its JSON as
// an event would carry it.
func (f *fakeHC) seed(db string, doc map[string]any) json.RawMessage {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commit(db, doc["_id"].(string), doc)
	data, _ := json.Marshal(doc)
	return data
}

// doc returns a live document, or nil.
func (f *fakeHC) doc(db, id string) map[string]any {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.docs[db][id]
}

// lines returns the log so far.
func (f *fakeHC) lines() []logLine {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.logs)
}

// mustDoc returns a live document, failing when it is missing.
func (f *fakeHC) mustDoc(t testing.TB, db, id string) map[string]any {
	t.Helper()
	d := f.doc(db, id)
	if d == nil {
		t.Fatalf("%s/%s was not written; log: %v", db, id, f.lines())
	}
	return d
}

// syncBuffer is a bytes.Buffer safe for the logger's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// asJSON renders v for comparisons.
func asJSON(v any) string {
	data, _ := json.Marshal(v)
	return string(data)
}
