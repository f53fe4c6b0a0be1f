package jsvm

import (
	"fmt"
	"strings"

	"github.com/dop251/goja"
)

// maxRegexNesting bounds how deeply a pattern compiled at run time nests
// its groups. goja compiles nested lookaheads in time that grows faster
// than their depth, natively: 40,000 of them took 11 s, 100,000 over a
// minute, past every deadline. Patterns people write nest a few levels.
const maxRegexNesting = 1000

// guardRegexCompile puts a Proxy in front of RegExp that refuses a
// pattern string nested deeper than maxRegexNesting, and a wrapper in
// front of RegExp.prototype.compile. A pattern given as a regex was
// checked when it was made. RegExp.prototype.constructor names the Proxy,
// so /a/.constructor === RegExp still holds.
func (vm *VM) guardRegexCompile() error {
	rt := vm.Runtime
	target := rt.Get("RegExp").ToObject(rt)
	ctor, ok := goja.AssertConstructor(target)
	call, ok2 := goja.AssertFunction(target)
	if !ok || !ok2 {
		return nil
	}
	check := func(args []goja.Value) []goja.Value {
		if len(args) == 0 {
			return args
		}
		var flags goja.Value = goja.Undefined()
		if len(args) > 1 {
			flags = args[1]
		}
		pattern := args[0]
		if obj, isObj := pattern.(*goja.Object); isObj {
			if obj.ClassName() == "RegExp" {
				return args // compiled, and checked, when it was made
			}
			// Regex-like (a Proxy of one, say): its source and flags,
			// read once here as the spec reads them, and passed on as
			// strings, so that what is checked is what compiles.
			if m := obj.GetSymbol(goja.SymMatch); m != nil && m.ToBoolean() {
				pattern = obj.Get("source")
				if goja.IsUndefined(flags) {
					flags = orUndefined(obj.Get("flags"))
				}
			}
		}
		if pattern == nil || goja.IsUndefined(pattern) || isSymbol(pattern) {
			return args
		}
		// Converted once, so what is checked is what compiles.
		text := pattern.ToString()
		d, name := scanGroups(text.String())
		if name != "" {
			vm.throw(vm.builtins.syntaxError, fmt.Sprintf("Invalid regular expression: /%s/: Duplicate capture group name %q; name each group once", text.String(), name))
		}
		if d > maxRegexNesting {
			vm.throw(vm.builtins.syntaxError, fmt.Sprintf("the regular expression nests its groups %d deep, over the %d allowed; nest them less deeply", d, maxRegexNesting))
		}
		if goja.IsUndefined(flags) {
			return []goja.Value{text}
		}
		return []goja.Value{text, flags}
	}
	var proxy *goja.Object
	proxy = rt.ToValue(rt.NewProxy(target, &goja.ProxyTrapConfig{
		Construct: func(_ *goja.Object, args []goja.Value, newTarget *goja.Object) *goja.Object {
			obj, err := ctor(newTarget, check(args)...)
			if err != nil {
				panic(err)
			}
			return obj
		},
		Apply: func(_ *goja.Object, this goja.Value, args []goja.Value) goja.Value {
			// RegExp(re) answers re itself when re's constructor is
			// RegExp: the Proxy, which goja's builtin cannot know for it.
			if len(args) > 0 && (len(args) == 1 || goja.IsUndefined(args[1])) {
				if obj, ok := args[0].(*goja.Object); ok {
					isRegExp := obj.ClassName() == "RegExp"
					if m := obj.GetSymbol(goja.SymMatch); m != nil && !goja.IsUndefined(m) {
						isRegExp = m.ToBoolean()
					}
					if isRegExp {
						if c, ok := obj.Get("constructor").(*goja.Object); ok && c.SameAs(proxy) {
							return obj
						}
					}
				}
			}
			return mustCall(call, this, check(args)...)
		},
	})).(*goja.Object)
	if err := proxiedInstanceOf(rt, target); err != nil {
		return err
	}
	proto := target.Get("prototype").ToObject(rt)
	if err := proto.DefineDataProperty("constructor", proxy, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	if err := vm.replaceMethod(proto, "compile", func(orig goja.Callable) func(goja.FunctionCall) goja.Value {
		return func(c goja.FunctionCall) goja.Value { return mustCall(orig, c.This, check(c.Arguments)...) }
	}); err != nil {
		return err
	}
	return rt.GlobalObject().DefineDataProperty("RegExp", proxy, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// scanGroups reads a pattern's groups as goja will compile them:
// parentheses that are not escaped and not inside a character class. It
// returns how deeply they nest, and a group name used twice ("" if none),
// on which goja panics instead of throwing the SyntaxError Node 20 throws.
func scanGroups(pattern string) (deepest int, duplicate string) {
	depth, inClass := 0, false
	var seen map[string]bool
	for i := 0; i < len(pattern); i++ {
		switch c := pattern[i]; {
		case c == '\\':
			i++
		case inClass:
			inClass = c != ']'
		case c == '[':
			inClass = true
		case c == '(':
			depth++
			deepest = max(deepest, depth)
			if rest, ok := strings.CutPrefix(pattern[i+1:], "?<"); ok && rest != "" && rest[0] != '=' && rest[0] != '!' {
				if name, _, ok := strings.Cut(rest, ">"); ok && duplicate == "" {
					if seen[name] {
						duplicate = name
					}
					if seen == nil {
						seen = map[string]bool{}
					}
					seen[name] = true
				}
			}
		case c == ')':
			depth = max(depth-1, 0)
		}
	}
	return deepest, duplicate
}
