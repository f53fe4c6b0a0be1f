package jsvm

import (
	"fmt"
	"math/big"
	"reflect"
	"regexp"
	"strings"

	"github.com/dop251/goja/ast"
	"github.com/dop251/goja/file"
	"github.com/dop251/goja/token"
	"github.com/dop251/goja/unistring"
)

// goja computes BigInt operators with math/big in one native step that
// no deadline or memory limit can interrupt, and a few of them have no
// bound but their operands' values: 2n ** 10n ** 11n asks for 12 GB at
// once. goja offers no hook on its operators, so code that uses BigInt
// is compiled with those operators turned into calls of bigint.go's
// checked versions. The checks cost a native call per operator, so only
// a program that names BigInt gets them (usesBigInt), and a runtime whose
// module does not name it has no BigInt at all (refused.go): without the
// name there is no way to make one.
//
// What is rewritten: *, **, << and >> and their assignments (their
// results can outgrow their operands), and <, >, <=, >=, == and != (a
// BigInt compared with a string parses the string, in time quadratic in
// its length). An operand that is a number literal cannot produce a
// BigInt, so `i * 2` and `n < 10` are left alone.

// bigNames are the names that lead to a BigInt: the constructor, the
// typed arrays and the DataView methods that hold them.
var bigNames = []string{"BigInt", "BigUint64Array", "getBigInt64", "getBigUint64", "setBigInt64", "setBigUint64"}

// bigLiteral finds what may be a BigInt literal; the syntax tree decides.
var bigLiteral = regexp.MustCompile(`\b(?:0[xXoObB][0-9a-fA-F_]+|[0-9][0-9_]*)n\b`)

// mayUseBigInt is a quick look at the source text: false means the
// program cannot use BigInt and needs no syntax-tree walk.
func mayUseBigInt(src string) bool {
	return strings.Contains(src, "BigInt") || strings.Contains(src, "BigUint") || bigLiteral.MatchString(src)
}

// The checked operators, by the global names the rewritten code calls.
// "%" keeps them apart from every name source code can declare.
const (
	bigMul = "%mul"
	bigPow = "%pow"
	bigShl = "%shl"
	bigShr = "%shr"
	bigLt  = "%lt"
	bigGt  = "%gt"
	bigLe  = "%le"
	bigGe  = "%ge"
	bigEq  = "%eq"
	bigNe  = "%ne"
	bigGet = "%get" // reads o[k] for a compound assignment
	bigPut = "%put" // computes and writes it
)

var arithOps = map[token.Token]string{
	token.MULTIPLY: bigMul, token.EXPONENT: bigPow,
	token.SHIFT_LEFT: bigShl, token.SHIFT_RIGHT: bigShr,
}

var compareOps = map[token.Token]string{
	token.LESS: bigLt, token.GREATER: bigGt, token.LESS_OR_EQUAL: bigLe,
	token.GREATER_OR_EQUAL: bigGe, token.EQUAL: bigEq, token.NOT_EQUAL: bigNe,
}

// opCodes number the arithmetic operators for %put.
var opCodes = map[string]int{bigMul: 0, bigPow: 1, bigShl: 2, bigShr: 3}

var identType = reflect.TypeOf(ast.Identifier{})

// bigRewriter walks a syntax tree, noting whether it names BigInt and, when
// rewrite is set, replacing the operators above.
type bigRewriter struct {
	rewrite bool
	strict  bool
	changed bool
	uses    bool
	err     error
	seen    map[uintptr]bool
}

// usesBigInt reports whether prog names BigInt or holds a BigInt literal.
func usesBigInt(prog *ast.Program) bool {
	w := &bigRewriter{seen: map[uintptr]bool{}}
	w.walk(reflect.ValueOf(prog))
	return w.uses
}

