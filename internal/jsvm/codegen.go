package jsvm

import (
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"strings"

	"github.com/dop251/goja"
	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/parser"
)

// Code from strings (eval, new Function and the async and generator
// function constructors) is compiled at run time, as npm packages expect
// (ajv compiles each schema into a function, lodash's template each
// template). goja's parser and compiler recurse once per nesting level,
// and a Go stack overflow ends the process, so each string is checked
// before goja sees it:
//
//   - Its length: at most MaxCodeString bytes. Measured on goja, the
//     deepest recursion costs about 2 KiB of Go stack per byte of source
//     (a level of parentheses or of template literals), so a string of
//     this size needs at most about 150 MiB of the 1 GiB stack limit,
//     however it nests.
//   - A parse of its own, under recover: a panic of goja's parser (a bug
//     some input reaches) is the call's SyntaxError, not the server's end.
//   - No BigInt literal unless the runtime has BigInt, and then its
//     operators are compiled with their checks (bigint_rewrite.go).
//
// The compile runs inside the call, under its deadline and heap guard.
// eval is always an indirect eval: the code runs in the global scope and
// cannot see the caller's variables (esbuild's bundles rename them in any
// case). Source maps named in a string are never read: goja would read
// them from the server's disk.

// MaxCodeString bounds the source of one eval or function constructor.
const MaxCodeString = 64 << 10

