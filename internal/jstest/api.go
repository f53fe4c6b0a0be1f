package jstest

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/jsvm"
	"github.com/handoff-run/handoff/internal/sim"
)

//go:embed prelude.js
var preludeSource string

// preludeName is the prelude's file name in stacks.
const preludeName = "handoff:test"

// prelude is compiled on first use, not when the binary starts: only
// `handoff test` runs it.
var prelude = sync.OnceValue(func() *goja.Program { return goja.MustCompile(preludeName, preludeSource, true) })

// testRun is one test in progress: its environment, and what the test
// API keeps for it.
type testRun struct {
	f   *fileRun
	tb  *tb
	env *sim.Env
	ctx context.Context
	ops sync.WaitGroup // natives still working off the runtime

	mu        sync.Mutex
	users     map[string]bool // users and memberships made by t.as
	stub      goja.Callable   // t.stubFetch's handler, on vm
	vm        *jsvm.VM
	console   []string
	refused   []Transition
	fetchErrs []handlerErr // the fetch handler's throws, seen by t.fetch
}

// apiError is a refused call on its way into the runtime: a plain object
// that prelude.js copies onto an Error made at the test's line.
type apiError struct{ err error }

func (e apiError) Error() string { return e.err.Error() }

func (e apiError) JSValue(vm *jsvm.VM) goja.Value {
	code, msg, reason := errs.Internal, e.err.Error(), ""
	var ee *errs.Error
	if errors.As(e.err, &ee) {
		code, msg, reason = ee.Code, ee.Message, ee.Reason
	}
	o := vm.NewObject()
	_ = o.Set("handoff", true)
	_ = o.Set("code", string(code))
	_ = o.Set("message", msg)
	if code == errs.Forbidden {
		_ = o.Set("forbidden", reason)
	}
	return o
}

// actorSpec is who a call acts as, as prelude.js describes it.
type actorSpec struct {
	User    string   `json:"user"`
	Roles   []string `json:"roles"`
	Handler string   `json:"handler"`
}

// setup installs the test API on a new runtime, before the file runs.
func (f *fileRun) setup(vm *jsvm.VM) error {
	native := vm.NewObject()
	fns := map[string]func(goja.FunctionCall) goja.Value{
		"register": func(c goja.FunctionCall) goja.Value {
			fn, ok := goja.AssertFunction(c.Argument(1))
			if !ok {
				panic(vm.NewTypeError("test needs a function"))
			}
			f.mu.Lock()
			f.reg[vm] = append(f.reg[vm], registered{name: c.Argument(0).String(), fn: fn})
			f.mu.Unlock()
			return goja.Undefined()
		},
		"put":       func(c goja.FunctionCall) goja.Value { return f.put(vm, c) },
		"get":       func(c goja.FunctionCall) goja.Value { return f.get(vm, c) },
		"del":       func(c goja.FunctionCall) goja.Value { return f.del(vm, c) },
		"query":     func(c goja.FunctionCall) goja.Value { return f.query(vm, c) },
		"fetch":     func(c goja.FunctionCall) goja.Value { return f.fetch(vm, c) },
		"advance":   func(c goja.FunctionCall) goja.Value { return f.advance(vm, c) },
		"settle":    func(c goja.FunctionCall) goja.Value { return f.settle(vm) },
		"history":   func(c goja.FunctionCall) goja.Value { return f.history(vm, c) },
		"logs":      func(c goja.FunctionCall) goja.Value { return f.logs(vm) },
		"events":    func(c goja.FunctionCall) goja.Value { return f.events(vm, c) },
		"stubFetch": func(c goja.FunctionCall) goja.Value { return f.stubFetch(vm, c) },
		"log":       func(c goja.FunctionCall) goja.Value { return f.log(c) },
	}
	for name, fn := range fns {
		if err := native.Set(name, fn); err != nil {
			return err
		}
	}
	if err := native.Set("owner", owner); err != nil {
		return err
	}
	v, err := vm.RunProgram(prelude())
	if err != nil {
		return err
	}
	install, ok := goja.AssertFunction(v)
	if !ok {
		return fmt.Errorf("jstest: the prelude is not a function")
	}
	_, err = install(goja.Undefined(), native)
	return err
}