// rewriteBigInt replaces prog's unbounded BigInt operators with checked
// calls, and reports whether there were any. It fails only for a compound
// assignment it cannot rewrite without changing what the code does.
//
// strict says whether the code is strict, which decides whether a
// compound assignment that cannot write throws.
func rewriteBigInt(prog *ast.Program, strict bool) (changed bool, err error) {
	w := &bigRewriter{rewrite: true, strict: strict, seen: map[uintptr]bool{}}
	w.walk(reflect.ValueOf(prog))
	return w.changed, w.err
}

var astPkg = reflect.TypeOf(ast.Program{}).PkgPath()

// walk visits v's nodes depth first; each expression is offered to
// replace after its children, through the field or slice element that
// holds it. The tree's depth is bounded by its source's length, which
// the compile's checks bound.
func (w *bigRewriter) walk(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || v.Type().Elem().PkgPath() != astPkg || w.seen[v.Pointer()] {
			return
		}
		w.seen[v.Pointer()] = true
		w.note(v.Interface())
		w.walk(v.Elem())
	case reflect.Interface:
		if !v.IsNil() {
			w.walk(v.Elem())
		}
	case reflect.Struct:
		if v.Type() == identType {
			w.uses = w.uses || isBigName(v.Field(0).String())
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				w.slot(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			w.slot(v.Index(i))
		}
	}
}

// slot walks the value in a field or slice element, then replaces it
// if it is an operator to rewrite.
func (w *bigRewriter) slot(v reflect.Value) {
	w.walk(v)
	if !w.rewrite || w.err != nil || v.Kind() != reflect.Interface || v.IsNil() {
		return
	}
	e, ok := v.Interface().(ast.Expression)
	if !ok {
		return
	}
	r := w.replace(e)
	if r == nil {
		return
	}
	if !reflect.TypeOf(r).AssignableTo(v.Type()) || !v.CanSet() {
		w.err = fmt.Errorf("an operator at offset %d, where handoff cannot add its BigInt checks", e.Idx0())
		return
	}
	v.Set(reflect.ValueOf(r))
	w.changed = true
}

// note records the names and literals that make a BigInt.
func (w *bigRewriter) note(n any) {
	switch n := n.(type) {
	case *ast.NumberLiteral:
		if _, ok := n.Value.(*big.Int); ok {
			w.uses = true
		}
	case *ast.StringLiteral:
		w.uses = w.uses || mentionsBig(string(n.Value))
	case *ast.TemplateElement:
		w.uses = w.uses || mentionsBig(string(n.Parsed))
	}
}

func isBigName(s string) bool {
	for _, n := range bigNames {
		if s == n {
			return true
		}
	}
	return false
}

// mentionsBig is for strings, which reach a global by a computed name.
func mentionsBig(s string) bool {
	return strings.Contains(s, "BigInt") || strings.Contains(s, "BigUint")
}

// replace returns the checked form of e, or nil to keep e.
func (w *bigRewriter) replace(e ast.Expression) ast.Expression {
	switch n := e.(type) {
	case *ast.BinaryExpression:
		if name, ok := arithOps[n.Operator]; ok && !plainNumber(n.Left) && !plainNumber(n.Right) {
			return callOf(name, n.Right.Idx1(), n.Left, n.Right)
		}
		if name, ok := compareOps[n.Operator]; ok && !harmlessCompare(n.Left) && !harmlessCompare(n.Right) {
			return callOf(name, n.Right.Idx1(), n.Left, n.Right)
		}
	case *ast.AssignExpression:
		name, ok := arithOps[n.Operator]
		if !ok || plainNumber(n.Right) {
			return nil
		}
		end := n.Right.Idx1()
		switch t := n.Left.(type) {
		case *ast.Identifier:
			return &ast.AssignExpression{Operator: token.ASSIGN, Left: t, Right: callOf(name, end, t, n.Right)}
		case *ast.DotExpression:
			if _, isSuper := t.Left.(*ast.SuperExpression); isSuper {
				return selfAssign(t, name, end, n.Right)
			}
			key := &ast.StringLiteral{Idx: t.Identifier.Idx, Literal: "'" + string(t.Identifier.Name) + "'", Value: t.Identifier.Name}
			return callOf(bigPut, end, callOf(bigGet, end, t.Left, key), n.Right, opLiteral(name, end), w.strictLiteral(end))
		case *ast.BracketExpression:
			if _, isSuper := t.Left.(*ast.SuperExpression); isSuper {
				if isLiteral(t.Member) {
					return selfAssign(t, name, end, n.Right)
				}
				break
			}
			return callOf(bigPut, end, callOf(bigGet, end, t.Left, t.Member), n.Right, opLiteral(name, end), w.strictLiteral(end))
		case *ast.PrivateDotExpression:
			switch t.Left.(type) {
			case *ast.ThisExpression, *ast.Identifier:
				return selfAssign(t, name, end, n.Right)
			}
		}
		w.err = fmt.Errorf("a compound assignment at offset %d that handoff cannot check for BigInt (write it out: x = x %s y)", n.Idx0(), n.Operator)
	}
	return nil
}

