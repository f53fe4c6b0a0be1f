package jsvm

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Sentinels for the ways a call can fail other than by the user's own
// exception. Match them with errors.Is; the concrete errors carry messages
// written for the user.
var (
	// ErrDeadline: the call ran past its wall-clock deadline.
	ErrDeadline = errors.New("jsvm: deadline exceeded")
	// ErrStackOverflow: the call nested deeper than Options.MaxCallStack.
	ErrStackOverflow = errors.New("jsvm: call stack exceeded")
	// ErrHeapLimit: the call allocated more than Options.HeapLimit.
	ErrHeapLimit = errors.New("jsvm: heap limit exceeded")
	// ErrNeverSettles: an async export returned a promise that nothing
	// can settle any more (it awaits no pending host work).
	ErrNeverSettles = errors.New("jsvm: promise never settles")
	// ErrNoExport: the module has no export of that name.
	ErrNoExport = errors.New("jsvm: no such export")
	// ErrClosed: the pool was closed.
	ErrClosed = errors.New("jsvm: pool closed")
)

// CompileError is a module that cannot be deployed: a syntax error, an
// import, or syntax the runtime cannot run. Line and Column (both from 1)
// point into the user's source.
type CompileError struct {
	File     string
	Line     int
	Column   int
	Message  string
	LineText string // the offending source line, when known
	More     int    // how many further errors were found
}

func (e *CompileError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	b.WriteString(e.Message)
	if e.More > 0 {
		fmt.Fprintf(&b, " (and %d more error%s)", e.More, plural(e.More))
	}
	return b.String()
}

// JSError is an exception the user's code threw, or the reason its promise
// was rejected. Value is the thrown value exported to Go, so callers can
// act on `throw {forbidden: "reason"}` (a map[string]any) or a thrown string
// without touching the runtime. The position is the user's own line, mapped
// back through the source map.
type JSError struct {
	Value    any    // the thrown value, exported: map[string]any, string, float64, ...
	Name     string // the Error's name ("TypeError"), or "" for a non-Error value
	Message  string // the Error's message, or a rendering of the value
	File     string // the user's file
	Line     int    // 0 when unknown
	Column   int
	Stack    string // the JS stack, positions mapped to the user's source
	Export   string // the export that was called; "" while loading the module
	Rejected bool   // the value came from a rejected promise, not a synchronous throw
}

func (e *JSError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d:%d", e.Line, e.Column)
	}
	b.WriteString(": ")
	switch {
	case e.Name != "" && e.Message != "":
		b.WriteString(e.Name + ": " + e.Message)
	case e.Name != "":
		b.WriteString(e.Name)
	case e.Rejected:
		b.WriteString("promise rejected with " + e.Message)
	default:
		b.WriteString("uncaught exception: " + e.Message)
	}
	if e.Export != "" {
		b.WriteString(" (in " + e.Export + ")")
	} else {
		b.WriteString(" (while loading the module)")
	}
	return b.String()
}

// PanicError is a call that reached a panic of the runtime (a bug of
// goja's, or of a host function): the call failed, its runtime was thrown
// away, and the server goes on. Stack is for the server's log.
type PanicError struct {
	File  string
	Value string
	Stack string
}

func (e *PanicError) Error() string {
	return fmt.Sprintf("%s: the JavaScript runtime failed on this code (%s); the call was stopped. Rewrite the code near the failing call, and report it with the code that caused it", e.File, e.Value)
}

// LimitError is a call stopped by a budget: a deadline, the call-stack
// limit or the heap guard. It unwraps to ErrDeadline, ErrStackOverflow or
// ErrHeapLimit, and its message tells the user what to change.
type LimitError struct {
	Kind   error  // one of the sentinels above
	File   string // the user's file
	Export string // the export that was called; "" while loading the module
	msg    string
}

func (e *LimitError) Error() string { return e.msg }
func (e *LimitError) Unwrap() error { return e.Kind }

// CancelError is a call abandoned because its context was cancelled (the
// server is shutting down, or the client went away). It unwraps to the
// context's error.
type CancelError struct {
	File   string
	Export string
	Err    error
}

func (e *CancelError) Error() string {
	return fmt.Sprintf("%s: %s was cancelled (%v); it did not finish and may run again", e.File, what(e.Export), e.Err)
}
func (e *CancelError) Unwrap() error { return e.Err }

// what names the code a message is about.
func what(export string) string {
	if export == "" {
		return "loading the module"
	}
	return export
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

func deadlineError(file, export string, limit time.Duration) *LimitError {
	return &LimitError{Kind: ErrDeadline, File: file, Export: export, msg: fmt.Sprintf(
		"%s: %s exceeded its %v deadline; make the function faster (no unbounded loops, fewer awaits) or raise the app's limit",
		file, what(export), limit)}
}

func stackError(file, export string, frames int) *LimitError {
	return &LimitError{Kind: ErrStackOverflow, File: file, Export: export, msg: fmt.Sprintf(
		"%s: %s: call stack exceeded %d frames (deep or infinite recursion?); check the recursion's base case or use a loop",
		file, what(export), frames)}
}

func heapError(file, export string, limit int64) *LimitError {
	return &LimitError{Kind: ErrHeapLimit, File: file, Export: export, msg: fmt.Sprintf(
		"%s: %s used more than %s of memory; build smaller strings and arrays, or process the data in pieces",
		file, what(export), mib(limit))}
}

func ceilingError(file, export string) *LimitError {
	return &LimitError{Kind: ErrHeapLimit, File: file, Export: export, msg: fmt.Sprintf(
		"%s: %s was stopped because the server's memory for JavaScript (%s) ran out while it ran; use less memory per call, and try again",
		file, what(export), mib(heapCeiling.Load()))}
}

func regexError(file, export string) *LimitError {
	return &LimitError{Kind: ErrDeadline, File: file, Export: export, msg: fmt.Sprintf(
		"%s: %s: a regular expression ran for more than %v (catastrophic backtracking, as in /(a+)+\\1/?); simplify the pattern or check the input's length first",
		file, what(export), RegexLimit)}
}

func neverSettlesError(file, export string) *LimitError {
	return &LimitError{Kind: ErrNeverSettles, File: file, Export: export, msg: fmt.Sprintf(
		"%s: %s returned a promise that can never settle (it awaits nothing the server is still doing); resolve or reject every promise you create",
		file, what(export))}
}

func noExportError(file, export string) error {
	return fmt.Errorf("%s has no export named %q; export it (export function %s(...)) and deploy again: %w", file, export, export, ErrNoExport)
}

func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
