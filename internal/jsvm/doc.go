// Package jsvm runs the JavaScript that users deploy with an app: access.js,
// which gates every document write, and backend.js, whose async handlers run
// on changes and on a timer (docs/architecture.md).
//
// The package has three layers, each in its own files:
//
//   - Compile (compile.go) turns one ES module into a *Program once per code
//     version: esbuild rewrites ESM to CommonJS and lowers the little syntax
//     goja lacks, an inline source map lets every error point at the user's
//     own line, and goja compiles the result into one *goja.Program that all
//     runtimes share.
//   - A Pool (pool.go, vm.go) keeps a bounded set of goja runtimes that have
//     each evaluated the module once, so a call costs a function call, not a
//     module load. A runtime that was interrupted or hit a guard is thrown
//     away and replaced: it is never reused in a state we cannot vouch for.
//   - Every call runs under budgets (budget.go, heapwatch.go, allocguard.go):
//     a wall-clock deadline, a call-stack limit and a heap guard, so a
//     runaway function fails its own call and never hangs or kills the
//     server. Async exports are driven to completion by a small event loop
//     (loop.go) that host functions use to settle promises later.
//
// Hosts add the common server-side web API (URL, structuredClone, atob,
// AbortController, crypto, ...) with InstallWeb (web.go lists each
// family's file).
//
// goja values never leave the runtime that made them: callers build
// arguments and read results inside callbacks that run while the call holds
// its runtime (convert.go has the JSON helpers for that).
package jsvm
