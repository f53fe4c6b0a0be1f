package backend

import (
	"errors"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// Handlers branch on why a write failed — `err.code === "conflict"` means
// another actor moved the document first, which is the normal end of a
// lost claim — so ctx.db rejects with a real Error (instanceof Error, with
// a stack) that carries the engine's code, the access function's reason
// as .forbidden, and the engine's message. The Error is made when the
// handler calls ctx.db, not when the engine answers, so an unhandled one
// reports the user's line in the event's lastError.

// dbError is a failed ctx.db call on its way back into the runtime.
type dbError struct {
	err error
	obj *goja.Object // the Error made at the call site
}

func (e dbError) Error() string { return e.err.Error() }

// JSValue fills in the call site's Error.
func (e dbError) JSValue(vm *jsvm.VM) goja.Value {
	code, msg, reason := errs.Internal, e.err.Error(), ""
	var ee *errs.Error
	if errors.As(e.err, &ee) {
		code, msg, reason = ee.Code, ee.Message, ee.Reason
	}
	_ = e.obj.Set("message", msg)
	_ = e.obj.Set("code", string(code))
	if code == errs.Forbidden {
		_ = e.obj.Set("forbidden", reason)
	}
	return e.obj
}

// newError makes an Error whose stack is the current JS call stack.
func (rt *runtime) newError() *goja.Object {
	o, err := rt.vm.New(rt.errorCtor)
	if err != nil {
		panic(err) // the original Error constructor cannot throw
	}
	return o
}