// async runs work off the runtime for the current test and settles a
// promise with its result. A harness failure (sim's Fatalf) rejects it.
func (f *fileRun) async(vm *jsvm.VM, work func(ctx context.Context, tr *testRun) (any, error)) goja.Value {
	tr := f.cur.Load()
	if tr == nil {
		p, _, reject := vm.NewPromise()
		_ = reject(apiError{errs.New(errs.Invalid, "t is only usable while its test runs, not when the file loads or after the test ended")}.JSValue(vm))
		return vm.ToValue(p)
	}
	tr.ops.Add(1)
	return vm.Async(func(ctx context.Context) (any, error) {
		defer tr.ops.Done()
		v, err := guard(func() (any, error) { return work(tr.ctx, tr) })
		if err != nil {
			var ee *errs.Error
			if !errors.As(err, &ee) {
				err = errs.New(errs.Internal, "%v", err)
			}
			return nil, apiError{err}
		}
		return v, nil
	})
}

// asActor is async for a call made as a: the actor (and t.as's user and
// roles) is made off the runtime, before work.
func (f *fileRun) asActor(vm *jsvm.VM, a actorSpec, work func(ctx context.Context, tr *testRun, actor engine.Actor) (any, error)) goja.Value {
	return f.async(vm, func(ctx context.Context, tr *testRun) (any, error) {
		actor, err := tr.engineActor(ctx, a)
		if err != nil {
			return nil, err
		}
		return work(ctx, tr, actor)
	})
}

// written is a put's or delete's answer as the test sees it.
func written(r appcode.WriteResult, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return map[string]any{"id": r.ID, "rev": r.Rev, "seq": r.Seq}, nil
}

// invalid rejects at once with code invalid.
func invalid(vm *jsvm.VM, format string, args ...any) goja.Value {
	return reject(vm, errs.New(errs.Invalid, format, args...))
}

// reject rejects at once with err, keeping its code: wrapping a coded
// error again would print the code twice ("invalid: invalid: ...").
// An error without a code is a bad argument.
func reject(vm *jsvm.VM, err error) goja.Value {
	var ee *errs.Error
	if !errors.As(err, &ee) {
		err = errs.New(errs.Invalid, "%v", err)
	}
	p, _, rej := vm.NewPromise()
	_ = rej(apiError{err}.JSValue(vm))
	return vm.ToValue(p)
}

func (f *fileRun) actor(vm *jsvm.VM, v goja.Value) (actorSpec, error) {
	var a actorSpec
	err := vm.Decode(v, &a)
	return a, err
}

// engineActor makes the actor, creating t.as's user and roles on first
// use. Roles only add up within a test.
func (tr *testRun) engineActor(ctx context.Context, a actorSpec) (engine.Actor, error) {
	env := tr.env
	switch {
	case a.Handler != "":
		return engine.Actor{User: owner, Handler: appcode.Handler(a.Handler)}, nil
	case a.User == "":
		return engine.Actor{Path: "http"}, nil
	}
	if a.User != owner {
		tr.mu.Lock()
		known := tr.users[a.User]
		tr.users[a.User] = true
		tr.mu.Unlock()
		if !known {
			if _, err := env.Engine.AddUser(ctx, env.Admin, a.User); err != nil {
				return engine.Actor{}, err
			}
		}
	}
	for _, role := range a.Roles {
		key := a.User + "\x00" + role
		tr.mu.Lock()
		known := tr.users[key]
		tr.users[key] = true
		tr.mu.Unlock()
		if !known {
			if err := env.Engine.AddMember(ctx, env.Admin, env.App, a.User, role); err != nil {
				return engine.Actor{}, err
			}
		}
	}
	return engine.Actor{User: a.User, Path: "http"}, nil
}

func str(v goja.Value) (string, bool) {
	if v == nil || !goja.IsString(v) {
		return "", false
	}
	return v.String(), true
}