// selfAssign writes t op= r as t = op(t, r), for targets whose second
// evaluation has no effect (this, a variable, super with a fixed key).
func selfAssign(t ast.Expression, name string, end file.Idx, r ast.Expression) ast.Expression {
	return &ast.AssignExpression{Operator: token.ASSIGN, Left: t, Right: callOf(name, end, t, r)}
}

// callOf builds name(args...). Its positions are the operator's end, so a
// stack trace names the line of the expression it replaced.
func callOf(name string, at file.Idx, args ...ast.Expression) *ast.CallExpression {
	return &ast.CallExpression{
		Callee:           &ast.Identifier{Name: unistring.String(name), Idx: at},
		LeftParenthesis:  at,
		ArgumentList:     args,
		RightParenthesis: at,
	}
}

func (w *bigRewriter) strictLiteral(at file.Idx) *ast.BooleanLiteral {
	if w.strict {
		return &ast.BooleanLiteral{Idx: at, Literal: "true", Value: true}
	}
	return &ast.BooleanLiteral{Idx: at, Literal: "false", Value: false}
}

// hasUseStrict reports whether a script starts with the "use strict"
// directive.
func hasUseStrict(prog *ast.Program) bool {
	for _, st := range prog.Body {
		es, ok := st.(*ast.ExpressionStatement)
		if !ok {
			return false
		}
		lit, ok := es.Expression.(*ast.StringLiteral)
		if !ok {
			return false
		}
		if lit.Literal == `"use strict"` || lit.Literal == `'use strict'` {
			return true
		}
	}
	return false
}

func opLiteral(name string, at file.Idx) *ast.NumberLiteral {
	c := opCodes[name]
	return &ast.NumberLiteral{Idx: at, Literal: fmt.Sprint(c), Value: int64(c)}
}

// plainNumber: a number literal (not a BigInt one) cannot give a BigInt
// operand, and mixing it with one throws a TypeError.
func plainNumber(e ast.Expression) bool {
	n, ok := e.(*ast.NumberLiteral)
	if !ok {
		return false
	}
	_, isBig := n.Value.(*big.Int)
	return !isBig
}

// harmlessCompare: comparing with a number, a short string, a boolean,
// null or undefined never parses a long string as a BigInt.
func harmlessCompare(e ast.Expression) bool {
	switch n := e.(type) {
	case *ast.StringLiteral:
		return len(n.Value) <= maxBigIntChars
	case *ast.BooleanLiteral, *ast.NullLiteral:
		return true
	case *ast.UnaryExpression:
		return n.Operator == token.TYPEOF || n.Operator == token.VOID
	}
	return plainNumber(e)
}

func isLiteral(e ast.Expression) bool {
	switch e.(type) {
	case *ast.StringLiteral, *ast.NumberLiteral:
		return true
	}
	return false
}
