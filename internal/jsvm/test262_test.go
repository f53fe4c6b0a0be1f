package jsvm_test

// TestTest262 runs the ECMAScript conformance suite tc39/test262 on a bare
// goja runtime and on handoff's guarded runtimes, and reports where the
// answers differ: the guards (budgets, replaced builtins, the web API)
// should change none, except where handoff documents that they do
// (BigInts of at most 2**20 bits, eval is indirect, code from strings is
// at most 64 KiB, the call stack is 1000 deep).
//
// The guarded runtimes have BigInt, as an app's do when its module names
// BigInt: both modules below name it, and the test and harness scripts
// they run are compiled as such a module's code is, with their BigInt
// operators rewritten into checked calls (jsvm.CompileScriptForTest).
// goja runs the same scripts compiled by goja.Compile.
//
// Each test runs on three runtimes, each fresh:
//
//   - goja: goja.New(), interrupted after test262Deadline.
//   - access: a jsvm.Pool made with internal/access's options (size 1,
//     default heap limit, real clock) and the web API it installs
//     (jsvm.InstallWeb with no timers); access's frozen ctx global is
//     the one thing of its setup left out, since its setup method is not
//     exported. The scripts run in one guarded call (Call.Func), whose
//     callable runs them with RunProgram under the call's deadline, heap
//     watch and stack limit.
//   - backend: the real thing: backend.New(...).CompileBackend of a
//     backend.js whose scheduled handler calls a host function, added
//     with backend.Options.Setup, that runs the scripts inside the
//     handler's call; Backend.Scheduled drives it like a tick.
//
// HANDOFF_TEST262 names a checkout (its test/ and harness/ folders);
// HANDOFF_TEST262_DIRS limits the run to a comma-separated list of
// folders under test/ (built-ins/Array,language/statements);
// HANDOFF_TEST262_OUT names the report file (default in $TMPDIR);
// HANDOFF_TEST262_WORKERS sets the parallelism (default GOMAXPROCS).

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/internal/appcode"
	"github.com/handoff-run/handoff/internal/backend"
	"github.com/handoff-run/handoff/internal/jsvm"
)

const test262Deadline = 2 * time.Second

// runtimes, in the order of the report's columns.
var test262Runtimes = []string{"goja", "access", "backend"}

type test262Case struct {
	rel   string // under test/, slash-separated
	group string // its first two folders: built-ins/Array
	meta  test262Meta
	src   string
}

// test262Mode is one way of running a case: its compiled source, or the
// compile error that a negative parse test expects, and the harness
// compiled the same way.
type test262Mode struct {
	name    string // "strict", "sloppy" or "raw"
	prog    *goja.Program
	early   error
	harness *harnessCache
}

// scriptResult is what the scripts did on one runtime. It is filled in
// on the runtime's goroutine, inside the call on the guarded ones.
type scriptResult struct {
	setupErr  string // a harness file failed
	err       error
	early     bool   // err is the test's compile error
	errType   string // the thrown value's constructor name
	msg       string
	ignorable bool // $262.createRealm was called
	prints    []string
}

type test262Verdict struct {
	pass    bool
	ignored bool
	why     string
}