// options reads an options object whose keys must be among allowed.
func options(vm *jsvm.VM, v goja.Value, name string, allowed ...string) (map[string]goja.Value, error) {
	out := map[string]goja.Value{}
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return out, nil
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		return nil, errs.New(errs.Invalid, "%s: options must be an object such as {%s}", name, strings.Join(allowed, ", "))
	}
	for _, k := range obj.Keys() {
		ok := false
		for _, a := range allowed {
			ok = ok || a == k
		}
		if !ok {
			return nil, errs.New(errs.Invalid, "%s: unknown option %q; the options are %s", name, k, strings.Join(allowed, ", "))
		}
		if val := obj.Get(k); val != nil && !goja.IsUndefined(val) && !goja.IsNull(val) {
			out[k] = val
		}
	}
	return out, nil
}

// put(actor, db, doc, {ifRev, ifAbsent, id}) → {id, rev, seq}
func (f *fileRun) put(vm *jsvm.VM, c goja.FunctionCall) goja.Value {
	a, err := f.actor(vm, c.Argument(0))
	if err != nil {
		return reject(vm, err)
	}
	db := c.Argument(1).String()
	doc, ok := c.Argument(2).(*goja.Object)
	if !ok || doc.ClassName() != "Object" {
		return invalid(vm, `put needs a document object, e.g. t.db("%s").put({_id: "a", status: "pending"})`, db)
	}
	opts, err := options(vm, c.Argument(3), "put", "ifRev", "ifAbsent", "id")
	if err != nil {
		return reject(vm, err)
	}
	var po appcode.PutOptions
	id, _ := str(opts["id"])
	if id == "" {
		id, _ = str(doc.Get("_id"))
	}
	if v, ok := opts["ifRev"]; ok {
		if po.IfRev, ok = str(v); !ok || po.IfRev == "" {
			return invalid(vm, "put: ifRev must be the _rev you read, a non-empty string")
		}
	}
	if v, ok := opts["ifAbsent"]; ok {
		po.IfAbsent = v.ToBoolean()
	}
	body, err := vm.ToJSON(doc)
	if err != nil {
		return invalid(vm, "put: the document cannot be written as JSON (%v)", err)
	}
	return f.asActor(vm, a, func(ctx context.Context, tr *testRun, actor engine.Actor) (any, error) {
		return written(tr.env.Engine.Put(ctx, actor, tr.env.App, db, id, body, po))
	})
}

// get(actor, db, id) → the document or null
func (f *fileRun) get(vm *jsvm.VM, c goja.FunctionCall) goja.Value {
	a, err := f.actor(vm, c.Argument(0))
	if err != nil {
		return reject(vm, err)
	}
	db := c.Argument(1).String()
	id, ok := str(c.Argument(2))
	if !ok || id == "" {
		return invalid(vm, `get needs a document id, e.g. t.db("%s").get("a")`, db)
	}
	return f.asActor(vm, a, func(ctx context.Context, tr *testRun, actor engine.Actor) (any, error) {
		doc, err := tr.env.Engine.Get(ctx, actor, tr.env.App, db, id)
		if errs.Is(err, errs.NotFound) {
			return json.RawMessage("null"), nil
		}
		return doc, err
	})
}

// del(actor, db, id, {ifRev}) → {id, rev, seq}
func (f *fileRun) del(vm *jsvm.VM, c goja.FunctionCall) goja.Value {
	a, err := f.actor(vm, c.Argument(0))
	if err != nil {
		return reject(vm, err)
	}
	db := c.Argument(1).String()
	id, ok := str(c.Argument(2))
	if !ok || id == "" {
		return invalid(vm, `del needs a document id, e.g. t.db("%s").del("a")`, db)
	}
	opts, err := options(vm, c.Argument(3), "del", "ifRev")
	if err != nil {
		return reject(vm, err)
	}
	ifRev, _ := str(opts["ifRev"])
	return f.asActor(vm, a, func(ctx context.Context, tr *testRun, actor engine.Actor) (any, error) {
		return written(tr.env.Engine.Delete(ctx, actor, tr.env.App, db, id, ifRev))
	})
}

