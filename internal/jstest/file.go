package jstest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/internal/appdir"
	"github.com/handoff-run/handoff/internal/jsvm"
	"github.com/handoff-run/handoff/internal/sim"
)

// The app every test runs: its owner is who t.owner acts as.
const (
	owner   = "owner"
	appName = "app"
)

// fileRun is one test file: its module loaded on one runtime, and the
// test that runtime is running now.
type fileRun struct {
	o    Options
	name string // slash path relative to the folder
	cov  *Coverage
	pool *jsvm.Pool

	mu  sync.Mutex
	reg map[*jsvm.VM][]registered // what test() registered, per runtime
	cur atomic.Pointer[testRun]
}

type registered struct {
	name string
	fn   goja.Callable
}

func runFile(ctx context.Context, o Options, name string, cov *Coverage, add func(Result)) {
	f := &fileRun{o: o, name: name, cov: cov, reg: map[*jsvm.VM][]registered{}}
	start := time.Now()
	failed := func(err error) {
		add(Result{File: name, Name: "(loading the file)", Message: err.Error(), Elapsed: time.Since(start)})
	}
	mod, err := appdir.Bundle(o.Dir, name)
	if err != nil {
		failed(err)
		return
	}
	prog, err := jsvm.Compile(name, mod.Code)
	if err != nil {
		failed(err)
		return
	}
	// One runtime: tests run one at a time, each on the environment that
	// cur points at, and the module's top level registers them once.
	f.pool, err = jsvm.NewPool(prog, jsvm.Options{
		Size:         1,
		Deadline:     o.Timeout,
		InitDeadline: o.Timeout,
		Setup:        f.setup,
		Now:          f.now,
	})
	if err != nil {
		var je *jsvm.JSError
		if errors.As(err, &je) {
			failed(fmt.Errorf("%s\n%s", je.Error(), strings.TrimRight(je.Stack, "\n")))
		} else {
			failed(err)
		}
		return
	}
	defer f.pool.Close()
	names := f.names()
	if len(names) == 0 {
		failed(fmt.Errorf("%s registers no tests; add one with test(\"name\", async (t) => { ... })", name))
		return
	}
	for i, n := range names {
		if ctx.Err() != nil {
			return
		}
		if o.Run != nil && !o.Run.MatchString(name+" › "+n) {
			continue
		}
		add(f.run(ctx, i, n))
	}
}

// names lists the tests in the order the file registered them.
func (f *fileRun) names() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, list := range f.reg {
		out := make([]string, len(list))
		for i, r := range list {
			out[i] = r.name
		}
		return out
	}
	return nil
}

func (f *fileRun) now() time.Time {
	if tr := f.cur.Load(); tr != nil && tr.env != nil {
		return tr.env.Now()
	}
	return sim.DefaultStart
}

// run runs test i in a fresh environment.
func (f *fileRun) run(ctx context.Context, i int, name string) Result {
	start := time.Now()
	res := Result{File: f.name, Name: name}
	tctx, cancel := context.WithCancelCause(ctx)
	tr := &testRun{f: f, tb: &tb{}, ctx: tctx, users: map[string]bool{}}
	defer tr.tb.close()
	env, err := guard(func() (*sim.Env, error) {
		var code *appdir.Code
		if f.o.code != nil {
			if c, err := f.o.code(); err == nil {
				code = &c // else sim reads the folder again and reports why
			}
		}
		return sim.New(tr.tb, sim.Options{
			Dir:           f.o.Dir,
			Code:          code,
			App:           owner + "/" + appName,
			AccessTimeout: time.Second,
			// Whether strangers may reach the app is a setting of the
			// server; what they may do there is access.js's, under test.
			Public:    true,
			Transport: stubTransport{f: f},
			OnAccess:  tr.sawAccess,
			Ctx:       tctx,
		}), nil
	})
	if err != nil {
		cancel(nil)
		res.Message = "the app could not start: " + err.Error()
		res.Elapsed = time.Since(start)
		return res
	}
	tr.env = env
	f.cur.Store(tr)
	err = f.pool.Do(ctx, jsvm.Call{
		Export:   "test " + strconv.Quote(name),
		Deadline: f.o.Timeout,
		Func: func(vm *jsvm.VM) (goja.Callable, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if list := f.reg[vm]; i < len(list) && list[i].name == name {
				return list[i].fn, nil
			}
			return nil, fmt.Errorf("the test %q was not registered again when its file was reloaded; register tests the same way on every load", name)
		},
	})
	// The runs that ended before the test did: cancelling below cuts
	// short the others, which is no failure of the app's.
	runs := env.Runs()
	// Stop what the test left playing (an advance past its timeout), and
	// wait for it before the environment closes under it.
	cancel(errors.New("the test ended"))
	tr.ops.Wait()
	f.cur.Store(nil)
	env.Ctx = ctx // for reading the ledger of the test that ended
	if err != nil {
		describe(&res, err, f.o.Timeout)
	} else if _, lerr := guard(func() (struct{}, error) { f.cov.addLedger(env.Ledger("")); return struct{}{}, nil }); lerr != nil {
		res.Message = "reading the ledger after the test: " + lerr.Error()
	} else {
		res.OK = true
	}
	tr.cov(f.cov)
	res.Console = tr.console
	if !res.OK {
		tr.failureContext(&res, runs)
	}
	res.Elapsed = time.Since(start)
	res.Virtual = env.Elapsed()
	return res
}

// describe fills in why a test failed.
func describe(res *Result, err error, timeout time.Duration) {
	var je *jsvm.JSError
	var le *jsvm.LimitError
	switch {
	case errors.As(err, &je):
		res.Message = je.Message
		if je.Name != "" && je.Name != "AssertionError" && je.Name != "Error" {
			res.Message = je.Name + ": " + je.Message
		}
		if m, ok := je.Value.(map[string]any); ok {
			if code, ok := m["code"].(string); ok && code != "" {
				res.Message = code + ": " + je.Message
				if r, ok := m["forbidden"].(string); ok && r != "" {
					res.Message += " (reason: " + r + ")"
				}
			}
		}
		if res.Message == "" {
			res.Message = je.Error()
		}
		if je.Line > 0 {
			res.At = fmt.Sprintf("%s:%d:%d", je.File, je.Line, je.Column)
		}
		res.Stack = strings.TrimRight(appFrames(je.Stack), "\n")
	case errors.As(err, &le) && errors.Is(err, jsvm.ErrDeadline):
		res.Message = fmt.Sprintf("the test ran past its %v timeout and was stopped; make it finish sooner (t.advance plays virtual time in no real time), or raise --timeout", timeout)
	case errors.As(err, &le) && errors.Is(err, jsvm.ErrNeverSettles):
		res.Message = "the test awaits a promise that nothing will ever settle; await only t's calls and your own promises that resolve"
	default:
		res.Message = err.Error()
	}
}

// preludeFrame matches the test API's own frames, which say nothing to
// the user.
var preludeFrame = regexp.MustCompile(`^\s*at .*` + regexp.QuoteMeta(preludeName))

// programCounter is the bytecode offset goja appends to a frame.
var programCounter = regexp.MustCompile(`(:\d+:\d+)\(\d+\)`)

// appFrames drops the test API's frames from a stack, and the bytecode
// offsets that say nothing to the user.
func appFrames(stack string) string {
	var b strings.Builder
	for _, line := range strings.Split(stack, "\n") {
		if line == "" || preludeFrame.MatchString(line) {
			continue
		}
		b.WriteString(programCounter.ReplaceAllString(strings.TrimSpace(line), "$1") + "\n")
	}
	return b.String()
}
