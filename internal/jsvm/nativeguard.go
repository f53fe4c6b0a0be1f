package jsvm

import (
	"fmt"
	"strconv"
	"time"

	"github.com/dlclark/regexp2/v2"
	"github.com/dop251/goja"
)

// Two kinds of builtin work run natively, out of reach of Interrupt, for
// as long as the script's data says: backtracking regular expressions and
// the recursion of Array.prototype.join over nested arrays. Both are given
// limits here that hold whatever the deadline.

// RegexLimit is the longest one regular expression operation may run.
// goja hands patterns that Go's linear-time regexp cannot run (back
// references, lookaround) to regexp2, which backtracks: /^(a+)+\1$/ on 30
// characters runs for minutes and Interrupt cannot stop it. regexp2 gives
// up after its match timeout, and goja reads that as "no match", so each
// operation is timed here too and one that ran this long fails its call
// instead of returning a wrong answer.
const RegexLimit = 500 * time.Millisecond

// maxJoinDepth bounds how deeply Array.prototype.join (and toString,
// which calls it) may recurse into nested arrays.
const maxJoinDepth = maxJSONDepth

func init() {
	// Read by regexp2 when goja compiles a pattern; only goja uses
	// regexp2 in this program.
	regexp2.DefaultMatchTimeout = RegexLimit
}

// regexMethods are the RegExp.prototype methods that run a match. The
// String.prototype methods reach them through the Symbol methods. exec is
// left as it is: goja runs every regex on its fast paths only while
// RegExp.prototype.exec is the original, and without them split, replace
// and match are many times slower. A direct exec call is still bounded by
// regexp2's timeout, but a match that timed out reads as no match.
var regexMethods = []string{"test"}

var regexSymbols = []*goja.Symbol{goja.SymMatch, goja.SymMatchAll, goja.SymReplace, goja.SymSearch, goja.SymSplit}

func installNativeGuards(vm *VM) error {
	rt := vm.Runtime
	if err := vm.takeRegexOriginals(); err != nil {
		return err
	}
	if err := vm.guardRegexCompile(); err != nil {
		return err
	}
	proto := rt.Get("RegExp").ToObject(rt).Get("prototype").ToObject(rt)
	for _, name := range regexMethods {
		if err := vm.guardRegex(proto, name, nil); err != nil {
			return err
		}
	}
	for _, sym := range regexSymbols {
		if err := vm.guardRegex(proto, "", sym); err != nil {
			return err
		}
	}
	arr := rt.Get("Array").ToObject(rt).Get("prototype").ToObject(rt)
	for _, name := range []string{"join", "toLocaleString"} {
		if err := vm.guardJoin(arr, name); err != nil {
			return err
		}
	}
	if err := vm.guardFlat(arr); err != nil {
		return err
	}
	if err := vm.guardProxy(); err != nil {
		return err
	}
	// Array, string and regex-match iterators: a 4e9-long sparse array,
	// a 30-million-character string or its matches are cheap to make,
	// and spreading one walks its iterator in one native call.
	for _, src := range []string{"[][Symbol.iterator]()", `""[Symbol.iterator]()`, `/a/g[Symbol.matchAll]("")`} {
		if err := vm.guardIterator(src); err != nil {
			return err
		}
	}
	return nil
}

// guardIterator makes each step of the iterator that src makes look at
// the stop flag. Spreading an array ([...a], f(...a)) and building a Set,
// a Map, a typed array, a promise list or an object from one walk the
// iterator inside a single native call, out of reach of Interrupt, and
// an array's length costs nothing to set: on `a.length = 4e9` each of
// those ran for minutes past its deadline, holding its slot, or grew the
// heap until the process died.
func (vm *VM) guardIterator(src string) error {
	rt := vm.Runtime
	iter, err := rt.RunString(src)
	if err != nil {
		return err
	}
	return vm.replaceMethod(iter.ToObject(rt).Prototype(), "next", func(next goja.Callable) func(goja.FunctionCall) goja.Value {
		return func(c goja.FunctionCall) goja.Value {
			vm.checkStop()
			return mustCall(next, c.This, c.Arguments...)
		}
	})
}

