package jsvm

import (
	"fmt"
	"strings"

	"github.com/dop251/goja"
)

// A regex that goja cannot run on its fast path (a subclass, an instance
// with a property of its own, a RegExp.prototype someone changed) is
// replaced and matched the spec's generic way: read `flags`, and while it
// holds a "g", call `exec` until it returns null. Both are the script's
// to choose. A `flags` that claims "g" on a regex that is not global, or
// an `exec` such as Object that never returns null, keeps that loop going
// inside one native call, growing its list of matches until the process
// runs out of memory; no deadline reaches it. So such a regex is given to
// goja behind a Proxy whose `exec` looks at the stop flag before each
// call: the deadline and the memory limit end the loop as they end any
// other.

// regexOriginals are RegExp.prototype and its exec, taken before any app
// code ran, and Object.getOwnPropertyDescriptor to look at exec later
// without running the app's code.
type regexOriginals struct {
	proto        *goja.Object
	exec         goja.Value
	getOwnPropOf goja.Callable
	hasOwn       goja.Callable // Object.prototype.hasOwnProperty
	ctor         goja.Value    // RegExp, the species when none is given
	flags        goja.Value    // the truthful flags getter
	names        [2]goja.Value // "exec" and "flags", made once
	// results are the exec results behind a pin during the running
	// replace, match or split, to give back where one is returned.
	results []pin
	// defined is set once the app's code has defined a property that
	// could be named exec or flags (defineProperty and its kin): only
	// such a define makes exec an accessor, whose getter would run when
	// read, or puts another getter in flags' place. Until then the
	// prototype's own exec and flags are as they were or plain data.
	defined bool
}

// regexFlagGetters are RegExp.prototype's flag getters in the order of
// the letters in flags.
var regexFlagGetters = []struct{ name, letter string }{
	{"global", "g"}, {"ignoreCase", "i"}, {"multiline", "m"}, {"dotAll", "s"}, {"unicode", "u"}, {"sticky", "y"},
}

