package jsvm

import (
	"context"
	"slices"
	"sync/atomic"
	"time"
	"weak"

	"github.com/dop251/goja"
)

// Pool is a bounded set of runtimes for one Program. One runtime is made
// ahead of time, which shows the module loads and spares the first call a
// module load; the others are made when calls need them, and every runtime
// idle for IdleTimeout is retired (idle.go), so an app nobody uses costs
// its compiled program, not its runtimes. A runtime that was stopped is
// replaced in the background (ungated pools) so the failing call, not the
// next one, pays for it.
type Pool struct {
	prog *Program
	opts Options

	// idle holds the made runtimes not in use, and spare a token for each
	// runtime the pool may still make (gated pools, a replacement that
	// failed, Close): together with the borrowed ones, exactly Size.
	// Borrowers take a made runtime before making one.
	idle   chan *VM
	spare  chan struct{}
	closed atomic.Bool

	exports []string
}

// NewPool makes opts.Size runtimes that have each evaluated prog. An error
// loading the module (a top-level throw, a runaway loop) is returned here,
// which is when a deploy wants to hear about it.
func NewPool(prog *Program, opts Options) (*Pool, error) {
	p := &Pool{prog: prog, opts: opts.withDefaults()}
	p.idle = make(chan *VM, p.opts.Size)
	p.spare = make(chan struct{}, p.opts.Size)
	// One shows the module loads. More would hold memory for calls that
	// may never come, and for a gated pool (handlers, up to hundreds of
	// runs at once) would run the module's top level, the app's code,
	// outside the gate: the others are made when first borrowed.
	eager := 1
	for i := range eager {
		vm, err := newVM(prog, &p.opts)
		if err != nil {
			p.Close()
			return nil, err
		}
		if i == 0 {
			p.exports = vm.exports.Keys()
		}
		p.idle <- vm
	}
	for range p.opts.Size - eager {
		p.spare <- struct{}{}
	}
	janitor.add(p)
	return p, nil
}

// Program is the module the pool runs.
func (p *Pool) Program() *Program { return p.prog }

// Exports lists the keys of module.exports as the module left it when it
// ran. Unlike Program.Exports it also sees what a CommonJS-style module
// assigned by hand.
func (p *Pool) Exports() []string { return slices.Clone(p.exports) }

// Call is one invocation of an exported function.
type Call struct {
	// Export names the function, e.g. "jobs", "default" or "onChange".
	Export string
	// Args builds the arguments on the borrowed runtime. It may be nil.
	Args func(vm *VM) ([]goja.Value, error)
	// Result receives the return value (for an async export, what its
	// promise fulfilled with) while the runtime is still held: convert it
	// to Go here, since v must not outlive the call. It may be nil.
	Result func(vm *VM, v goja.Value) error
	// Deadline overrides Options.Deadline for this call, e.g. 15 minutes
	// for an onChange handler in a pool whose default suits access.js.
	Deadline time.Duration
	// Group is who the call runs for (the app), for the fair sharing of
	// the gate's slots among groups.
	Group string
	// Func, when set, picks the function to call on the borrowed runtime
	// instead of Export: one the module registered rather than exported,
	// such as a test. Export then only names the call in errors.
	Func func(vm *VM) (goja.Callable, error)
	// HeapLimit overrides Options.HeapLimit for this call when above 0,
	// e.g. an app's own limit set by the operator. It applies only in a
	// pool made with a heap limit; the pool's shared limit is at least it.
	HeapLimit int64
}

// Do runs c on a free runtime, waiting for one if all are busy; only ctx
// bounds that wait, and the call's deadline starts once it has a runtime.
// The error is a *JSError for the user's exception or rejection, a
// *LimitError for a budget (errors.Is ErrDeadline, ErrStackOverflow,
// ErrHeapLimit, ErrNeverSettles), a *CancelError when ctx ends first, or
// what Args or Result returned.
func (p *Pool) Do(ctx context.Context, c Call) error {
	d := c.Deadline
	if d <= 0 {
		d = p.opts.Deadline
	}
	return p.with(ctx, c.Export, c.Group, d, func(vm *VM) error {
		if c.HeapLimit > 0 {
			vm.callLimit.Store(c.HeapLimit)
			defer vm.callLimit.Store(0)
		}
		var fn goja.Callable
		var err error
		if c.Func != nil {
			fn, err = c.Func(vm)
		} else {
			fn, err = vm.function(c.Export)
		}
		if err != nil {
			return err
		}
		var args []goja.Value
		if c.Args != nil {
			if args, err = c.Args(vm); err != nil {
				return err
			}
		}
		v, err := fn(goja.Undefined(), args...)
		if err != nil {
			return err
		}
		if v, err = vm.settle(v); err != nil {
			return err
		}
		if c.Result != nil {
			return c.Result(vm, v)
		}
		return nil
	})
}

