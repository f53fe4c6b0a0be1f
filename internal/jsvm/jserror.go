package jsvm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/dop251/goja"
)

// exceptionError turns a synchronous throw into a *JSError. The position
// comes from the exception's own stack, whose frames goja has already
// mapped through the inline source map to the user's file.
func (vm *VM) exceptionError(ex *goja.Exception, export string) *JSError {
	e := vm.valueError(ex.Value(), export, false)
	frames := ex.Stack()
	if len(frames) > 0 {
		var b bytes.Buffer
		for i := range frames {
			f := &frames[i]
			b.WriteString("\tat ")
			f.Write(&b)
			b.WriteByte('\n')
			if e.Line == 0 {
				if pos := f.Position(); vm.prog.isSource(pos.Filename) && pos.Line > 0 {
					e.File, e.Line, e.Column = pos.Filename, pos.Line, pos.Column
				}
			}
		}
		e.Stack = b.String()
	}
	return e
}

// valueError describes a thrown or rejected value. Error objects give
// their name, message and stack (the stack is the only position a
// rejection has); other values are exported for the caller and rendered
// as JSON for the message.
func (vm *VM) valueError(v goja.Value, export string, rejected bool) *JSError {
	e := &JSError{File: vm.prog.filename, Export: export, Rejected: rejected}
	if v == nil {
		v = goja.Undefined()
	}
	e.Value = Export(v)
	obj, isObj := v.(*goja.Object)
	if isObj && vm.isError(obj) {
		e.Name = valueString(obj.Get("name"))
		e.Message = valueString(obj.Get("message"))
		if stack := valueString(obj.Get("stack")); stack != "" {
			e.Stack = stackFrames(stack)
			if file, line, col := vm.positionIn(stack); line > 0 {
				e.File, e.Line, e.Column = file, line, col
			}
		}
		return e
	}
	e.Message = render(e.Value, v)
	return e
}

func (vm *VM) isError(obj *goja.Object) bool {
	return obj.ClassName() == "Error"
}

func valueString(v goja.Value) string {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return ""
	}
	return v.String()
}

// render gives a short, stable rendering of a thrown non-Error value.
func render(exported any, v goja.Value) string {
	if s, ok := exported.(string); ok {
		return strconv.Quote(s)
	}
	if b, err := json.Marshal(exported); err == nil && len(b) <= 200 {
		return string(b)
	} else if err == nil {
		return string(b[:200]) + "..."
	}
	return v.String()
}

// stackFrames keeps the "at ..." lines of an Error's stack string.
func stackFrames(stack string) string {
	var b strings.Builder
	for _, line := range strings.Split(stack, "\n") {
		if t := strings.TrimSpace(line); strings.HasPrefix(t, "at ") {
			b.WriteString("\t" + t + "\n")
		}
	}
	return b.String()
}

// framePos matches "file:line:col" inside a goja stack line, e.g.
// "at onChange (backend.js:7:12(34))".
var framePos = regexp.MustCompile(`([^\s()]+):(\d+):(\d+)`)

// positionIn finds the first frame in one of the user's files in a stack
// string. A rejected Error has no *goja.Exception, only this string.
func (vm *VM) positionIn(stack string) (file string, line, col int) {
	for _, m := range framePos.FindAllStringSubmatch(stack, -1) {
		if !vm.prog.isSource(m[1]) {
			continue
		}
		line, _ = strconv.Atoi(m[2])
		col, _ = strconv.Atoi(m[3])
		return m[1], line, col
	}
	return "", 0, 0
}

// String renders a JSError with its stack, for logs.
func (e *JSError) String() string {
	if e.Stack == "" {
		return e.Error()
	}
	return fmt.Sprintf("%s\n%s", e.Error(), strings.TrimRight(e.Stack, "\n"))
}
