package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/store"
)

// Log levels of ctx.log.
var logLevels = map[string]bool{"debug": true, "info": true, "warn": true, "error": true}

// maxLogMessage bounds one stored line; a handler logging a whole
// document by mistake should not fill the disk.
const maxLogMessage = 8 << 10

// appLog stores a line in the app's log. It never blocks the caller on
// an fsync: lines ride on the next group commit.
func (e *Engine) appLog(app *appState, source, level, message string, fields json.RawMessage) {
	if !logLevels[level] {
		level = "info"
	}
	if len(message) > maxLogMessage {
		message = message[:maxLogMessage] + "…"
	}
	if len(fields) > maxLogMessage || (len(fields) > 0 && !json.Valid(fields)) {
		fields = nil
	}
	line := store.LogLine{AppID: app.ID, Time: e.clock.Now(), Level: level, Source: source, Message: message, Fields: fields}
	if err := e.st.AppendLogs(context.Background(), []store.LogLine{line}); err != nil {
		e.log.Error("storing an app log line", "app", app.ref(), "err", err)
	}
	e.log.Debug("app log", "app", app.ref(), "source", source, "level", level, "msg", message)
}

// LogLine is one line of an app's log as the API shows it.
type LogLine struct {
	ID      int64           `json:"id"`
	Time    time.Time       `json:"time"`
	Level   string          `json:"level"`
	Source  string          `json:"source"`
	Message string          `json:"message"`
	Fields  json.RawMessage `json:"fields,omitempty"`
}

// Logs lists the app's log lines after the line with ID after.
func (e *Engine) Logs(ctx context.Context, a Actor, appRef string, after int64, limit int) ([]LogLine, error) {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return nil, err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return nil, err
	}
	if limit, err = pageLimit(limit); err != nil {
		return nil, err
	}
	if after < 0 {
		return nil, errs.New(errs.Invalid, "after must be 0 or a log line id")
	}
	lines, err := e.st.Logs(ctx, app.ID, after, limit)
	if err != nil {
		return nil, internal(err)
	}
	out := make([]LogLine, len(lines))
	for i, l := range lines {
		out[i] = LogLine{ID: l.ID, Time: l.Time.UTC(), Level: l.Level, Source: l.Source, Message: l.Message, Fields: l.Fields}
	}
	return out, nil
}

// LogDeploy stores a line in the app's log about a deploy that no
// request reports back on: `serve --app` redeploying a folder as it is
// edited. The owner sees it where handler errors show, in `handoff logs`
// and the console.
func (e *Engine) LogDeploy(ctx context.Context, a Actor, appRef, level, message string, kv ...any) error {
	app, err := e.appAs(ctx, a, appRef)
	if err != nil {
		return err
	}
	if err := e.mayAdmin(a, app); err != nil {
		return err
	}
	var fields json.RawMessage
	if len(kv) > 0 {
		fields = appcode.LogFields(kv...)
	}
	e.appLog(app, "deploy", level, message, fields)
	return nil
}
