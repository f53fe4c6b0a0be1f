package jsvm

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/dop251/goja"
)

// The heap watchdog samples every few milliseconds, which is too slow for
// one native call that asks for gigabytes at once: "x".repeat(2**30)
// allocates its whole result inside a single goja instruction, and
// new Array(2**32-1).map(f) makes a 64 GiB slice, a fatal error that no
// recover can catch. So the builtins that allocate (or loop natively, out
// of reach of Interrupt) in proportion to a number the script chooses are
// wrapped: each checks the size it is about to produce against
// HeapLimit and stops the call with the heap error before allocating.
// This is not a complete sandbox — string concatenation in a loop is left
// to the watchdog — but it closes the one-line ways to kill the process.

// slotBytes is what goja spends per array element (an interface value).
const slotBytes = 16

// bigAlloc is the size from which a guarded builtin counts as a big
// allocation for the heap watchdog's attribution.
const bigAlloc = 64 << 10

// lengthMethods are the Array.prototype methods whose work or allocation
// grows with this.length, including holes: a sparse new Array(2**32-1)
// costs nothing until one of these walks it.
var lengthMethods = []string{
	"concat", "copyWithin", "every", "fill", "filter", "find", "findIndex",
	"findLast", "findLastIndex", "flat", "flatMap", "forEach", "includes",
	"indexOf", "join", "lastIndexOf", "map", "reduce", "reduceRight",
	"reverse", "shift", "slice", "some", "sort", "splice", "toLocaleString",
	"unshift", "with", "toReversed", "toSorted", "toSpliced",
}

// typedArrays are the constructors that allocate their buffer eagerly.
var typedArrays = map[string]float64{
	"ArrayBuffer": 1, "Int8Array": 1, "Uint8Array": 1, "Uint8ClampedArray": 1,
	"Int16Array": 2, "Uint16Array": 2, "Int32Array": 4, "Uint32Array": 4,
	"Float32Array": 4, "Float64Array": 8,
}

type allocGuard struct {
	vm *VM
	// pins are the array-likes whose length the running guard read
	// (pins.go): the builtin reads it again, and must get the same.
	pins []pin
	// ownDesc is the original Object.getOwnPropertyDescriptor.
	ownDesc goja.Callable
}

func installAllocGuards(vm *VM) error {
	g := vm.alloc
	rt := vm.Runtime
	ownDesc, ok := goja.AssertFunction(rt.Get("Object").ToObject(rt).Get("getOwnPropertyDescriptor"))
	if !ok {
		return fmt.Errorf("jsvm: Object.getOwnPropertyDescriptor is not a function")
	}
	g.ownDesc = ownDesc

	strProto := rt.Get("String").ToObject(rt).Get("prototype").ToObject(rt)
	for name, size := range map[string]func(str goja.String, n float64) float64{
		"repeat":   func(str goja.String, n float64) float64 { return float64(str.Length()) * n },
		"padStart": func(_ goja.String, n float64) float64 { return n },
		"padEnd":   func(_ goja.String, n float64) float64 { return n },
	} {
		if err := g.wrapString(strProto, name, size); err != nil {
			return err
		}
	}

	array := rt.Get("Array").ToObject(rt)
	arrProto := array.Get("prototype").ToObject(rt)
	for _, name := range lengthMethods {
		size := func(c goja.FunctionCall) float64 { return g.length(c.This) * slotBytes }
		switch name {
		case "join":
			size = g.joinSize
		case "sort", "toSorted":
			// The comparator is checked before this's length is read.
			size = func(c goja.FunctionCall) float64 {
				if cmp := c.Argument(0); !goja.IsUndefined(cmp) {
					if _, ok := goja.AssertFunction(cmp); !ok {
						panic(rt.NewTypeError("The comparison function must be either a function or undefined"))
					}
				}
				return g.length(c.This) * slotBytes
			}
		case "concat":
			// Not pinned: concat puts an object that it does not spread
			// in its result, which must be the object, not a Proxy.
			size = func(c goja.FunctionCall) float64 {
				n := 0.0
				for _, v := range append([]goja.Value{c.This}, c.Arguments...) {
					if obj, ok := v.(*goja.Object); ok {
						n += lengthOf(obj)
					}
				}
				return n * slotBytes
			}
		}
		if err := g.wrap(arrProto, name, size); err != nil {
			return err
		}
	}
	if err := g.wrap(array, "from", func(c goja.FunctionCall) float64 {
		return g.length(c.Argument(0)) * slotBytes
	}); err != nil {
		return err
	}
	if err := g.installMore(rt, strProto, arrProto); err != nil {
		return err
	}

	for name, unit := range typedArrays {
		if err := g.wrapConstructor(name, unit); err != nil {
			return err
		}
	}
	return nil
}

