package backend

import (
	"context"
	"encoding/json"
	"slices"
	"strings"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// newCtx makes the handler's ctx (docs/architecture.md, "backend.js and delivery"): db, log, app and secrets.
// Every ctx.db method returns a promise and runs the engine call on its
// own goroutine (jsvm.VM.Async), so a handler can run several at once
// with Promise.all; bad arguments reject rather than throw, so callers
// need one error path.
func (rt *runtime) newCtx() (*goja.Object, error) {
	vm := rt.vm
	db := vm.NewObject()
	for name, fn := range map[string]func(goja.FunctionCall) goja.Value{
		"put": rt.dbPut, "get": rt.dbGet, "delete": rt.dbDelete, "query": rt.dbQuery,
	} {
		if err := db.Set(name, fn); err != nil {
			return nil, err
		}
	}
	if _, err := rt.frozen(db); err != nil {
		return nil, err
	}
	ctx := vm.NewObject()
	if err := ctx.Set("db", db); err != nil {
		return nil, err
	}
	if err := ctx.Set("log", rt.ctxLog); err != nil {
		return nil, err
	}
	if err := ctx.DefineAccessorProperty("app", vm.ToValue(rt.appValue), nil, goja.FLAG_FALSE, goja.FLAG_TRUE); err != nil {
		return nil, err
	}
	if err := ctx.Set("secrets", rt.secrets()); err != nil {
		return nil, err
	}
	return rt.frozen(ctx)
}

// appValue is the getter of ctx.app: {owner, name}, frozen, remade only
// when the app differs from the last call's (in practice never).
func (rt *runtime) appValue(goja.FunctionCall) goja.Value {
	c := rt.cur.Load()
	if c == nil {
		return goja.Undefined()
	}
	owner, name := c.hc.App()
	if key := [2]string{owner, name}; rt.app == nil || rt.appKey != key {
		o := rt.vm.NewObject()
		_ = o.Set("owner", owner)
		_ = o.Set("name", name)
		if _, err := rt.frozen(o); err != nil {
			panic(err)
		}
		rt.app, rt.appKey = o, key
	}
	return rt.app
}

// secrets is a Proxy whose properties read the running call's secrets,
// so no secret is copied into the runtime before the code asks for it,
// and an unset one is undefined. It cannot be listed or written.
func (rt *runtime) secrets() goja.Value {
	vm := rt.vm
	lookup := func(name string) (string, bool) {
		c := rt.cur.Load()
		if c == nil {
			return "", false
		}
		return c.hc.Secret(name)
	}
	p := vm.NewProxy(vm.NewObject(), &goja.ProxyTrapConfig{
		Get: func(_ *goja.Object, name string, _ goja.Value) goja.Value {
			if s, ok := lookup(name); ok {
				return vm.ToValue(s)
			}
			return goja.Undefined()
		},
		GetSym: func(*goja.Object, *goja.Symbol, goja.Value) goja.Value { return goja.Undefined() },
		Has: func(_ *goja.Object, name string) bool {
			_, ok := lookup(name)
			return ok
		},
		Set: func(*goja.Object, string, goja.Value, goja.Value) bool {
			panic(vm.NewTypeError("ctx.secrets is read-only; set secrets with the CLI or the console"))
		},
		DefineProperty: func(*goja.Object, string, goja.PropertyDescriptor) bool { return false },
		DeleteProperty: func(*goja.Object, string) bool { return false },
	})
	return vm.ToValue(p)
}

// op is one ctx.db call being checked: its name for messages, the JS
// call stack (taken now, so a failure's Error points at the user's line),
// and the running call.
type op struct {
	rt    *runtime
	name  string
	stack []goja.StackFrame
	c     *call
}

func (rt *runtime) begin(name string) *op {
	return &op{rt: rt, name: "ctx.db." + name, stack: rt.vm.CaptureCallStack(0, nil), c: rt.cur.Load()}
}

// invalid rejects the call at once with code invalid.
func (o *op) invalid(format string, args ...any) goja.Value {
	return o.rejectNow(errs.New(errs.Invalid, o.name+": "+format, args...))
}

func (o *op) rejectNow(err error) goja.Value {
	p, _, reject := o.rt.vm.NewPromise()
	_ = reject(dbError{err: err, rt: o.rt, stack: o.stack}.JSValue(o.rt.vm))
	return o.rt.vm.ToValue(p)
}

// run does the engine call on its own goroutine; result converts the
// outcome on the runtime.
func (o *op) run(work func(ctx context.Context, hc appcode.HandlerContext) (any, error)) goja.Value {
	hc := o.c.hc
	return o.rt.vm.Async(func(ctx context.Context) (any, error) {
		v, err := work(ctx, hc)
		if err != nil {
			return nil, dbError{err: err, rt: o.rt, stack: o.stack}
		}
		return v, nil
	})
}

// options reads an options object whose keys must be among allowed: a
// misspelt ifRev must not turn a guarded write into a blind one.
func (o *op) options(v goja.Value, allowed ...string) (map[string]goja.Value, error) {
	out := map[string]goja.Value{}
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return out, nil
	}
	obj, ok := v.(*goja.Object)
	if !ok || obj.ClassName() != "Object" {
		return nil, errs.New(errs.Invalid, "%s: options must be an object such as {%s}, not %s", o.name, strings.Join(allowed, ", "), describe(v))
	}
	for _, k := range obj.Keys() {
		if !slices.Contains(allowed, k) {
			return nil, errs.New(errs.Invalid, "%s: unknown option %q; the options are %s", o.name, k, strings.Join(allowed, ", "))
		}
		if val := obj.Get(k); val != nil && !goja.IsUndefined(val) {
			out[k] = val
		}
	}
	return out, nil
}