func TestTest262(t *testing.T) {
	root := os.Getenv("HANDOFF_TEST262")
	if root == "" {
		t.Skip("set HANDOFF_TEST262=/path/to/test262 (a checkout with test/ and harness/) to run the conformance suite")
	}
	dirs := []string{"built-ins", "language"}
	if s := os.Getenv("HANDOFF_TEST262_DIRS"); s != "" {
		dirs = strings.Split(s, ",")
	}
	workers := runtime.GOMAXPROCS(0)
	if s := os.Getenv("HANDOFF_TEST262_WORKERS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("HANDOFF_TEST262_WORKERS=%q: want a positive number", s)
		}
		workers = n
	}
	out := os.Getenv("HANDOFF_TEST262_OUT")
	if out == "" {
		out = filepath.Join(os.TempDir(), "handoff-test262-report.txt")
	}

	var files []string
	for _, d := range dirs {
		base := filepath.Join(root, "test", filepath.FromSlash(strings.Trim(d, "/")))
		err := filepath.WalkDir(base, func(p string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := e.Name()
			if !e.IsDir() && strings.HasSuffix(name, ".js") && !strings.HasSuffix(name, "_FIXTURE.js") {
				files = append(files, p)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(files)
	t.Logf("%d test files under %s", len(files), strings.Join(dirs, ", "))

	r := &test262Runner{
		root:     root,
		harness:  newHarnessCache(root, goja.Compile),
		hharness: newHarnessCache(root, jsvm.CompileScriptForTest),
	}
	var err error
	if r.module, err = jsvm.Compile("access.js", test262Access); err != nil {
		t.Fatal(err)
	}

	results := make([]test262FileResult, len(files))
	var next, done atomic.Int64
	start := time.Now()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(files) {
					return
				}
				results[i] = r.runFile(files[i])
				if n := done.Add(1); n%2000 == 0 {
					t.Logf("%d/%d files, %v", n, len(files), time.Since(start).Round(time.Second))
				}
			}
		}()
	}
	wg.Wait()
	report := test262Report(results, time.Since(start))
	if err := os.WriteFile(out, []byte(report), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("time per runtime (all workers): goja %v, access %v, backend %v",
		time.Duration(r.took[0].Load()).Round(time.Second), time.Duration(r.took[1].Load()).Round(time.Second), time.Duration(r.took[2].Load()).Round(time.Second))
	t.Logf("report written to %s\n%s", out, test262Summary(report))
}

type test262Runner struct {
	root     string
	harness  *harnessCache   // compiled for goja
	hharness *harnessCache   // compiled for handoff's runtimes
	module   *jsvm.Program   // access.js for the access-like pool
	took     [3]atomic.Int64 // time spent on each runtime, all workers together
}

// test262Access is the module of the access-like pool. It names BigInt,
// so its runtimes have BigInt, as an app's do when its code uses it.
const test262Access = `export default function () { return typeof BigInt; }`

type test262FileResult struct {
	rel, group string
	skipped    string // why the file was not run
	ignored    bool   // it called $262.createRealm on goja
	bigint     bool   // the test has the BigInt feature
	verdicts   [3]test262Verdict
}

func (r *test262Runner) runFile(path string) test262FileResult {
	rel, _ := filepath.Rel(filepath.Join(r.root, "test"), path)
	rel = filepath.ToSlash(rel)
	parts := strings.SplitN(rel, "/", 3)
	res := test262FileResult{rel: rel, group: parts[0]}
	if len(parts) > 2 {
		res.group = parts[0] + "/" + parts[1]
	}
	b, err := os.ReadFile(path)
	if err != nil {
		res.skipped = err.Error()
		return res
	}
	c := &test262Case{rel: rel, group: res.group, meta: parseTest262Meta(string(b)), src: string(b)}
	res.bigint = slices.Contains(c.meta.features, "BigInt")
	if why := test262SkipReason(&c.meta); why != "" {
		res.skipped = why
		return res
	}
	// modes[0] is compiled for goja, modes[1] for handoff's runtimes.
	var modes [2][]test262Mode
	compile := func(name, src string) {
		for i, h := range []*harnessCache{r.harness, r.hharness} {
			m := test262Mode{name: name, harness: h}
			func() {
				// A bug of goja's compiler that a test reaches fails the
				// test on every runtime alike, as handoff's own compile
				// does.
				defer func() {
					if x := recover(); x != nil {
						m.prog, m.early = nil, fmt.Errorf("goja panicked compiling the test: %v", x)
					}
				}()
				m.prog, m.early = h.compile(rel, src, false)
			}()
			modes[i] = append(modes[i], m)
		}
	}
	switch {
	case c.meta.hasFlag("raw"):
		compile("raw", c.src)
	default:
		if !c.meta.hasFlag("onlyStrict") {
			compile("sloppy", c.src)
		}
		if !c.meta.hasFlag("noStrict") {
			compile("strict", "'use strict';\n"+c.src)
		}
	}
	for i, run := range []func(*test262Case, test262Mode) test262Verdict{r.runGoja, r.runAccess, r.runBackend} {
		v := test262Verdict{pass: true}
		t0 := time.Now()
		for _, m := range modes[min(i, 1)] {
			mv := run(c, m)
			if mv.ignored {
				v = mv
				break
			}
			if !mv.pass {
				v = test262Verdict{why: m.name + ": " + mv.why}
				break
			}
		}
		res.verdicts[i] = v
		r.took[i].Add(int64(time.Since(t0)))
	}
	res.ignored = res.verdicts[0].ignored
	return res
}

var errIgnorable = errors.New("$262.createRealm is not offered")

// execute runs the harness and the test on rt, as test262's
// INTERPRETING.md says: assert.js, sta.js, doneprintHandle.js for async
// tests and the includes, each as a script of its own, then the test.
func (r *test262Runner) execute(rt *goja.Runtime, c *test262Case, m test262Mode, res *scriptResult) {
	ignorable := goja.NewSymbol("IgnorableTestError")
	d := rt.NewObject()
	set := func(o *goja.Object, k string, v any) {
		if err := o.Set(k, v); err != nil {
			panic(err)
		}
	}
	set(d, "global", rt.GlobalObject())
	set(d, "evalScript", func(call goja.FunctionCall) goja.Value {
		v, err := rt.RunString(call.Argument(0).String())
		if err != nil {
			panic(err)
		}
		return v
	})
	set(d, "detachArrayBuffer", func(call goja.FunctionCall) goja.Value {
		if ab, ok := call.Argument(0).Export().(goja.ArrayBuffer); ok {
			ab.Detach()
			return goja.Undefined()
		}
		panic(rt.NewTypeError("detachArrayBuffer: not an ArrayBuffer"))
	})
	set(d, "createRealm", func(goja.FunctionCall) goja.Value { panic(ignorable) })
	g := rt.GlobalObject()
	set(g, "$262", d)
	set(g, "print", func(call goja.FunctionCall) goja.Value {
		res.prints = append(res.prints, call.Argument(0).String())
		return goja.Undefined()
	})

	var harness []string
	if m.name != "raw" {
		harness = []string{"assert.js", "sta.js"}
		if c.meta.hasFlag("async") {
			harness = append(harness, "doneprintHandle.js")
		}
		harness = append(harness, c.meta.includes...)
	}
	for _, h := range harness {
		p, err := m.harness.get(h)
		if err == nil {
			_, err = rt.RunProgram(p)
		}
		if err != nil {
			res.setupErr = h + ": " + err.Error()
			res.err = err
			return
		}
	}
	if m.early != nil {
		res.err, res.early = m.early, true
	} else {
		_, res.err = rt.RunProgram(m.prog)
	}
	switch err := res.err.(type) {
	case nil:
	case *goja.Exception:
		v := err.Value()
		if v == ignorable {
			res.ignorable = true
			return
		}
		if o, ok := v.(*goja.Object); ok {
			if ctor, ok := o.Get("constructor").(*goja.Object); ok {
				res.errType = ctor.Get("name").String()
			}
		}
		res.msg = err.Error()
	case *goja.CompilerSyntaxError:
		res.errType, res.msg = "SyntaxError", err.Error()
	case *goja.CompilerReferenceError:
		res.errType, res.msg = "ReferenceError", err.Error()
	default:
		res.msg = fmt.Sprintf("%T: %v", err, err)
	}
}

// judge turns what the scripts did into a verdict.
func judge(c *test262Case, res *scriptResult, callErr error) test262Verdict {
	fail := func(format string, args ...any) test262Verdict {
		s := fmt.Sprintf(format, args...)
		if len(s) > 300 {
			s = s[:300] + "…"
		}
		return test262Verdict{why: strings.ReplaceAll(s, "\n", " ")}
	}
	switch {
	case res.ignorable:
		return test262Verdict{ignored: true, why: errIgnorable.Error()}
	case callErr != nil:
		return fail("call: %v", callErr)
	case res.setupErr != "":
		return fail("harness %s", res.setupErr)
	}
	neg := c.meta.errType != ""
	if res.err != nil {
		if !neg {
			return fail("%s", res.msg)
		}
		early := c.meta.phase == "parse" || c.meta.phase == "early"
		if early != res.early {
			return fail("%s thrown at the wrong phase (want %s): %s", res.errType, c.meta.phase, res.msg)
		}
		if res.errType != c.meta.errType {
			return fail("threw %q, want %s: %s", res.errType, c.meta.errType, res.msg)
		}
		return test262Verdict{pass: true}
	}
	if neg {
		return fail("no %s thrown (phase %s)", c.meta.errType, c.meta.phase)
	}
	if c.meta.hasFlag("async") {
		for _, l := range res.prints {
			if strings.HasPrefix(l, "Test262:AsyncTestFailure:") {
				return fail("%s", l)
			}
		}
		if !slices.Contains(res.prints, "Test262:AsyncTestComplete") {
			return fail("$DONE was not called")
		}
	}
	return test262Verdict{pass: true}
}

func (r *test262Runner) runGoja(c *test262Case, m test262Mode) (v test262Verdict) {
	rt := goja.New()
	timer := time.AfterFunc(test262Deadline, func() { rt.Interrupt("test262 deadline") })
	defer timer.Stop()
	var res scriptResult
	defer func() {
		if x := recover(); x != nil {
			v = test262Verdict{why: fmt.Sprintf("PANIC out of goja: %v", x)}
		}
	}()
	r.execute(rt, c, m, &res)
	return judge(c, &res, nil)
}

// runAccess runs the scripts in one guarded call on a pool made as
// internal/access makes its pools.
func (r *test262Runner) runAccess(c *test262Case, m test262Mode) (v test262Verdict) {
	// jsvm passes a Go panic of goja's on (VM.protect): it is the
	// caller's, and the test's failure here.
	defer func() {
		if x := recover(); x != nil {
			v = test262Verdict{why: fmt.Sprintf("PANIC out of Pool.Do: %v", x)}
		}
	}()
	pool, err := jsvm.NewPool(r.module, jsvm.Options{
		Size:  1,
		Now:   time.Now,
		Setup: func(vm *jsvm.VM) error { return jsvm.InstallWeb(vm, jsvm.WebOptions{}) },
	})
	if err != nil {
		return test262Verdict{why: "NewPool: " + err.Error()}
	}
	defer pool.Close()
	var res scriptResult
	err = pool.Do(context.Background(), jsvm.Call{
		Export:   "test262",
		Deadline: test262Deadline,
		Func: func(vm *jsvm.VM) (goja.Callable, error) {
			return func(goja.Value, ...goja.Value) (goja.Value, error) {
				r.execute(vm.Runtime, c, m, &res)
				return goja.Undefined(), nil
			}, nil
		},
	})
	return judge(c, &res, err)
}

// test262Backend names BigInt, so its runtime has BigInt.
const test262Backend = `export const config = {scheduled: {interval: "1h", timeout: "2s"}};
export async function scheduled() { typeof BigInt; __test262(); }
`

// runBackend runs the scripts inside a scheduled tick of a backend.js
// compiled by internal/backend, with every global it installs.
func (r *test262Runner) runBackend(c *test262Case, m test262Mode) (v test262Verdict) {
	defer func() {
		if x := recover(); x != nil {
			v = test262Verdict{why: fmt.Sprintf("PANIC out of Backend.Scheduled: %v", x)}
		}
	}()
	var res scriptResult
	comp := backend.New(backend.Options{
		Logger: slog.New(slog.DiscardHandler),
		Setup: func(vm *jsvm.VM) error {
			fn := vm.ToValue(func(goja.FunctionCall) goja.Value {
				r.execute(vm.Runtime, c, m, &res)
				var ie *goja.InterruptedError
				var so *goja.StackOverflowError
				if errors.As(res.err, &ie) || errors.As(res.err, &so) {
					panic(res.err) // uncatchable: it ends the call
				}
				return goja.Undefined()
			})
			return vm.GlobalObject().DefineDataProperty("__test262", fn, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
		},
	})
	b, err := comp.CompileBackend("backend.js", test262Backend)
	if err != nil {
		return test262Verdict{why: "CompileBackend: " + err.Error()}
	}
	defer b.Close()
	err = b.Scheduled(context.Background(), appcode.TickEvent{ScheduledTime: time.Now().UnixMilli()}, test262HC{})
	return judge(c, &res, err)
}

// test262HC is a handler context with no database: test262 never uses ctx.
type test262HC struct{}

var errNoDB = errors.New("test262: no database")

func (test262HC) App() (string, string) { return "test262", "test262" }
func (test262HC) Put(context.Context, string, string, json.RawMessage, appcode.PutOptions) (appcode.WriteResult, error) {
	return appcode.WriteResult{}, errNoDB
}
func (test262HC) Get(context.Context, string, string) (json.RawMessage, error) { return nil, errNoDB }
func (test262HC) Delete(context.Context, string, string, string) (appcode.WriteResult, error) {
	return appcode.WriteResult{}, errNoDB
}
func (test262HC) Query(context.Context, string, string, json.RawMessage, int, string) (appcode.Page, error) {
	return appcode.Page{}, errNoDB
}
func (test262HC) Log(string, string, json.RawMessage) {}
func (test262HC) Secret(string) (string, bool)        { return "", false }

// test262Report tabulates the results per folder and lists the files
// that pass on goja and fail on a guarded runtime.
func test262Report(results []test262FileResult, took time.Duration) string {
	type row struct{ run, ignored, skipped, pass [3]int }
	rows := map[string]*row{}
	var groups []string
	var tot, big row // big: the files with the BigInt feature
	skips := map[string]int{}
	var diffs [3][]string
	var reverse [3][]string
	for _, fr := range results {
		rw := rows[fr.group]
		if rw == nil {
			rw = &row{}
			rows[fr.group] = rw
			groups = append(groups, fr.group)
		}
		switch {
		case fr.skipped != "":
			rw.skipped[0]++
			tot.skipped[0]++
			skips[fr.skipped]++
			if fr.bigint {
				big.skipped[0]++
			}
			continue
		case fr.ignored:
			rw.ignored[0]++
			tot.ignored[0]++
			if fr.bigint {
				big.ignored[0]++
			}
			continue
		}
		rw.run[0]++
		tot.run[0]++
		if fr.bigint {
			big.run[0]++
		}
		for i, v := range fr.verdicts {
			if v.pass {
				rw.pass[i]++
				tot.pass[i]++
				if fr.bigint {
					big.pass[i]++
				}
			}
			if i > 0 && fr.verdicts[0].pass && !v.pass {
				diffs[i] = append(diffs[i], fr.rel+"\t"+v.why)
			}
			if i > 0 && !fr.verdicts[0].pass && v.pass {
				reverse[i] = append(reverse[i], fr.rel+"\tgoja: "+fr.verdicts[0].why)
			}
		}
	}
	sort.Strings(groups)
	var b strings.Builder
	fmt.Fprintf(&b, "test262 on goja and on handoff's guarded runtimes; %d files in %v\n\n", len(results), took.Round(time.Second))
	fmt.Fprintf(&b, "%-48s %6s %6s %6s %8s %8s\n", "folder", "run", "skip", "goja", "access", "backend")
	for _, g := range groups {
		rw := rows[g]
		fmt.Fprintf(&b, "%-48s %6d %6d %6d %8d %8d\n", g, rw.run[0], rw.skipped[0]+rw.ignored[0], rw.pass[0], rw.pass[1], rw.pass[2])
	}
	fmt.Fprintf(&b, "%-48s %6d %6d %6d %8d %8d\n", "TOTAL", tot.run[0], tot.skipped[0]+tot.ignored[0], tot.pass[0], tot.pass[1], tot.pass[2])
	fmt.Fprintf(&b, "%-48s %6d %6d %6d %8d %8d\n", "  of which feature BigInt", big.run[0], big.skipped[0]+big.ignored[0], big.pass[0], big.pass[1], big.pass[2])
	fmt.Fprintf(&b, "\nskipped by frontmatter: %d files; ignored at run time ($262.createRealm): %d\n", tot.skipped[0], tot.ignored[0])
	var keys []string
	for k := range skips {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-40s %d\n", k, skips[k])
	}
	for i := 1; i < 3; i++ {
		fmt.Fprintf(&b, "\npass on goja, fail on %s: %d\n", test262Runtimes[i], len(diffs[i]))
		for _, d := range diffs[i] {
			fmt.Fprintf(&b, "  %s\n", d)
		}
		fmt.Fprintf(&b, "\nfail on goja, pass on %s: %d\n", test262Runtimes[i], len(reverse[i]))
		for _, d := range reverse[i] {
			fmt.Fprintf(&b, "  %s\n", d)
		}
	}
	return b.String()
}

// test262Summary is the report up to the lists, for the test log.
func test262Summary(report string) string {
	if i := strings.Index(report, "\npass on goja"); i >= 0 {
		head := report[:i]
		for _, l := range strings.Split(report[i:], "\n") {
			if strings.HasPrefix(l, "pass on goja") || strings.HasPrefix(l, "fail on goja") {
				head += "\n" + l
			}
		}
		return head
	}
	return report
}