// query(actor, db, {field, key, limit, after}) → documents, with .next
func (f *fileRun) query(vm *jsvm.VM, c goja.FunctionCall) goja.Value {
	a, err := f.actor(vm, c.Argument(0))
	if err != nil {
		return reject(vm, err)
	}
	db := c.Argument(1).String()
	opts, err := options(vm, c.Argument(2), "query", "field", "key", "limit", "after")
	if err != nil {
		return reject(vm, err)
	}
	field, _ := str(opts["field"])
	after, _ := str(opts["after"])
	var key json.RawMessage
	if v, ok := opts["key"]; ok {
		if key, err = vm.ToJSON(v); err != nil {
			return invalid(vm, "query: the key cannot be written as JSON (%v)", err)
		}
	}
	if field == "" || key == nil {
		return invalid(vm, `query needs a field and a key, e.g. t.db("%s").query({field: "status", key: "pending"})`, db)
	}
	limit := 0
	if v, ok := opts["limit"]; ok {
		limit = int(v.ToInteger())
	}
	return f.asActor(vm, a, func(ctx context.Context, tr *testRun, actor engine.Actor) (any, error) {
		page, err := tr.env.Engine.Query(ctx, actor, tr.env.App, db, field, key, limit, after)
		if err != nil {
			return nil, err
		}
		return jsvm.Settler(func(vm *jsvm.VM) (goja.Value, error) {
			docs := make([]any, len(page.Docs))
			for i, d := range page.Docs {
				v, err := vm.ParseJSON(d)
				if err != nil {
					return nil, err
				}
				docs[i] = v
			}
			arr := vm.NewArray(docs...)
			if page.Next != "" {
				_ = arr.Set("next", page.Next)
			}
			return arr, nil
		}), nil
	})
}

// fetch(actor, input, init) → {status, headers, body}: the app's fetch
// lane, as the page or a webhook calls it.
func (f *fileRun) fetch(vm *jsvm.VM, c goja.FunctionCall) goja.Value {
	a, err := f.actor(vm, c.Argument(0))
	if err != nil {
		return reject(vm, err)
	}
	p, ok := str(c.Argument(1))
	if !ok || !strings.HasPrefix(p, "/") {
		return invalid(vm, `t.fetch needs a path, e.g. t.fetch("/api/hook", {method: "POST", body: {...}})`)
	}
	opts, err := options(vm, c.Argument(2), "fetch", "method", "headers", "body")
	if err != nil {
		return reject(vm, err)
	}
	req := appcode.FetchRequest{Method: "GET", URL: "http://" + appName + "--" + owner + ".localhost" + p, Header: map[string][]string{}}
	if m, ok := str(opts["method"]); ok {
		req.Method = strings.ToUpper(m)
	}
	if h, ok := opts["headers"].(*goja.Object); ok {
		for _, k := range h.Keys() {
			req.Header[http.CanonicalHeaderKey(k)] = []string{h.Get(k).String()}
		}
	}
	if b, ok := opts["body"]; ok {
		if s, isStr := str(b); isStr {
			req.Body = []byte(s)
		} else {
			if req.Body, err = vm.ToJSON(b); err != nil {
				return invalid(vm, "t.fetch: the body cannot be written as JSON (%v)", err)
			}
			if req.Header["Content-Type"] == nil {
				req.Header["Content-Type"] = []string{"application/json"}
			}
		}
	}
	p = strings.TrimPrefix(p, "/api")
	req.Path, _, _ = strings.Cut(p, "?")
	if req.Path == "" {
		req.Path = "/"
	}
	return f.asActor(vm, a, func(ctx context.Context, tr *testRun, actor engine.Actor) (any, error) {
		start := tr.env.Now()
		r, err := tr.env.Engine.Fetch(ctx, actor, tr.env.App, req)
		var ee *errs.Error
		if errors.As(err, &ee) {
			if ee.Code == errs.AppError {
				tr.sawHandlerError(appcode.Fetch, start, ee.Detail)
			}
			// A server answers a coded error as HTTP; so does t.fetch.
			r = errorResponse(ee)
		} else if err != nil {
			return nil, err
		}
		headers := map[string]any{}
		for k, v := range r.Header {
			headers[strings.ToLower(k)] = strings.Join(v, ", ")
		}
		return map[string]any{"status": r.Status, "headers": headers, "body": string(r.Body)}, nil
	})
}

