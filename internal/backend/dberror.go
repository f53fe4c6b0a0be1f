package backend

import (
	"bytes"
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
	err   error
	rt    *runtime
	stack []goja.StackFrame // the JS call stack at the call site
}

func (e dbError) Error() string { return e.err.Error() }

// JSValue makes the Error the handler sees. Most calls succeed, so the
// call site keeps only its stack frames (a slice copy) and the Error
// object is built here, with the call site's stack in place of this one.
func (e dbError) JSValue(vm *jsvm.VM) goja.Value {
	code, msg, reason := errs.Internal, e.err.Error(), ""
	var ee *errs.Error
	if errors.As(e.err, &ee) {
		code, msg, reason = ee.Code, ee.Message, ee.Reason
	}
	o, err := vm.New(e.rt.errorCtor)
	if err != nil {
		panic(err) // the original Error constructor cannot throw
	}
	_ = o.Set("message", msg)
	_ = o.Set("code", string(code))
	if code == errs.Forbidden {
		_ = o.Set("forbidden", reason)
	}
	// Laid out as goja lays out an Error's own stack: its first line, then
	// one "\tat" line a frame.
	var b bytes.Buffer
	b.WriteString("Error")
	if msg != "" {
		b.WriteString(": ")
		b.WriteString(msg)
	}
	b.WriteByte('\n')
	for i := range e.stack {
		b.WriteString("\tat ")
		e.stack[i].Write(&b)
		b.WriteByte('\n')
	}
	_ = o.DefineDataProperty("stack", vm.ToValue(b.String()), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	return o
}
