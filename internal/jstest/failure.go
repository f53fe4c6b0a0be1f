package jstest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/sim"
)

// What a failed test shows besides its assertion: the app's handlers
// that threw while it ran, and the app's log. An assertion such as
// "expected {…} to match {status: "expired"}" is often only the echo of
// a handler's throw, which would otherwise sit unseen in t.logs().

const (
	// maxHandlerErrors bounds the distinct handler errors shown.
	maxHandlerErrors = 10
	// maxLogLines bounds the log lines shown: the last ones.
	maxLogLines = 20
	// maxLogLine bounds one shown line; a handler may log a large object.
	maxLogLine = 300
)

// HandlerError is one way the app's handlers failed during a test: the
// same handler failing with the same error is one entry with a count.
type HandlerError struct {
	Handler string `json:"handler"`
	// At is the first file:line:column of the error in the app's code,
	// when the error names one.
	At      string `json:"at,omitempty"`
	Message string `json:"message"`
	Count   int    `json:"count"`
	// First is when it first failed, in virtual time since the test began.
	First time.Duration `json:"firstNs"`
}

// handlerErr is one failed handler run, as the test saw it.
type handlerErr struct {
	handler appcode.Handler
	at      time.Time
	msg     string
}

// sawHandlerError records a handler's failure that the run recorder does
// not see: the fetch handler, whose error reaches t.fetch.
func (tr *testRun) sawHandlerError(h appcode.Handler, at time.Time, msg string) {
	if msg == "" {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.fetchErrs = append(tr.fetchErrs, handlerErr{handler: h, at: at, msg: msg})
}

// appLocation finds the first "file.js:line:col" in an error's text.
var appLocation = regexp.MustCompile(`[\w@./-]+\.[cm]?[jt]sx?:\d+:\d+`)

// failureContext adds to a failed test's result what the app did: its
// handlers' throws and the end of its log.
func (tr *testRun) failureContext(res *Result, runs []sim.Run) {
	tr.mu.Lock()
	fetched := slices.Clone(tr.fetchErrs)
	tr.mu.Unlock()
	start := tr.env.Start
	res.HandlerErrors = handlerErrors(start, runs, fetched)
	lines, err := guard(func() ([]engine.LogLine, error) { return tr.env.Logs(), nil })
	if err != nil {
		res.Logs = []string{"(the app's log could not be read: " + err.Error() + ")"}
		return
	}
	res.Logs, res.LogsOmitted = logLines(start, lines)
}

// handlerErrors groups the failed runs, in the order they first failed.
func handlerErrors(start time.Time, runs []sim.Run, fetched []handlerErr) []HandlerError {
	var all []handlerErr
	for _, r := range runs {
		// A run cut short by the test's end is not the app's failure.
		if r.Err == nil || errors.Is(r.Err, context.Canceled) {
			continue
		}
		all = append(all, handlerErr{handler: r.Handler, at: r.Start, msg: r.Err.Error()})
	}
	all = append(all, fetched...)
	// Fetch errors come from the test's own calls, runs from the engine:
	// interleave them by when each began.
	slices.SortStableFunc(all, func(a, b handlerErr) int { return a.at.Compare(b.at) })
	var out []HandlerError
	index := map[string]int{}
	for _, e := range all {
		key := string(e.handler) + "\x00" + e.msg
		if i, ok := index[key]; ok {
			out[i].Count++
			continue
		}
		index[key] = len(out)
		out = append(out, HandlerError{Handler: string(e.handler), At: appLocation.FindString(e.msg),
			Message: firstLine(e.msg), Count: 1, First: e.at.Sub(start)})
	}
	return out
}

// logLines renders the app's log lines, the last maxLogLines of them, and
// says how many earlier ones were left out.
func logLines(start time.Time, lines []engine.LogLine) (out []string, omitted int) {
	if len(lines) > maxLogLines {
		omitted = len(lines) - maxLogLines
		lines = lines[omitted:]
	}
	for _, l := range lines {
		s := fmt.Sprintf("%-7s %-5s %s: %s", offset(l.Time.Sub(start)), l.Level, l.Source, firstLine(l.Message))
		if len(l.Fields) > 0 && string(l.Fields) != "null" && string(l.Fields) != "{}" {
			s += " " + string(l.Fields)
		}
		if len(s) > maxLogLine {
			n := maxLogLine
			for n > 0 && !utf8.RuneStart(s[n]) {
				n-- // cut between characters, not inside one
			}
			s = s[:n] + "…"
		}
		out = append(out, s)
	}
	return out, omitted
}

// firstLine keeps an error's first line: the stack after it is in
// t.logs(), and the line already says where.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// offset writes virtual time since the test began, e.g. "+5s".
func offset(d time.Duration) string {
	return "+" + d.Round(time.Millisecond).String()
}

// errorResponse is the answer a server gives for a coded error from the
// fetch lane (internal/server's writeError): the code's status, and
// {"error": {code, message, reason, id}} with the error id in the message
// of a 5xx, so that the page's owner can find the log line.
func errorResponse(ee *errs.Error) appcode.FetchResponse {
	e := *ee
	e.Detail = ""
	status := errs.HTTPStatus(e.Code)
	if status >= 500 {
		if e.ID == "" {
			e.ID = errs.NewID()
		}
		e.Message += " (error id " + e.ID + ")"
	}
	body, err := json.Marshal(struct {
		Error *errs.Error `json:"error"`
	}{&e})
	if err != nil {
		// Only strings are encoded; this cannot happen.
		body = []byte(`{"error":{"code":"internal","message":"the error could not be encoded"}}`)
	}
	h := http.Header{"Content-Type": {"application/json"}}
	if e.Code == errs.Unauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="handoff"`)
	}
	return appcode.FetchResponse{Status: status, Header: h, Body: append(body, '\n')}
}

// writeHandlerErrors prints the handler errors of a failed test, the
// first one's place in the app's code first.
func writeHandlerErrors(w io.Writer, r Result) {
	n := len(r.HandlerErrors)
	if n == 0 {
		return
	}
	total := 0
	for _, e := range r.HandlerErrors {
		total += e.Count
	}
	head := fmt.Sprintf("the app's handlers threw %d time%s", total, plural(total))
	if at := r.HandlerErrors[0].At; at != "" {
		head += ", first at " + at
	}
	fmt.Fprintf(w, "      %s:\n", head)
	for i, e := range r.HandlerErrors {
		if i == maxHandlerErrors {
			fmt.Fprintf(w, "        … and %d other error%s; read them all with t.logs()\n", n-i, plural(n-i))
			break
		}
		times := ""
		if e.Count > 1 {
			times = fmt.Sprintf(" (%d times)", e.Count)
		}
		fmt.Fprintf(w, "        %-7s %s%s: %s\n", offset(e.First), e.Handler, times, e.Message)
	}
}

// writeLogs prints the log lines of a failed test.
func writeLogs(w io.Writer, r Result) {
	if len(r.Logs) == 0 {
		return
	}
	head := fmt.Sprintf("the app's log (%d line%s)", len(r.Logs), plural(len(r.Logs)))
	if r.LogsOmitted > 0 {
		head = fmt.Sprintf("the app's log, its last %d lines (%d earlier left out; read them all with t.logs())", len(r.Logs), r.LogsOmitted)
	}
	fmt.Fprintf(w, "      %s:\n", head)
	for _, l := range r.Logs {
		fmt.Fprintf(w, "        %s\n", l)
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}