// guardRegex wraps proto[name] (or proto[sym]) so that an operation that
// ran RegexLimit or longer stops the call. Time spent in a replacer
// function is the user's JS, under the deadline, so it is not counted.
func (vm *VM) guardRegex(proto *goja.Object, name string, sym *goja.Symbol) error {
	var orig goja.Value
	if sym != nil {
		orig = proto.GetSymbol(sym)
		name = sym.String()
	} else {
		orig = proto.Get(name)
	}
	fn, ok := goja.AssertFunction(orig)
	if !ok {
		return nil
	}
	wrapped := vm.ToValue(func(c goja.FunctionCall) goja.Value {
		vm.checkStop() // a call already stopped starts no more matches
		var inJS time.Duration
		args, this := c.Arguments, c.This
		if sym == goja.SymReplace || sym == goja.SymMatch {
			// The string first, as goja would: its toString is app code,
			// which could change the regex after it was looked at.
			if len(args) > 0 && !goja.IsString(args[0]) && !isSymbol(args[0]) {
				args = append([]goja.Value{args[0].ToString()}, args[1:]...)
			}
		}
		if sym == goja.SymReplace && len(args) > 1 {
			if _, isFn := goja.AssertFunction(args[1]); !isFn && !goja.IsString(args[1]) {
				// Convert once, so what is sized is what runs: an array
				// or object whose toString says "$'" is a replacement too.
				args = append([]goja.Value{args[0], args[1].ToString()}, args[2:]...)
			}
			if g := vm.heapGuard(); g != nil && goja.IsString(args[1]) && g.over(g.regexReplaced(c.This, args[0], args[1].String())) {
				return goja.Undefined()
			}
			if replacer, ok := goja.AssertFunction(args[1]); ok {
				args = append([]goja.Value(nil), args...)
				args[1] = vm.ToValue(func(rc goja.FunctionCall) goja.Value {
					start := time.Now()
					defer func() { inJS += time.Since(start) }()
					v, err := replacer(rc.This, rc.Arguments...)
					if err != nil {
						panic(err)
					}
					return v
				})
			}
		}
		if sym == goja.SymReplace || sym == goja.SymMatch || sym == goja.SymSplit {
			if rx, ok := this.(*goja.Object); ok && !vm.regexReadsTrue(rx) {
				this = vm.stoppableExec(rx) // regexguard.go
				outer := vm.regex.results
				vm.regex.results = nil
				defer func() { vm.regex.results = outer }()
			}
		}
		start := time.Now()
		v, err := fn(this, args...)
		if err != nil {
			panic(err)
		}
		v = unpin(vm.regex.results, v) // a match returns exec's result
		if time.Since(start)-inJS >= RegexLimit {
			vm.stopRunning(causeRegex)
			vm.throw(vm.builtins.rangeError, fmt.Sprintf("a regular expression ran for more than %v", RegexLimit))
		}
		return v
	}).(*goja.Object)
	copyIdentity(orig.(*goja.Object), wrapped)
	if sym != nil {
		return proto.DefineDataPropertySymbol(sym, wrapped, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
	return proto.DefineDataProperty(name, wrapped, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// guardJoin wraps proto[name] with a nesting count: join calls toString
// on each element, which for an array is join again, one Go frame deeper
// each time, so a deeply nested array could exhaust the Go stack.
func (vm *VM) guardJoin(proto *goja.Object, name string) error {
	return vm.replaceMethod(proto, name, func(fn goja.Callable) func(goja.FunctionCall) goja.Value {
		return func(c goja.FunctionCall) goja.Value {
			// Arrays that share their elements nest cheaply: three levels
			// of a thousand make a billion joins, each in a native call.
			vm.checkStop()
			if vm.joinDepth >= maxJoinDepth {
				vm.throw(vm.builtins.rangeError, "Array.prototype."+name+": arrays nested deeper than "+strconv.Itoa(maxJoinDepth)+" levels")
			}
			vm.joinDepth++
			defer func() { vm.joinDepth-- }()
			return mustCall(fn, c.This, c.Arguments...)
		}
	})
}

// replaceMethod puts wrap(orig) in place of obj[name], a builtin method,
// with its name, length and attributes (writable, configurable, not
// enumerable). A method this goja lacks is left alone.
func (vm *VM) replaceMethod(obj *goja.Object, name string, wrap func(orig goja.Callable) func(goja.FunctionCall) goja.Value) error {
	origObj, ok := obj.Get(name).(*goja.Object)
	if !ok {
		return nil
	}
	orig, ok := goja.AssertFunction(origObj)
	if !ok {
		return nil
	}
	fn := vm.ToValue(wrap(orig)).(*goja.Object)
	copyIdentity(origObj, fn)
	return obj.DefineDataProperty(name, fn, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// mustCall calls fn from a native function, rethrowing its exception (or
// an interrupt) as the native function's own.
func mustCall(fn goja.Callable, this goja.Value, args ...goja.Value) goja.Value {
	v, err := fn(this, args...)
	if err != nil {
		panic(err)
	}
	return v
}

// copyIdentity gives a wrapper the name and length of the builtin it
// stands for, so code that inspects them sees no difference.
func copyIdentity(orig, fn *goja.Object) {
	for _, key := range []string{"name", "length"} {
		_ = fn.DefineDataProperty(key, orig.Get(key), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
	}
}

// heapGuard is the allocation guard of vm, or nil when the heap limit is
// off.
func (vm *VM) heapGuard() *allocGuard { return vm.alloc }
