package backend

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"

	"github.com/dop251/goja"
)

// console is for code written for Node or the browser: its lines go to
// the same per-app log as ctx.log, so `handoff logs --follow` shows them.
// Outside a call (while the module loads) there is no app log to write
// to, so they go to the server's logger.

// consoleLevels maps console methods to log levels.
var consoleLevels = map[string]string{
	"log": "info", "info": "info", "warn": "warn", "error": "error", "debug": "debug",
}

func (rt *runtime) installConsole() error {
	console := rt.vm.NewObject()
	for method, level := range consoleLevels {
		if err := console.Set(method, func(fc goja.FunctionCall) goja.Value {
			parts := make([]string, len(fc.Arguments))
			for i, a := range fc.Arguments {
				parts[i] = rt.render(a)
			}
			rt.log(level, strings.Join(parts, " "), nil)
			return goja.Undefined()
		}); err != nil {
			return err
		}
	}
	return rt.vm.Set("console", console)
}

// log writes one line to the running call's app log, or to the server's
// logger when no call is running.
func (rt *runtime) log(level, msg string, fields json.RawMessage) {
	if c := rt.cur.Load(); c != nil {
		c.hc.Log(level, msg, fields)
		return
	}
	attrs := []any{"file", rt.b.file}
	if fields != nil {
		attrs = append(attrs, "fields", string(fields))
	}
	rt.b.c.o.Logger.Log(context.Background(), slogLevel(level), msg, attrs...)
}

func slogLevel(level string) slog.Level {
	switch level {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// render prints a value as console.log would, roughly: strings as they
// are, Errors with their stack, other objects as JSON.
func (rt *runtime) render(v goja.Value) string {
	o, ok := v.(*goja.Object)
	if !ok {
		return v.String()
	}
	if _, fn := goja.AssertFunction(o); fn {
		return "[Function]"
	}
	if o.ClassName() == "Error" {
		if s := o.Get("stack"); s != nil && goja.IsString(s) {
			return strings.TrimRight(s.String(), "\n")
		}
		return o.String()
	}
	data, err := rt.vm.ToJSON(o)
	if err != nil {
		return o.String()
	}
	return string(data)
}