// advance(d) plays d of virtual time: every timer, tick, lease expiry and
// retry due on the way fires at its own instant, and delivery comes to
// rest after each.
func (f *fileRun) advance(vm *jsvm.VM, c goja.FunctionCall) goja.Value {
	d, err := duration(c.Argument(0))
	if err != nil {
		return reject(vm, err)
	}
	return f.async(vm, func(ctx context.Context, tr *testRun) (any, error) {
		tr.env.RunFor(d)
		return nil, nil
	})
}

// duration reads "30s", "2m", "1h30m", "250ms" or a number of ms.
func duration(v goja.Value) (time.Duration, error) {
	if s, ok := str(v); ok {
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, errs.New(errs.Invalid, `t.advance: %q is not a duration; write e.g. "30s", "2m", "1h30m" or a number of milliseconds`, s)
		}
		return d, nil
	}
	if v != nil && !goja.IsUndefined(v) {
		if ms := v.ToFloat(); ms >= 0 {
			return time.Duration(ms * float64(time.Millisecond)), nil
		}
	}
	return 0, errs.New(errs.Invalid, `t.advance needs a duration, e.g. t.advance("30s") or t.advance(1500)`)
}

func (f *fileRun) settle(vm *jsvm.VM) goja.Value {
	return f.async(vm, func(ctx context.Context, tr *testRun) (any, error) {
		tr.env.Settle()
		return nil, nil
	})
}

// history(db, id) → the ledger of one document, oldest first.
func (f *fileRun) history(vm *jsvm.VM, c goja.FunctionCall) goja.Value {
	db, ok1 := str(c.Argument(0))
	id, ok2 := str(c.Argument(1))
	if !ok1 || !ok2 {
		return invalid(vm, `t.history needs a database and an id, e.g. t.history("jobs", "a")`)
	}
	return f.async(vm, func(ctx context.Context, tr *testRun) (any, error) {
		es, err := tr.env.Engine.History(ctx, tr.env.Owner, tr.env.App, db, id)
		if err != nil {
			return nil, err
		}
		return rawJSON(es)
	})
}

func (f *fileRun) logs(vm *jsvm.VM) goja.Value {
	return f.async(vm, func(ctx context.Context, tr *testRun) (any, error) {
		return rawJSON(tr.env.Logs())
	})
}

func (f *fileRun) events(vm *jsvm.VM, c goja.FunctionCall) goja.Value {
	dead := c.Argument(0).ToBoolean()
	return f.async(vm, func(ctx context.Context, tr *testRun) (any, error) {
		return rawJSON(tr.env.Events(dead))
	})
}

// rawJSON hands v to the runtime as plain JS values ([] for a nil list).
func rawJSON[T any](v []T) (any, error) {
	if v == nil {
		v = []T{}
	}
	b, err := json.Marshal(v)
	return json.RawMessage(b), err
}

func (f *fileRun) stubFetch(vm *jsvm.VM, c goja.FunctionCall) goja.Value {
	tr := f.cur.Load()
	if tr == nil {
		panic(vm.NewTypeError("t.stubFetch is only usable while its test runs"))
	}
	var fn goja.Callable
	if v := c.Argument(0); !goja.IsUndefined(v) && !goja.IsNull(v) {
		var ok bool
		if fn, ok = goja.AssertFunction(v); !ok {
			panic(vm.NewTypeError("t.stubFetch needs a function (request) => response, e.g. t.stubFetch((req) => ({status: 200, body: {ok: true}}))"))
		}
	}
	tr.mu.Lock()
	tr.stub, tr.vm = fn, vm
	tr.mu.Unlock()
	return goja.Undefined()
}

func (f *fileRun) log(c goja.FunctionCall) goja.Value {
	if tr := f.cur.Load(); tr != nil {
		tr.mu.Lock()
		tr.console = append(tr.console, c.Argument(1).String())
		tr.mu.Unlock()
	}
	return goja.Undefined()
}
