// Package jstest runs an app's own tests, its *.test.js files, for
// `handoff test`. Each test gets a fresh instance of the real engine with
// the app's access.js and backend.js deployed, on an embedded store in a
// temporary folder and on a virtual clock (internal/sim): a test plays a
// 30 s lease or a 5 s sweep with t.advance("30s") in milliseconds, and
// sees the same refusals, conflicts, retries and ledger as on a server.
//
// The files follow a run:
//
//   - find.go: which files are tests.
//   - file.go: bundling a test file, loading it, running its tests.
//   - api.go, prelude.js: the `t` a test gets, and the assertions.
//   - stub.go: the handlers' outbound fetch, answered by t.stubFetch.
//   - coverage.go: the status transitions the tests committed and saw
//     refused, and those a server's history took that no test covered.
package jstest

import (
	"context"
	"regexp"
	"sync"
	"time"

	"github.com/handoff-run/handoff/internal/appdir"
)

// DefaultTimeout bounds one test in real time. A test plays protocol time
// on the virtual clock, so even hours of it take well under a second; a
// test that runs longer is stuck.
const DefaultTimeout = 10 * time.Second

// Options configure a run.
type Options struct {
	// Dir is the app's folder.
	Dir string
	// Run, when set, keeps only the tests whose "file › name" matches.
	Run *regexp.Regexp
	// Timeout bounds each test in real time; default DefaultTimeout.
	Timeout time.Duration
	// Field is the document field whose transitions are counted; default
	// "status".
	Field string
	// OnResult is called with each test's result as soon as it ends.
	OnResult func(Result)

	// code reads the folder once per run: every test deploys the same
	// code, and bundling a big package takes longer than a test.
	code func() (appdir.Code, error)
}

// Result is how one test ended.
type Result struct {
	File string `json:"file"`
	Name string `json:"name"`
	OK   bool   `json:"ok"`
	// Message says why the test failed; At is where, in the test file
	// (file:line:column), when known.
	Message string `json:"message,omitempty"`
	At      string `json:"at,omitempty"`
	// Stack is the failing Error's stack, mapped to the source files.
	Stack string `json:"stack,omitempty"`
	// Console is what the test printed with console.log; shown when it
	// fails.
	Console []string `json:"console,omitempty"`
	// HandlerErrors are the app's handlers' throws during a failed test,
	// and Logs the last lines of the app's log (LogsOmitted says how many
	// earlier ones were left out): the cause an assertion often only
	// echoes.
	HandlerErrors []HandlerError `json:"handlerErrors,omitempty"`
	Logs          []string       `json:"logs,omitempty"`
	LogsOmitted   int            `json:"logsOmitted,omitempty"`
	// Elapsed is real time; Virtual the protocol time the test played.
	Elapsed time.Duration `json:"elapsedNs"`
	Virtual time.Duration `json:"virtualNs"`
}

// Report is a whole run.
type Report struct {
	Results  []Result      `json:"results"`
	Passed   int           `json:"passed"`
	Failed   int           `json:"failed"`
	Elapsed  time.Duration `json:"elapsedNs"`
	Coverage *Coverage     `json:"coverage"`
}

// Run runs every test file in o.Dir. Its error is for a folder that cannot
// be tested at all (it does not exist, or holds no test file); a test file
// that fails to load is a failed result, like a failed test.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Field == "" {
		o.Field = "status"
	}
	o.code = sync.OnceValues(func() (appdir.Code, error) { return appdir.Read(o.Dir) })
	start := time.Now()
	files, err := Find(o.Dir)
	if err != nil {
		return nil, err
	}
	rep := &Report{Coverage: newCoverage(o.Field)}
	add := func(r Result) {
		rep.Results = append(rep.Results, r)
		if r.OK {
			rep.Passed++
		} else {
			rep.Failed++
		}
		if o.OnResult != nil {
			o.OnResult(r)
		}
	}
	for _, f := range files {
		if ctx.Err() != nil {
			break
		}
		runFile(ctx, o, f, rep.Coverage, add)
	}
	rep.Elapsed = time.Since(start)
	return rep, nil
}
