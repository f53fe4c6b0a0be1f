package jsvm

import (
	"runtime"
	"time"
)

// Defaults for Options fields left zero. They fit access.js, the hot path;
// backend pools raise Deadline per call (Call.Deadline).
const (
	DefaultDeadline     = 100 * time.Millisecond
	DefaultInitDeadline = time.Second
	DefaultMaxCallStack = 1000
	DefaultHeapLimit    = 64 << 20
)

// Options configure a Pool. The zero value is usable.
type Options struct {
	// Size bounds the number of runtimes, and so the number of calls that
	// run at once. Default runtime.GOMAXPROCS(0): sync calls are CPU-bound,
	// and more runtimes than cores only add memory. A pool for async
	// handlers that wait on I/O wants its handler concurrency instead.
	Size int

	// Deadline is the wall-clock budget of one call unless Call.Deadline
	// overrides it. Default 100ms.
	Deadline time.Duration

	// InitDeadline bounds evaluating the module's top level in a new
	// runtime. Default 1s.
	InitDeadline time.Duration

	// MaxCallStack is the deepest JS call nesting allowed (goja's
	// SetMaxCallStackSize). Default 1000.
	MaxCallStack int

	// HeapLimit is how many bytes a call may grow the heap by before it is
	// stopped, and the largest single string or array it may ask for.
	// Default 64 MiB; negative disables the guard. See heapwatch.go for how
	// approximate this is.
	HeapLimit int64

	// PoolHeapLimit is how far the calls running at once in this pool may
	// grow the heap together. Default 4 × HeapLimit; negative disables it.
	PoolHeapLimit int64

	// Gate, when set, shares the cores among the groups (apps) whose
	// calls run in its pools (gate.go): for code that may compute for
	// minutes. Nil: calls take no slot, which suits short calls under a
	// tight deadline (access.js), since slots cannot be taken back.
	Gate *Gate

	// Now is the clock behind Date.now() and new Date(). Default time.Now;
	// the server passes its Clock so virtual-time tests see virtual dates.
	Now func() time.Time

	// IdleTimeout is how long a runtime may sit unused before the pool
	// retires it (idle.go); the next call makes one again. Default
	// DefaultIdleTimeout; negative keeps runtimes until Close.
	IdleTimeout time.Duration

	// Rand backs Math.random. Default: goja's own source.
	Rand func() float64

	// AfterFunc, when set, arms call deadlines instead of a real timer, so
	// a virtual clock can drive long run limits (15 min onChange) in tests.
	// It must call f once after d unless stop is called first, and stop
	// must report whether it prevented f. Leave it nil for budgets that
	// guard CPU (access.js): a runaway loop must stop in real time.
	AfterFunc func(d time.Duration, f func()) (stop func() bool)

	// Busy, when set, is told of the work this pool's calls do, for a
	// virtual clock's count of work in progress (clock.Virtual.Busy): -1
	// when a call starts waiting on the host with nothing to run, +1 when
	// something wakes it, and +1 from the start of each Async work until
	// its result is queued. The caller counts the call itself.
	Busy func(n int)

	// Setup installs host globals in each new runtime before the module
	// runs, e.g. console or fetch. Host functions that finish later use
	// vm.Hold or vm.Async to settle promises on the runtime's goroutine.
	Setup func(vm *VM) error
}

func (o Options) withDefaults() Options {
	if o.Size <= 0 {
		o.Size = runtime.GOMAXPROCS(0)
	}
	if o.Deadline <= 0 {
		o.Deadline = DefaultDeadline
	}
	if o.InitDeadline <= 0 {
		o.InitDeadline = DefaultInitDeadline
	}
	if o.MaxCallStack <= 0 {
		o.MaxCallStack = DefaultMaxCallStack
	}
	if o.HeapLimit == 0 {
		o.HeapLimit = DefaultHeapLimit
	}
	if o.PoolHeapLimit == 0 && o.HeapLimit > 0 {
		o.PoolHeapLimit = 4 * o.HeapLimit
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}

	return o
}