// Call is Do for the common case: call export with the pool's deadline.
func (p *Pool) Call(ctx context.Context, export string, args func(vm *VM) ([]goja.Value, error), result func(vm *VM, v goja.Value) error) error {
	return p.Do(ctx, Call{Export: export, Args: args, Result: result})
}

// Value hands the current value of a non-function export (config) to
// result on a borrowed runtime.
func (p *Pool) Value(ctx context.Context, export string, result func(vm *VM, v goja.Value) error) error {
	return p.with(ctx, export, "", p.opts.Deadline, func(vm *VM) error {
		v, err := vm.export(export)
		if err != nil {
			return err
		}
		return result(vm, v)
	})
}

// with borrows a runtime and a slot of the gate, runs fn under the budgets
// and gives both back, replacing the runtime if it can no longer be
// trusted.
func (p *Pool) with(ctx context.Context, export, group string, d time.Duration, fn func(vm *VM) error) error {
	if err := ctx.Err(); err != nil {
		// Checked first: a call started on a dead context would be
		// stopped at once and cost its runtime.
		return &CancelError{File: p.prog.filename, Export: export, Err: context.Cause(ctx)}
	}
	vm, err := p.get(ctx, group)
	if err != nil {
		if ctx.Err() != nil {
			return &CancelError{File: p.prog.filename, Export: export, Err: err}
		}
		return err
	}
	defer p.put(vm)
	if gate := p.opts.Gate; gate != nil {
		if !gate.acquire(group, ctx.Done(), func() bool { return ctx.Err() != nil }) {
			return &CancelError{File: p.prog.filename, Export: export, Err: context.Cause(ctx)}
		}
		vm.group, vm.holding = group, true
		defer vm.yieldSlot()
	}
	return vm.run(ctx, export, d, func() error { return fn(vm) })
}

func (p *Pool) get(ctx context.Context, group string) (*VM, error) {
	if p.closed.Load() {
		return nil, ErrClosed
	}
	var vm *VM
	made := true
	select {
	case vm = <-p.idle:
	default:
		select {
		case vm = <-p.idle:
		case <-p.spare:
			made = false
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	if p.closed.Load() {
		p.release(vm)
		return nil, ErrClosed
	}
	if made {
		return vm, nil
	}
	if gate := p.opts.Gate; gate != nil {
		// Loading runs the module's top level, the app's own code.
		if !gate.acquire(group, ctx.Done(), func() bool { return ctx.Err() != nil }) {
			p.spare <- struct{}{}
			return nil, context.Cause(ctx)
		}
		defer gate.release(group)
	}
	vm, err := newVM(p.prog, &p.opts)
	if err != nil {
		p.spare <- struct{}{}
		return nil, err
	}
	coldStarts.Add(1)
	return vm, nil
}

func (p *Pool) put(vm *VM) {
	if !vm.broken && !p.closed.Load() {
		vm.lastUsed = mono()
		p.idle <- vm
		return
	}
	vm.retire()
	// A runtime stopped for memory leaves garbage behind: it is collected
	// before the runtime is replaced (see collectAfterStop).
	spent, gone := vm.stoppedForMemory(), weak.Make(vm)
	if p.closed.Load() || p.opts.Gate != nil {
		// A gated pool makes the replacement when a call needs it.
		if !spent {
			p.spare <- struct{}{}
			return
		}
		go func() {
			collectAfterStop(gone)
			p.spare <- struct{}{}
		}()
		return
	}
	go func() {
		if spent {
			collectAfterStop(gone)
		}
		fresh, err := newVM(p.prog, &p.opts)
		if err != nil || p.closed.Load() {
			if fresh != nil {
				fresh.retire()
			}
			p.spare <- struct{}{} // the next borrower retries and reports the error
			return
		}
		p.idle <- fresh
	}()
}

// release returns a borrowed token without its runtime.
func (p *Pool) release(vm *VM) {
	if vm != nil {
		vm.retire()
	}
	p.spare <- struct{}{}
}

// Close stops handing out runtimes; calls already running finish. Idle
// runtimes are released at once, busy ones when their call returns.
func (p *Pool) Close() {
	if p.closed.Swap(true) {
		return
	}
	for {
		select {
		case vm := <-p.idle:
			vm.retire()
			p.spare <- struct{}{}
		default:
			return
		}
	}
}
