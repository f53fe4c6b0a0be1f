package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// OnChange runs onChange(event, ctx) and waits for its promise. nil acks
// the event. An error is the handler's own exception or rejection (with
// its message and file:line:col), or a limit that stopped it; its message
// becomes the event's lastError.
func (b *Backend) OnChange(ctx context.Context, ev appcode.ChangeEvent, hc appcode.HandlerContext) error {
	if b.change == nil {
		return errs.New(errs.Invalid, "%s exports no onChange function", b.file)
	}
	c := &call{hc: hc, handler: appcode.OnChange, db: ev.DB}
	return b.run(ctx, b.change, c, func(vm *jsvm.VM) (goja.Value, error) { return changeEvent(vm, ev) })
}

// Scheduled runs scheduled({scheduledTime}, ctx) for one tick. ctx.db
// has no default database here: a tick is about no particular write.
func (b *Backend) Scheduled(ctx context.Context, ev appcode.TickEvent, hc appcode.HandlerContext) error {
	if !b.Has(appcode.Scheduled) {
		return errs.New(errs.Invalid, "%s exports no scheduled function", b.file)
	}
	c := &call{hc: hc, handler: appcode.Scheduled}
	return b.run(ctx, b.tick, c, func(vm *jsvm.VM) (goja.Value, error) {
		o := vm.NewObject()
		return o, o.Set("scheduledTime", ev.ScheduledTime)
	})
}

// run calls c.handler on pool with (event, ctx). The call is the
// runtime's current call from the moment its arguments are built until
// it returns; then its timers are stopped and the runtime forgets it.
func (b *Backend) run(ctx context.Context, pool *jsvm.Pool, c *call, event func(vm *jsvm.VM) (goja.Value, error)) error {
	var rt *runtime
	limit := b.cfg.OnChange.Timeout
	if c.handler == appcode.Scheduled {
		limit = b.cfg.Scheduled.Timeout
	}
	err := pool.Do(ctx, jsvm.Call{
		Export:    string(c.handler),
		Deadline:  limit,
		HeapLimit: c.heapLimit(),
		Group:     c.group(),
		Args: func(vm *jsvm.VM) ([]goja.Value, error) {
			var err error
			if rt, err = stateOf(vm); err != nil {
				return nil, err
			}
			rt.cur.Store(c)
			ev, err := event(vm)
			if err != nil {
				return nil, err
			}
			return []goja.Value{ev, rt.ctx}, nil
		},
	})
	if rt != nil {
		// Only if it is still ours: once Do has returned, the runtime
		// may already be serving the next call.
		rt.cur.CompareAndSwap(c, nil)
	}
	c.stopTimers()
	return b.runError(c.handler, limit, err)
}

// runError words how a call failed. The user's exception (a *jsvm.JSError)
// already reads "backend.js:12:5: Error: message (in onChange)"; a run
// limit is named after the setting that raises it.
func (b *Backend) runError(handler appcode.Handler, limit time.Duration, err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, jsvm.ErrDeadline) {
		hint := "make each tick finish sooner, or raise config.scheduled.timeout (at most 1h)"
		if handler == appcode.OnChange {
			hint = "make it finish sooner, or raise config.onChange.timeout (at most 1h)"
		}
		return &limitError{err: err, msg: fmt.Sprintf("%s: %s was stopped at its run limit of %v; %s", b.file, handler, limit, hint)}
	}
	if errors.Is(err, jsvm.ErrClosed) {
		return errs.New(errs.Unavailable, "%s was replaced or the server is stopping; %s will run again", b.file, handler)
	}
	return err
}

// limitError rewords a run limit and still matches jsvm.ErrDeadline.
type limitError struct {
	err error
	msg string
}

func (e *limitError) Error() string { return e.msg }
func (e *limitError) Unwrap() error { return e.err }

// changeEvent builds onChange's event, {dbName, docId, doc, oldDoc, seq,
// deleted, attempt}, directly as JS values: cheaper than marshalling the
// struct and parsing it back. (A JS object-literal factory called with
// the seven values measured no faster in BenchmarkOnChange.) oldDoc is
// parsed on first use: most handlers decide on doc alone.
func changeEvent(vm *jsvm.VM, ev appcode.ChangeEvent) (goja.Value, error) {
	doc, err := vm.ParseJSON(ev.Doc)
	if err != nil {
		return nil, fmt.Errorf("onChange event doc: %w", err)
	}
	o := vm.NewObject()
	for _, kv := range [...]struct {
		k string
		v any
	}{
		{"dbName", ev.DB}, {"docId", ev.DocID}, {"doc", doc}, {"oldDoc", nil},
		{"seq", ev.Seq}, {"deleted", ev.Deleted}, {"attempt", ev.Attempt},
	} {
		if err := o.Set(kv.k, kv.v); err != nil {
			return nil, err
		}
	}
	if len(ev.OldDoc) > 0 {
		if err := lazyProperty(vm, o, "oldDoc", func() (goja.Value, error) { return vm.ParseJSON(ev.OldDoc) }); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// lazyProperty makes o[name] compute on first read, after which it is a
// plain data property like any other (assignable, enumerable).
func lazyProperty(vm *jsvm.VM, o *goja.Object, name string, compute func() (goja.Value, error)) error {
	settle := func(v goja.Value) {
		_ = o.DefineDataProperty(name, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
	}
	var v goja.Value // parsed once, even where settle cannot (a frozen event)
	get := vm.ToValue(func(goja.FunctionCall) goja.Value {
		if v == nil {
			var err error
			if v, err = compute(); err != nil {
				panic(vm.NewGoError(fmt.Errorf("onChange event %s: %w", name, err)))
			}
		}
		settle(v)
		return v
	})
	set := vm.ToValue(func(c goja.FunctionCall) goja.Value {
		settle(c.Argument(0))
		return goja.Undefined()
	})
	return o.DefineAccessorProperty(name, get, set, goja.FLAG_TRUE, goja.FLAG_TRUE)
}