// text reads an optional string option; null and "" count as absent.
func (o *op) text(opts map[string]goja.Value, key string) (string, error) {
	v, ok := opts[key]
	if !ok || goja.IsNull(v) {
		return "", nil
	}
	if !goja.IsString(v) {
		return "", errs.New(errs.Invalid, "%s: option %s must be a string, not %s", o.name, key, describe(v))
	}
	return v.String(), nil
}

// rev reads the ifRev option. An empty string is refused rather than
// taken as absent: it is what a rev read from the wrong field looks like,
// and writing without the check would lose the compare-and-set.
func (o *op) rev(opts map[string]goja.Value) (string, error) {
	rev, err := o.text(opts, "ifRev")
	if err == nil && rev == "" && opts["ifRev"] != nil && goja.IsString(opts["ifRev"]) {
		return "", errs.New(errs.Invalid, "%s: option ifRev is empty; pass the _rev you read, or leave ifRev out to write without a check", o.name)
	}
	return rev, err
}

// database picks the database: {db} if given, else the event's.
func (o *op) database(opts map[string]goja.Value) (string, error) {
	db, err := o.text(opts, "db")
	if err != nil || db != "" {
		return db, err
	}
	if o.c.db == "" {
		return "", errs.New(errs.Invalid, `%s needs the database in %s: pass {db: "name"}, e.g. %s`, o.name, o.c.handler, example(o.name))
	}
	return o.c.db, nil
}

func example(name string) string {
	switch name {
	case "ctx.db.put":
		return `ctx.db.put(doc, {db: "jobs"})`
	case "ctx.db.get":
		return `ctx.db.get(id, {db: "jobs"})`
	case "ctx.db.delete":
		return `ctx.db.delete(id, {db: "jobs"})`
	}
	return `ctx.db.query({db: "jobs", field: "status", key: "running"})`
}

// docID reads a document id argument.
func (o *op) docID(v goja.Value) (string, error) {
	if !goja.IsString(v) || v.String() == "" {
		return "", errs.New(errs.Invalid, `%s needs a document id string first, not %s, e.g. %s`, o.name, describe(v), example(o.name))
	}
	return v.String(), nil
}

