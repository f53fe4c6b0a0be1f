// Package access runs access.js, the transition table, on the JavaScript
// VM, for package jsapp's appcode.Compiler: the engine decides when a write needs
// a decision and which head it is made against; this package only turns
// (doc, oldDoc, user, ctx) into channels and grants, or a refusal.
package access

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// Options configure the runtime.
type Options struct {
	// Now is the clock that Date.now() reads. Default time.Now.
	Now func() time.Time
	// PoolSize bounds the runtimes per compiled access.js, and so how
	// many of one app's access calls run at once. Default GOMAXPROCS-1
	// (at least 1): access functions are CPU-bound, and one app's runaway
	// writes must leave a core to the other apps and the server.
	PoolSize int
	// HeapLimit is how far one call may grow the heap; 0 picks jsvm's
	// default.
	HeapLimit int64
}

// Runtime compiles access.js into pools of JavaScript runtimes.
type Runtime struct{ o Options }

// New returns a Runtime.
func New(o Options) *Runtime {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.PoolSize <= 0 {
		o.PoolSize = max(runtime.GOMAXPROCS(0)-1, 1)
	}
	return &Runtime{o: o}
}

// CompileAccess compiles source and loads it into a pool of runtimes.
func (r *Runtime) CompileAccess(filename, source string) (appcode.AccessFunc, error) {
	prog, err := jsvm.Compile(filename, source)
	if err != nil {
		return nil, compileError(err)
	}
	f := &Func{}
	pool, err := jsvm.NewPool(prog, jsvm.Options{
		Size:      r.o.PoolSize,
		Now:       r.o.Now,
		HeapLimit: r.o.HeapLimit,
		Setup:     f.setup,
	})
	if err != nil {
		return nil, compileError(err)
	}
	f.pool, f.exports = pool, pool.Exports()
	return f, nil
}

func compileError(err error) error {
	return errs.New(errs.Invalid, "%v; fix it and deploy again (the live version stays)", err)
}

// Func is one compiled access.js.
type Func struct {
	pool    *jsvm.Pool
	exports []string
}

// callState is what ctx's checks read during one call. It lives in Go,
// out of reach of the user's code: a script cannot make itself a handler.
type callState struct {
	in *appcode.AccessInput
}

// Gates reports whether db has a named export or there is a default one.
func (f *Func) Gates(db string) bool {
	return slices.Contains(f.exports, db) || slices.Contains(f.exports, "default")
}

// Close releases the runtimes.
func (f *Func) Close() { f.pool.Close() }

// Check runs the access function of in.DB.
func (f *Func) Check(ctx context.Context, in appcode.AccessInput) (appcode.AccessDecision, error) {
	export := in.DB
	if !slices.Contains(f.exports, export) {
		export = "default"
	}
	var dec appcode.AccessDecision
	err := f.pool.Do(ctx, jsvm.Call{
		Export:    export,
		Deadline:  in.Timeout,
		HeapLimit: in.HeapLimit,
		Group:     in.App,
		Args: func(vm *jsvm.VM) ([]goja.Value, error) {
			st := f.state(vm)
			st.in = &in
			doc, err := vm.ParseJSON(in.Doc)
			if err != nil {
				return nil, err
			}
			old := goja.Null()
			if in.OldDoc != nil {
				if old, err = vm.ParseJSON(in.OldDoc); err != nil {
					return nil, err
				}
			}
			user := goja.Null()
			if in.User != nil {
				user = userValue(vm, in.User)
			}
			return []goja.Value{doc, old, user, vm.Get(ctxGlobal)}, nil
		},
		Result: func(vm *jsvm.VM, v goja.Value) error {
			f.state(vm).in = nil
			var err error
			dec, err = decision(vm, v)
			return err
		},
	})
	if err != nil {
		return appcode.AccessDecision{}, refusal(in.DB, in.Timeout, err)
	}
	return dec, nil
}

// stateKey is the jsvm.VM.Memo key of a runtime's *callState. The state
// lives on the runtime, not in a map on Func, so a runtime thrown away
// after a runaway call takes its state with it.
type stateKey struct{}

func (f *Func) state(vm *jsvm.VM) *callState {
	v, err := vm.Memo(stateKey{}, func(vm *jsvm.VM) (goja.Value, error) { return vm.ToValue(&callState{}), nil })
	if err != nil {
		return &callState{}
	}
	return v.Export().(*callState)
}

func userValue(vm *jsvm.VM, u *appcode.AccessUser) goja.Value {
	o := vm.NewObject()
	o.Set("id", u.ID)
	o.Set("userHandle", u.ID)
	roles := make([]any, len(u.Roles))
	for i, r := range u.Roles {
		roles[i] = r
	}
	o.Set("roles", vm.NewArray(roles...))
	o.Set("isOwner", u.IsOwner)
	if u.Device != "" {
		o.Set("device", u.Device)
	}
	return o
}

// refusal maps a failed call to the codes of docs/architecture.md, "access.js": the function's own
// `throw {forbidden}` or thrown string is forbidden with that reason;
// anything else is access_error.
func refusal(db string, deadline time.Duration, err error) error {
	var ee *errs.Error
	if errors.As(err, &ee) {
		return err
	}
	var je *jsvm.JSError
	if errors.As(err, &je) {
		switch v := je.Value.(type) {
		case string:
			return forbidden(v, je)
		case map[string]any:
			if r, ok := v["forbidden"]; ok {
				return forbidden(fmt.Sprint(r), je)
			}
		}
		return errs.New(errs.AccessError, "the access function of %q failed: %v; fix access.js and deploy again", db, je)
	}
	var ce *jsvm.CancelError
	if errors.As(err, &ce) {
		return errs.New(errs.Unavailable, "the write was cancelled while access.js ran; retry it")
	}
	if errors.Is(err, jsvm.ErrDeadline) {
		return errs.New(errs.AccessError, "the access function of %q ran past its %v deadline and was stopped; make it faster (no unbounded loops, fewer awaits), or have the owner raise the deadline with `handoff app set --app OWNER/NAME --access-timeout %v`", db, deadline, 2*deadline)
	}
	var le *jsvm.LimitError
	if errors.As(err, &le) {
		return errs.New(errs.AccessError, "the access function of %q was stopped: %v", db, le)
	}
	return errs.New(errs.AccessError, "the access function of %q failed: %v", db, err)
}

// forbidden is the function's own refusal. One thrown in a module that
// access.js imports says where, since the reason alone may not tell.
func forbidden(reason string, je *jsvm.JSError) error {
	msg := "access.js refused the write: " + reason
	if je.File != appcode.AccessFile && je.Line > 0 {
		msg += fmt.Sprintf(" (refused at %s:%d:%d)", je.File, je.Line, je.Column)
	}
	return &errs.Error{Code: errs.Forbidden, Reason: reason, Message: msg}
}