// over stops the call if size is beyond the limit. NaN and negative sizes
// pass: the builtin itself rejects them with the right RangeError. Outside
// a call (host code in Setup) there is nothing to stop, so it throws.
func (g *allocGuard) over(size float64) bool {
	limit := float64(g.vm.heapLimit())
	if size >= bigAlloc {
		g.vm.bigAllocs.Add(1) // tells the heap watchdog who allocates
		if !(size > limit) && !overCeiling(g.vm, size) {
			return false
		}
	} else if !(size > limit) {
		return false
	}
	if g.vm.active.Load() == 0 {
		panic(g.vm.NewGoError(fmt.Errorf("allocating %s would exceed the heap limit of %s", mib(int64(min(size, 1<<62))), mib(int64(limit)))))
	}
	if size > limit {
		g.vm.stopRunning(causeHeap)
	} else {
		g.vm.stopRunning(causeCeiling)
	}
	return true
}

// wrapString replaces a String.prototype method whose result's size is
// known from this as a string and its first argument as a number. Both
// are converted once, in the standard's order, and the method gets the
// converted values: a toString or valueOf runs once, as it would without
// the guard.
func (g *allocGuard) wrapString(proto *goja.Object, name string, size func(str goja.String, n float64) float64) error {
	return g.vm.replaceMethod(proto, name, func(orig goja.Callable) func(goja.FunctionCall) goja.Value {
		return func(c goja.FunctionCall) goja.Value {
			if c.This == nil || goja.IsUndefined(c.This) || goja.IsNull(c.This) {
				return mustCall(orig, c.This, c.Arguments...) // its TypeError
			}
			str, ok := c.This.ToString().(goja.String)
			if !ok {
				return mustCall(orig, c.This, c.Arguments...)
			}
			args := slices.Clone(c.Arguments)
			if len(args) == 0 {
				args = []goja.Value{goja.Undefined()}
			}
			n := args[0].ToNumber()
			args[0] = n
			if g.over(size(str, n.ToFloat())) {
				return goja.Undefined()
			}
			return mustCall(orig, str, args...)
		}
	})
}

// wrap replaces obj[name] with a native function that checks size first.
func (g *allocGuard) wrap(obj *goja.Object, name string, size func(goja.FunctionCall) float64) error {
	return g.wrapPinning(obj, name, size, true)
}

// wrapPinning is wrap; pinThis false leaves this as it is, for the
// methods of typed arrays, which take no other receiver and read their
// length from the array itself, not from its length property.
func (g *allocGuard) wrapPinning(obj *goja.Object, name string, size func(goja.FunctionCall) float64, pinThis bool) error {
	return g.vm.replaceMethod(obj, name, func(orig goja.Callable) func(goja.FunctionCall) goja.Value {
		return func(c goja.FunctionCall) goja.Value {
			outer := g.pins
			g.pins = nil
			n := size(c)
			pins := g.pins
			g.pins = outer
			if !pinThis {
				pins = slices.DeleteFunc(pins, func(p pin) bool { return p.obj.SameAs(c.This) })
			}
			if g.over(n) {
				// The interrupt fires at the next instruction; the
				// value returned here is never seen.
				return goja.Undefined()
			}
			if len(pins) == 0 {
				return mustCall(orig, c.This, c.Arguments...)
			}
			this, args := g.pinned(pins, c.This, c.Arguments)
			return unpin(pins, mustCall(orig, this, args...))
		}
	})
}