// ready reports a call made with no handler running: a ctx kept past
// its handler's end and used from module-level code.
func (o *op) ready() error {
	if o.c == nil {
		return errs.New(errs.Invalid, "%s was called while no handler is running; use ctx only inside onChange or scheduled", o.name)
	}
	return nil
}

// ctx.db.put(doc, {db, id, ifRev, ifAbsent}) → {id, rev}
func (rt *runtime) dbPut(fc goja.FunctionCall) goja.Value {
	o := rt.begin("put")
	if err := o.ready(); err != nil {
		return o.rejectNow(err)
	}
	doc, ok := fc.Argument(0).(*goja.Object)
	if !ok || doc.ClassName() != "Object" {
		return o.invalid(`needs a document object first, not %s, e.g. ctx.db.put({_id: "a", status: "pending"})`, describe(fc.Argument(0)))
	}
	opts, err := o.options(fc.Argument(1), "db", "id", "ifRev", "ifAbsent")
	if err != nil {
		return o.rejectNow(err)
	}
	db, err := o.database(opts)
	if err != nil {
		return o.rejectNow(err)
	}
	id, err := o.text(opts, "id")
	if err != nil {
		return o.rejectNow(err)
	}
	if id == "" {
		if v := doc.Get("_id"); v != nil && goja.IsString(v) {
			id = v.String()
		}
	}
	var po appcode.PutOptions
	if po.IfRev, err = o.rev(opts); err != nil {
		return o.rejectNow(err)
	}
	if v, ok := opts["ifAbsent"]; ok {
		b, isBool := jsvm.Bool(v)
		if !isBool {
			return o.invalid("option ifAbsent must be true or false, not %s", describe(v))
		}
		po.IfAbsent = b
	}
	body, err := rt.vm.ToJSON(doc)
	if err != nil {
		return o.invalid("the document cannot be written as JSON (%v); remove cycles, functions and BigInts", err)
	}
	return o.run(func(ctx context.Context, hc appcode.HandlerContext) (any, error) {
		r, err := hc.Put(ctx, db, id, body, po)
		if err != nil {
			return nil, err
		}
		return writeResult(r), nil
	})
}

// ctx.db.get(id, {db}) → the document, or null when absent or deleted.
func (rt *runtime) dbGet(fc goja.FunctionCall) goja.Value {
	o := rt.begin("get")
	if err := o.ready(); err != nil {
		return o.rejectNow(err)
	}
	id, err := o.docID(fc.Argument(0))
	if err != nil {
		return o.rejectNow(err)
	}
	opts, err := o.options(fc.Argument(1), "db")
	if err != nil {
		return o.rejectNow(err)
	}
	db, err := o.database(opts)
	if err != nil {
		return o.rejectNow(err)
	}
	return o.run(func(ctx context.Context, hc appcode.HandlerContext) (any, error) {
		doc, err := hc.Get(ctx, db, id)
		if err != nil {
			return nil, err
		}
		return doc, nil // a nil json.RawMessage becomes null
	})
}

// ctx.db.delete(id, {db, ifRev}) → {id, rev}
func (rt *runtime) dbDelete(fc goja.FunctionCall) goja.Value {
	o := rt.begin("delete")
	if err := o.ready(); err != nil {
		return o.rejectNow(err)
	}
	id, err := o.docID(fc.Argument(0))
	if err != nil {
		return o.rejectNow(err)
	}
	opts, err := o.options(fc.Argument(1), "db", "ifRev")
	if err != nil {
		return o.rejectNow(err)
	}
	db, err := o.database(opts)
	if err != nil {
		return o.rejectNow(err)
	}
	ifRev, err := o.rev(opts)
	if err != nil {
		return o.rejectNow(err)
	}
	return o.run(func(ctx context.Context, hc appcode.HandlerContext) (any, error) {
		r, err := hc.Delete(ctx, db, id, ifRev)
		if err != nil {
			return nil, err
		}
		return writeResult(r), nil
	})
}