// installCodegen replaces eval and the function constructors with ones
// that check the string first, then compile it with goja's own.
func installCodegen(vm *VM) error {
	rt := vm.Runtime
	global := rt.GlobalObject()
	rt.SetParserOptions(parser.WithDisableSourceMaps)
	// Taken now: the app's code may replace the globals later.
	syntaxError, rangeError := rt.Get("SyntaxError"), rt.Get("RangeError")

	// check refuses what goja must not parse: src is what goja will see
	// (a function constructor's assembled source), for the message n is
	// the length the caller sent. It returns the parsed tree when the
	// runtime has BigInt, whose operators must be compiled checked.
	// strict is for the function constructors, whose directive is in the
	// body: an eval's is read from the script.
	check := func(what, src string, n int, strict bool) *ast.Program {
		if n > MaxCodeString {
			vm.throw(rangeError, fmt.Sprintf("%s was given %d bytes of code; app code compiles at most %d bytes from one string at run time (split the code, or write it in the module)", what, n, MaxCodeString))
		}
		prog, perr := safeParse(src)
		if perr != "" {
			vm.throw(syntaxError, fmt.Sprintf("%s: %s", what, perr))
		}
		if prog == nil {
			return nil // a syntax error, which goja's own compile reports
		}
		if !vm.prog.bigint {
			if hasBigInt(reflect.ValueOf(prog), map[uintptr]bool{}) {
				vm.throw(syntaxError, what+": BigInt is not available here: an app's runtime has BigInt when its own code names BigInt (handoff then compiles each BigInt operator with a size check), and this app's code does not")
			}
			return nil
		}
		changed, err := rewriteBigInt(prog, strict || hasUseStrict(prog))
		if err != nil {
			vm.throw(syntaxError, fmt.Sprintf("%s: %v", what, err))
		}
		if !changed {
			return nil // nothing to check: goja's own eval, with its scoping
		}
		return prog
	}
	// run compiles and runs a rewritten tree as a script in the global
	// scope, which is what an indirect eval does; it answers the script's
	// completion value.
	run := func(prog *ast.Program) goja.Value {
		evalScope(prog)
		p, err := goja.CompileAST(prog, false)
		if err != nil {
			var se *goja.CompilerSyntaxError
			if errors.As(err, &se) {
				vm.throw(syntaxError, se.Message)
			}
			panic(err)
		}
		v, err := rt.RunProgram(p)
		if err != nil {
			panic(err)
		}
		return v
	}

	eval := rt.Get("eval").ToObject(rt)
	evalFn, _ := goja.AssertFunction(eval)
	guardedEval := rt.ToValue(func(c goja.FunctionCall) goja.Value {
		x := c.Argument(0)
		if !goja.IsString(x) {
			return x // eval of a non-string answers it unchanged
		}
		s := x.String()
		if prog := check("eval", s, len(s), false); prog != nil {
			return run(prog)
		}
		v, err := evalFn(goja.Undefined(), x)
		if err != nil {
			panic(err)
		}
		return v
	}).(*goja.Object)
	copyIdentity(eval, guardedEval)
	if err := global.DefineDataProperty("eval", guardedEval, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}

	// A guarded constructor keeps the original's prototype, name and
	// length, so instanceof and Function.prototype work as before.
	guard := func(orig *goja.Object, kind, what string) (*goja.Object, error) {
		ctor, ok := goja.AssertConstructor(orig)
		if !ok {
			return nil, fmt.Errorf("jsvm: %s is not a constructor", what)
		}
		fn := rt.ToValue(func(c goja.ConstructorCall) *goja.Object {
			// Each argument is made a string once, as the standard says,
			// and the constructor gets the strings that were checked.
			args := make([]goja.Value, len(c.Arguments))
			strs := make([]string, len(c.Arguments))
			n := 0
			for i, a := range c.Arguments {
				strs[i] = a.String()
				n += len(strs[i])
				if n > MaxCodeString {
					check(what, "", n, false)
				}
				args[i] = rt.ToValue(strs[i])
			}
			body, params := "", ""
			if len(strs) > 0 {
				body, params = strs[len(strs)-1], strings.Join(strs[:len(strs)-1], ",")
			}
			if prog := check(what, "("+kind+" anonymous("+params+"\n) {\n"+body+"\n})", n, startsStrict(body)); prog != nil {
				return run(prog).(*goja.Object)
			}
			obj, err := ctor(nil, args...)
			if err != nil {
				panic(err)
			}
			return obj
		}).(*goja.Object)
		copyIdentity(orig, fn)
		// As the original's: not writable, not configurable.
		return fn, fn.DefineDataProperty("prototype", orig.Get("prototype"), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE)
	}
	function := rt.Get("Function").ToObject(rt)
	guardedFunction, err := guard(function, "function", "new Function")
	if err != nil {
		return err
	}
	if err := global.DefineDataProperty("Function", guardedFunction, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	if err := function.Get("prototype").ToObject(rt).DefineDataProperty("constructor", guardedFunction, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	// The other function constructors are reached only through their
	// prototypes' constructor property.
	for _, k := range []struct{ src, kind, what string }{
		{"(async function () {})", "async function", "the AsyncFunction constructor"},
		{"(function* () {})", "function*", "the GeneratorFunction constructor"},
	} {
		fn, err := rt.RunString(k.src)
		if err != nil {
			return err
		}
		proto := fn.ToObject(rt).Prototype()
		orig, ok := proto.Get("constructor").(*goja.Object)
		if !ok {
			continue
		}
		guarded, err := guard(orig, k.kind, k.what)
		if err != nil {
			return err
		}
		if err := proto.DefineDataProperty("constructor", guarded, goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return err
		}
	}
	return nil
}

// safeParse parses src as a script with goja's parser. A parse error is
// left for goja's own compile to report as it does; a panic of the parser
// comes back as its message.
func safeParse(src string) (prog *ast.Program, panicked string) {
	defer func() {
		if r := recover(); r != nil {
			prog, panicked = nil, fmt.Sprintf("the JavaScript runtime could not parse this code (%v)", r)
		}
	}()
	prog, err := parser.ParseFile(nil, "", src, 0, parser.WithDisableSourceMaps)
	if err != nil {
		return nil, ""
	}
	return prog, ""
}

// hasBigInt reports whether the syntax tree under v holds a BigInt
// literal. The tree's depth is bounded by the source's length.
func hasBigInt(v reflect.Value, seen map[uintptr]bool) bool {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return false
		}
		seen[v.Pointer()] = true
		if n, ok := v.Interface().(*ast.NumberLiteral); ok {
			_, isBig := n.Value.(*big.Int)
			return isBig
		}
		return hasBigInt(v.Elem(), seen)
	case reflect.Interface:
		return !v.IsNil() && hasBigInt(v.Elem(), seen)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && hasBigInt(v.Field(i), seen) {
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			if hasBigInt(v.Index(i), seen) {
				return true
			}
		}
	}
	return false
}

// startsStrict reports whether a function body begins with the "use
// strict" directive.
func startsStrict(body string) bool {
	b := strings.TrimLeft(body, " \t\r\n;")
	return strings.HasPrefix(b, `"use strict"`) || strings.HasPrefix(b, `'use strict'`)
}

// evalScope gives a script run as an eval what an eval's own scope gives
// it: its top-level let, const and class live in a block, so a second
// eval may declare them again, while its vars still reach the global
// scope. A script with top-level functions is left as it is, since they
// may refer to those declarations.
func evalScope(prog *ast.Program) {
	lexical := false
	start := 0 // after the directive prologue, which must stay first
	for i, st := range prog.Body {
		switch s := st.(type) {
		case *ast.FunctionDeclaration:
			return
		case *ast.LexicalDeclaration, *ast.ClassDeclaration:
			lexical = true
		case *ast.ExpressionStatement:
			if _, ok := s.Expression.(*ast.StringLiteral); ok && start == i {
				start = i + 1
			}
		}
	}
	if !lexical || start == len(prog.Body) {
		return
	}
	rest := prog.Body[start:]
	block := &ast.BlockStatement{LeftBrace: rest[0].Idx0(), List: rest, RightBrace: rest[len(rest)-1].Idx1()}
	prog.Body = append(prog.Body[:start:start], block)
}