// wrapConstructor puts a Proxy with a construct trap in front of a typed
// array constructor: instanceof, static methods and prototype all pass
// through to the original.
func (g *allocGuard) wrapConstructor(name string, unit float64) error {
	rt := g.vm.Runtime
	target, ok := rt.Get(name).(*goja.Object)
	if !ok {
		return nil
	}
	ctor, ok := goja.AssertConstructor(target)
	if !ok {
		return nil
	}
	proxy := rt.NewProxy(target, &goja.ProxyTrapConfig{
		Construct: func(_ *goja.Object, args []goja.Value, newTarget *goja.Object) *goja.Object {
			if len(args) > 0 {
				// A length, or an array-like to copy: {length: 4e9}
				// costs nothing to make. A buffer has no length, and
				// its view allocates nothing.
				var n float64
				switch _, isObj := args[0].(*goja.Object); {
				case name == "ArrayBuffer":
					// It takes any argument as a number ([3e10] and
					// {valueOf} too): convert once, and pass the number
					// on, so valueOf runs once.
					num := args[0].ToNumber()
					args = append([]goja.Value{num}, args[1:]...)
					n = num.ToFloat()
				case isObj:
					outer := g.pins
					g.pins = nil
					n = g.length(args[0])
					_, args = g.pinned(g.pins, nil, args)
					g.pins = outer
				default:
					n = args[0].ToFloat()
				}
				if g.over(n * unit) {
					return rt.NewObject()
				}
			}
			obj, err := ctor(newTarget, args...)
			if err != nil {
				panic(err)
			}
			return obj
		},
	})
	if err := proxiedInstanceOf(rt, target); err != nil {
		return err
	}
	// An instance's constructor is the global that made it, as without
	// the guard: new Float64Array(1).constructor === Float64Array.
	if proto, ok := target.Get("prototype").(*goja.Object); ok {
		if err := proto.DefineDataProperty("constructor", rt.ToValue(proxy), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return err
		}
	}
	return rt.Set(name, proxy)
}