// ctx.db.query({db, field, key, limit, after}) → an array of documents
// whose .next is the cursor of the next page, null on the last one.
func (rt *runtime) dbQuery(fc goja.FunctionCall) goja.Value {
	o := rt.begin("query")
	if err := o.ready(); err != nil {
		return o.rejectNow(err)
	}
	opts, err := o.options(fc.Argument(0), "db", "field", "key", "limit", "after")
	if err != nil {
		return o.rejectNow(err)
	}
	db, err := o.database(opts)
	if err != nil {
		return o.rejectNow(err)
	}
	field, err := o.text(opts, "field")
	if err != nil {
		return o.rejectNow(err)
	}
	if field == "" {
		return o.invalid(`needs a field, e.g. %s`, example(o.name))
	}
	kv, ok := opts["key"]
	if !ok {
		return o.invalid(`needs a key to match (any JSON value), e.g. %s`, example(o.name))
	}
	key, err := rt.vm.ToJSON(kv)
	if err != nil {
		return o.invalid("the key cannot be written as JSON (%v)", err)
	}
	limit := 0
	if v, ok := opts["limit"]; ok && !goja.IsNull(v) {
		n, isInt := integer(v)
		if !isInt || n < 1 {
			return o.invalid("option limit must be a whole number of at least 1, not %s", describe(v))
		}
		limit = n
	}
	after, err := o.text(opts, "after")
	if err != nil {
		return o.rejectNow(err)
	}
	return o.run(func(ctx context.Context, hc appcode.HandlerContext) (any, error) {
		page, err := hc.Query(ctx, db, field, key, limit, after)
		if err != nil {
			return nil, err
		}
		return jsvm.Settler(func(vm *jsvm.VM) (goja.Value, error) { return pageValue(vm, page) }), nil
	})
}

func writeResult(r appcode.WriteResult) jsvm.Settler {
	return func(vm *jsvm.VM) (goja.Value, error) {
		o := vm.NewObject()
		_ = o.Set("id", r.ID)
		_ = o.Set("rev", r.Rev)
		if r.Existing {
			_ = o.Set("existing", true)
		}
		return o, nil
	}
}

// pageValue builds the array of a query page. next is a non-enumerable
// property, so the page spreads, serialises and iterates as a plain array.
func pageValue(vm *jsvm.VM, page appcode.Page) (goja.Value, error) {
	docs := make([]any, len(page.Docs))
	for i, d := range page.Docs {
		v, err := vm.ParseJSON(d)
		if err != nil {
			return nil, err
		}
		docs[i] = v
	}
	arr := vm.NewArray(docs...)
	next := goja.Null()
	if page.Next != "" {
		next = vm.ToValue(page.Next)
	}
	if err := arr.DefineDataProperty("next", next, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return nil, err
	}
	return arr, nil
}

// ctx.log(level, message, fields)
func (rt *runtime) ctxLog(fc goja.FunctionCall) goja.Value {
	level := "info"
	if v := fc.Argument(0); goja.IsString(v) && logLevels[v.String()] {
		level = v.String()
	}
	msg := ""
	if v := fc.Argument(1); !goja.IsUndefined(v) {
		msg = rt.render(v)
	}
	rt.log(level, msg, rt.fields(fc.Argument(2)))
	return goja.Undefined()
}

// fields turns ctx.log's third argument into a JSON object: an object as
// it is, nothing as nil, anything else wrapped as {"value": ...}.
func (rt *runtime) fields(v goja.Value) json.RawMessage {
	if goja.IsUndefined(v) || goja.IsNull(v) {
		return nil
	}
	data, err := rt.vm.ToJSON(v)
	if err != nil {
		data, _ = json.Marshal(map[string]string{"fieldsError": "fields cannot be written as JSON: " + err.Error()})
		return data
	}
	if o, ok := v.(*goja.Object); ok && o.ClassName() == "Object" {
		return data
	}
	return json.RawMessage(`{"value":` + string(data) + `}`)
}

var logLevels = map[string]bool{"debug": true, "info": true, "warn": true, "error": true}