// takeRegexOriginals keeps RegExp.prototype's exec, and gives the
// prototype a flags getter that, for a regex, says what the regex is:
// the spec's getter asks this.global and the rest, which a subclass or the
// app's code may redefine. Unlike those, flags is not one of the
// properties whose change turns goja's fast paths off, so replacing it
// costs nothing, and the generic path can trust a regex's flags while
// this getter stands (regexReadsTrue).
func (vm *VM) takeRegexOriginals() error {
	rt := vm.Runtime
	v, err := vm.RunString(`(() => {
  const p = RegExp.prototype, d = Object.getOwnPropertyDescriptor
  return [p, p.exec, d, Object.prototype.hasOwnProperty, d(p, "flags").get, ` + flagGetterList() + `]
})()`)
	if err != nil {
		return err
	}
	o := v.ToObject(rt)
	gopd, ok1 := goja.AssertFunction(o.Get("2"))
	hasOwn, ok3 := goja.AssertFunction(o.Get("3"))
	specObj, _ := o.Get("4").(*goja.Object)
	spec, ok2 := goja.AssertFunction(specObj)
	if !ok1 || !ok2 || !ok3 {
		return fmt.Errorf("jsvm: this goja lacks Object.getOwnPropertyDescriptor or RegExp.prototype.flags")
	}
	getters := make([]goja.Callable, len(regexFlagGetters))
	for i := range regexFlagGetters {
		if getters[i], ok1 = goja.AssertFunction(o.Get(fmt.Sprint(5 + i))); !ok1 {
			return fmt.Errorf("jsvm: this goja has no RegExp.prototype.%s", regexFlagGetters[i].name)
		}
	}
	proto := o.Get("0").ToObject(rt)
	vm.regex = regexOriginals{proto: proto, exec: o.Get("1"), getOwnPropOf: gopd, hasOwn: hasOwn, ctor: rt.Get("RegExp"),
		names: [2]goja.Value{rt.ToValue("exec"), rt.ToValue("flags")}}
	flags := rt.ToValue(func(c goja.FunctionCall) goja.Value {
		rx, ok := c.This.(*goja.Object)
		if !ok || rx.ClassName() != "RegExp" {
			return mustCall(spec, c.This)
		}
		var b strings.Builder
		for i, g := range regexFlagGetters {
			if mustCall(getters[i], rx).ToBoolean() {
				b.WriteString(g.letter)
			}
		}
		return rt.ToValue(b.String())
	}).(*goja.Object)
	copyIdentity(specObj, flags)
	vm.regex.flags = flags
	// Configurable, as the spec's: a shim may redefine it, and from then
	// on no regex of this runtime is taken as plain (regexReadsTrue).
	if err := proto.DefineAccessorProperty("flags", flags, nil, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	return vm.watchDefines()
}

func flagGetterList() string {
	var b strings.Builder
	for _, g := range regexFlagGetters {
		fmt.Fprintf(&b, "d(p, %q).get, ", g.name)
	}
	return b.String()
}

// regexReadsTrue reports whether rx is a RegExp whose flags and exec,
// wherever goja reads them, are the builtins: no property of its own but
// lastIndex (however it was made: a class field, Reflect.set with rx as
// the receiver), RegExp.prototype as its prototype, and that prototype's
// own exec and flags the originals. Nothing it reads runs app code.
func (vm *VM) regexReadsTrue(rx *goja.Object) bool {
	r := &vm.regex
	if rx.ClassName() != "RegExp" || rx.Prototype() != r.proto {
		return false
	}
	if own := rx.GetOwnPropertyNames(); len(own) != 1 || own[0] != "lastIndex" {
		return false
	}
	// exec and flags must be the prototype's own: a deleted one would
	// be looked up further along, where a getter may stand.
	for _, name := range r.names {
		if own, err := r.hasOwn(r.proto, name); err != nil || !own.ToBoolean() {
			return false
		}
	}
	if !r.defined {
		return r.proto.Get("exec") == r.exec
	}
	// An accessor may stand in either place: read their descriptors.
	return vm.ownField(r.proto, "exec", "value", r.exec) && vm.ownField(r.proto, "flags", "get", r.flags)
}

// ownField reports whether obj's own property name has field (value or
// get) want, reading only the fresh descriptor's own properties.
func (vm *VM) ownField(obj *goja.Object, name, field string, want goja.Value) bool {
	d, err := vm.regex.getOwnPropOf(goja.Undefined(), obj, vm.ToValue(name))
	if err != nil {
		return false
	}
	desc, ok := d.(*goja.Object)
	if !ok {
		return false
	}
	for _, k := range desc.GetOwnPropertyNames() {
		if k == field {
			return desc.Get(field) == want
		}
	}
	return false
}

// watchDefines sets regex.defined when the app's code defines a property
// that may be exec or flags: a key that is not a plain string (its
// conversion is app code), or any call of defineProperties.
func (vm *VM) watchDefines() error {
	rt := vm.Runtime
	mayName := func(key goja.Value) bool {
		if !goja.IsString(key) {
			return true
		}
		return key.String() == "exec" || key.String() == "flags"
	}
	object := rt.Get("Object").ToObject(rt)
	watch := func(obj *goja.Object, name string, touches func(goja.FunctionCall) bool) error {
		return vm.replaceMethod(obj, name, func(orig goja.Callable) func(goja.FunctionCall) goja.Value {
			return func(c goja.FunctionCall) goja.Value {
				if touches(c) {
					vm.regex.defined = true
				}
				return mustCall(orig, c.This, c.Arguments...)
			}
		})
	}
	byKey := func(c goja.FunctionCall) bool { return mayName(c.Argument(1)) }
	if err := watch(object, "defineProperty", byKey); err != nil {
		return err
	}
	if err := watch(rt.Get("Reflect").ToObject(rt), "defineProperty", byKey); err != nil {
		return err
	}
	return watch(object, "defineProperties", func(goja.FunctionCall) bool { return true })
}

// maxExecResult bounds the length of what an exec returns on the generic
// path: goja sizes the list of captures by it in one step, and a length
// of 2**31 asked for 32 GiB. A regex has at most a few thousand groups.
const maxExecResult = 100_000

// stoppableExec is rx behind a Proxy that passes every read and write
// through to rx, but whose exec looks at the stop flag before each call
// and answers a result no longer than maxExecResult, whose length stays
// what was read (pins.go). Its species, which split constructs, is
// made the same way.
func (vm *VM) stoppableExec(rx *goja.Object) *goja.Object {
	return vm.ToValue(vm.NewProxy(rx, &goja.ProxyTrapConfig{
		Get: func(target *goja.Object, key string, _ goja.Value) goja.Value {
			v := orUndefined(target.Get(key))
			switch key {
			case "exec":
				if exec, ok := goja.AssertFunction(v); ok {
					return vm.ToValue(func(c goja.FunctionCall) goja.Value {
						vm.checkStop()
						return vm.execResult(mustCall(exec, target, c.Arguments...))
					})
				}
			case "constructor":
				if c, ok := v.(*goja.Object); ok {
					return vm.stoppableSpecies(c)
				}
			}
			return v
		},
		Set: func(target *goja.Object, key string, value goja.Value, _ goja.Value) bool {
			return target.Set(key, value) == nil
		},
	})).(*goja.Object)
}

// execResult checks and pins what an exec returned.
func (vm *VM) execResult(v goja.Value) goja.Value {
	res, ok := v.(*goja.Object)
	if !ok {
		return v
	}
	raw := res.Get("length")
	n := toLength(raw)
	if n > maxExecResult {
		vm.throw(vm.builtins.rangeError, fmt.Sprintf("exec returned a result of length %d, over the %d a regex can capture", n, maxExecResult))
	}
	if fixedLength(res) {
		return res
	}
	pinned := vm.pinProxy(res, vm.ToValue(n))
	vm.regex.results = append(vm.regex.results, pin{obj: res, proxy: pinned})
	return pinned
}

// stoppableSpecies stands for the constructor c of a regex on the generic
// path: its Symbol.species makes what c's would, behind stoppableExec.
func (vm *VM) stoppableSpecies(c *goja.Object) *goja.Object {
	holder := vm.NewObject()
	species := vm.ToValue(func(call goja.ConstructorCall) *goja.Object {
		var ctor goja.Value = vm.regex.ctor
		if s := c.GetSymbol(goja.SymSpecies); s != nil && !goja.IsUndefined(s) && !goja.IsNull(s) {
			ctor = s
		}
		made, err := vm.New(ctor, call.Arguments...)
		if err != nil {
			panic(err)
		}
		return vm.stoppableExec(made)
	})
	if err := holder.SetSymbol(goja.SymSpecies, species); err != nil {
		panic(err)
	}
	return holder
}