// proxiedInstanceOf lets a Proxy of the constructor target stand on the
// right of instanceof: goja's proxies lack OrdinaryHasInstance, so target
// gets its own Symbol.hasInstance that walks the prototype chain itself.
func proxiedInstanceOf(rt *goja.Runtime, target *goja.Object) error {
	hasInstance := rt.ToValue(func(c goja.FunctionCall) goja.Value {
		return rt.ToValue(ordinaryHasInstance(rt, c.This, c.Argument(0)))
	}).(*goja.Object)
	// Named as the standard's own, not after the Go function.
	if err := hasInstance.DefineDataProperty("name", rt.ToValue("[Symbol.hasInstance]"), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	return target.DefineDataPropertySymbol(goja.SymHasInstance, hasInstance, goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// ordinaryHasInstance is the spec's OrdinaryHasInstance(C, O) for an
// object constructor C.
func ordinaryHasInstance(rt *goja.Runtime, c, v goja.Value) bool {
	ctor, ok := c.(*goja.Object)
	if !ok {
		return false
	}
	obj, ok := v.(*goja.Object)
	if !ok {
		return false
	}
	proto, ok := ctor.Get("prototype").(*goja.Object)
	if !ok {
		return false
	}
	for p := obj.Prototype(); p != nil; p = p.Prototype() {
		if p.SameAs(proto) {
			return true
		}
	}
	return false
}

// length reads .length of an array-like; anything else counts as 0.
func (g *allocGuard) length(v goja.Value) float64 {
	obj, ok := v.(*goja.Object)
	if !ok {
		return 0
	}
	if fixedLength(obj) || g.stableLength(obj) {
		return lengthOf(obj)
	}
	for _, p := range g.pins {
		if p.obj == obj {
			return p.n
		}
	}
	raw := obj.Get("length")
	n := float64(toLength(raw))
	// The Proxy answers what the guard read, as a number if reading it
	// as one could run code (valueOf), so that it converts the same.
	answer := raw
	if _, isObj := raw.(*goja.Object); isObj {
		answer = g.vm.ToValue(n)
	} else if raw == nil {
		answer = goja.Undefined()
	}
	g.pins = append(g.pins, pin{obj: obj, n: n, answer: answer})
	return n
}

// lengthOf reads .length of an object; anything unusable counts as 0.
func lengthOf(obj *goja.Object) float64 { return float64(toLength(obj.Get("length"))) }

// strLen is the length of this as a string, without copying it to Go.
func (g *allocGuard) strLen(v goja.Value) float64 {
	if v == nil || goja.IsUndefined(v) || goja.IsNull(v) {
		return 0
	}
	if s, ok := v.ToString().(goja.String); ok {
		return float64(s.Length())
	}
	return float64(len(v.String()))
}

// installMore guards the builtins that turn an array-like or a string into
// as many values or characters as it claims to hold, in one native step.
func (g *allocGuard) installMore(rt *goja.Runtime, strProto, arrProto *goja.Object) error {
	argsOf := func(i int) func(goja.FunctionCall) float64 {
		return func(c goja.FunctionCall) float64 { return g.length(c.Argument(i)) * slotBytes }
	}
	fnProto := rt.Get("Function").ToObject(rt).Get("prototype").ToObject(rt)
	reflect := rt.Get("Reflect").ToObject(rt)
	object := rt.Get("Object").ToObject(rt)
	// A property made from each character or element costs far more than
	// the slot: name, value and the map entry.
	const propBytes = 64
	// %TypedArray%.prototype: join and toLocaleString walk every element
	// natively, and toString calls join.
	typedProto := rt.Get("Uint8Array").ToObject(rt).Get("prototype").ToObject(rt).Prototype()
	guards := []struct {
		obj  *goja.Object
		name string
		size func(goja.FunctionCall) float64
	}{
		{fnProto, "apply", argsOf(1)},
		{reflect, "apply", argsOf(2)},
		{reflect, "construct", argsOf(1)},
		{strProto, "replaceAll", func(c goja.FunctionCall) float64 { return g.replaced(c, true) }},
		{strProto, "replace", func(c goja.FunctionCall) float64 { return g.replaced(c, false) }},
		{object, "assign", func(c goja.FunctionCall) float64 {
			var n float64
			for _, a := range c.Arguments[min(1, len(c.Arguments)):] {
				n += g.elements(a)
			}
			return n * propBytes
		}},
		// String.raw joins raw's elements, however long raw says it is.
		{rt.Get("String").ToObject(rt), "raw", func(c goja.FunctionCall) float64 {
			tpl, ok := c.Argument(0).(*goja.Object)
			if !ok {
				return 0
			}
			raw := tpl.Get("raw")
			n := g.length(raw)
			subs := 0.0
			for _, a := range c.Arguments[1:min(len(c.Arguments), int(max(n, 1)))] {
				subs += g.strLen(a)
			}
			return n*slotBytes + 2*(g.text(raw)+subs)
		}},
		{object, "getOwnPropertyNames", func(c goja.FunctionCall) float64 { return g.ownKeys(c.Argument(0)) * propBytes }},
		// A descriptor is an object of four properties.
		{object, "getOwnPropertyDescriptors", func(c goja.FunctionCall) float64 { return g.ownKeys(c.Argument(0)) * 4 * propBytes }},
		{reflect, "ownKeys", func(c goja.FunctionCall) float64 { return g.ownKeys(c.Argument(0)) * propBytes }},
		{object, "keys", func(c goja.FunctionCall) float64 { return g.elements(c.Argument(0)) * propBytes }},
		{object, "values", func(c goja.FunctionCall) float64 { return g.elements(c.Argument(0)) * propBytes }},
		{object, "entries", func(c goja.FunctionCall) float64 { return g.elements(c.Argument(0)) * propBytes }},
	}
	for _, x := range guards {
		if err := g.wrap(x.obj, x.name, x.size); err != nil {
			return err
		}
	}
	// concat makes each of its operands a string once, as the standard
	// says: here, to size the result, and it gets the strings.
	if err := g.vm.replaceMethod(strProto, "concat", func(orig goja.Callable) func(goja.FunctionCall) goja.Value {
		return func(c goja.FunctionCall) goja.Value {
			if c.This == nil || goja.IsUndefined(c.This) || goja.IsNull(c.This) {
				return mustCall(orig, c.This, c.Arguments...) // its TypeError
			}
			this := c.This.ToString()
			args := make([]goja.Value, len(c.Arguments))
			n := g.strLen(this)
			for i, a := range c.Arguments {
				args[i] = a.ToString()
				n += g.strLen(args[i])
			}
			if g.over(2 * n) {
				return goja.Undefined() // the interrupt fires at the next instruction
			}
			return mustCall(orig, this, args...)
		}
	}); err != nil {
		return err
	}
	for _, name := range []string{"join", "toLocaleString"} {
		if err := g.wrapPinning(typedProto, name, g.joinSize, false); err != nil {
			return err
		}
	}
	return nil
}

// elements is how many indexed properties v has: its length if it is a
// string or an array-like object.
func (g *allocGuard) elements(v goja.Value) float64 {
	if goja.IsString(v) {
		return g.strLen(v)
	}
	// Not pinned: the builtins sized by it list own keys, and never read
	// the length themselves. A Proxy is not asked: its traps would see a
	// read the builtin does not make, and the keys its ownKeys trap lists
	// are already an array it made.
	if obj, ok := v.(*goja.Object); ok && obj.ExportType() != proxyType {
		return sizingLength(obj)
	}
	return 0
}

// sizingLength is obj's length for an estimate of the builtin's work, 0
// when reading it throws: the builtin (Object.keys of a typed array's
// prototype, say) never reads it, and must not fail for the guard.
func sizingLength(obj *goja.Object) (n float64) {
	defer func() {
		if recover() != nil {
			n = 0
		}
	}()
	return lengthOf(obj)
}

// replaced bounds the length of a string replace's result when the pattern
// is a string: each occurrence (every one for replaceAll) becomes the
// replacement, whose $& can repeat the pattern and $` and $' the whole
// string. A regex pattern is counted as it runs (guardRegex).
func (g *allocGuard) replaced(c goja.FunctionCall, all bool) float64 {
	pat := c.Argument(0)
	if !goja.IsString(pat) || !goja.IsString(c.Argument(1)) || !goja.IsString(c.This) {
		return 0
	}
	s, p, r := c.This.String(), pat.String(), c.Argument(1).String()
	n := strings.Count(s, p)
	if !all {
		n = min(n, 1)
	}
	// $` and $' insert everything before or after the match.
	grow := float64(len(r))*float64(max(len(p), 1)) + float64(strings.Count(r, "$`")+strings.Count(r, "$'"))*float64(len(s))
	return 2 * (float64(len(s)) + float64(n)*grow)
}

// regexReplaced bounds the length of a regex replace's result when the
// replacement inserts everything before or after each match ($` and $'):
// "a".repeat(1e5).replace(/a/g, "$'") asked for five billion characters
// in one native call. Each match (one, unless re is global; then at most
// one per position) copies up to the whole string per such pattern.
// Other replacements grow the result by at most the replacement per
// match, which the watchdog sees in time.
func (g *allocGuard) regexReplaced(re, str goja.Value, repl string) float64 {
	tails := float64(strings.Count(repl, "$`") + strings.Count(repl, "$'"))
	if tails == 0 {
		return 0
	}
	n := g.strLen(str)
	matches := 1.0
	if obj, ok := re.(*goja.Object); ok && strings.Contains(obj.Get("flags").String(), "g") {
		matches = n + 1
	}
	return 2 * (n + matches*(float64(len(repl))+tails*n))
}

// joinSize bounds a join's result: every element but the last is followed
// by the separator, and string elements are copied whole.
func (g *allocGuard) joinSize(c goja.FunctionCall) float64 {
	return g.length(c.This)*(slotBytes+2*g.strLen(c.Argument(0))) + 2*g.text(c.This)
}

// maxTextScan bounds how many elements text reads.
const maxTextScan = 1 << 16

// text adds up the lengths of the strings among the first maxTextScan
// elements of arr: one string repeated through an array costs little to
// hold, but a join copies it each time. Past those, the watchdog has it.
func (g *allocGuard) text(arr goja.Value) float64 {
	obj, ok := arr.(*goja.Object)
	if !ok {
		return 0
	}
	total := 0.0
	for i := range int(min(g.length(obj), maxTextScan)) {
		if el := obj.Get(strconv.Itoa(i)); el != nil && goja.IsString(el) {
			total += g.strLen(el)
		}
	}
	return total
}

// ownKeys is how many own keys listing v's can make: a string (or String
// object) has one per character whatever its memory, while an array's
// keys are elements that already exist, however long it says it is.
func (g *allocGuard) ownKeys(v goja.Value) float64 {
	if obj, ok := v.(*goja.Object); ok && obj.ClassName() == "Array" {
		return 0
	}
	return g.elements(v)
}
