package jsvm

import (
	"fmt"
	"math"
	"math/big"
	"strings"

	"github.com/dop251/goja"
)

// MaxBigIntBits bounds the BigInts app code can make with the operators
// whose results can outgrow their operands (*, **, <<, >>) and with
// BigInt(), BigInt.asIntN and BigInt.asUintN: 2**20 bits, 315,652 decimal
// digits. goja's math/big steps cannot be interrupted, and at this size
// the slowest of them stays near a tenth of a second (measured: squaring
// a 2**20-bit number, printing it, parsing it from decimal); at 2**23 bits
// parsing alone takes 1.7 s and it grows with the square of the length.
// Other operators grow a BigInt by a bit at a time, and the call's
// deadline and memory limit bound them.
const MaxBigIntBits = 1 << 20

// maxBigIntChars bounds the strings parsed as BigInts (BigInt("..."), a
// BigInt compared with a string): the decimal digits of MaxBigIntBits,
// and a little for signs, prefixes and spaces.
const maxBigIntChars = 315_652 + 64

// bigGuard holds a runtime's checked operators.
type bigGuard struct {
	vm                *VM
	rangeErr, typeErr goja.Value
	ops               map[string]goja.Callable // the plain operators, for primitive operands
	bigint            goja.Callable            // goja's BigInt
	reflectGet        goja.Callable            // Reflect.get and set, taken before app code runs
	reflectSet        goja.Callable
}

// installBigInt gives a runtime whose module names BigInt the BigInt
// builtins with their inputs checked, and the checked operators that
// rewriteBigInt's calls reach.
func installBigInt(vm *VM) error {
	rt := vm.Runtime
	g := &bigGuard{vm: vm, rangeErr: rt.Get("RangeError"), typeErr: rt.Get("TypeError"), ops: map[string]goja.Callable{}}
	reflect := rt.Get("Reflect").ToObject(rt)
	g.reflectGet, _ = goja.AssertFunction(reflect.Get("get"))
	g.reflectSet, _ = goja.AssertFunction(reflect.Get("set"))
	// The plain operators, compiled here (not rewritten): they get only
	// primitives, whose conversions have no effects to reorder.
	for name, op := range map[string]string{
		bigMul: "*", bigPow: "**", bigShl: "<<", bigShr: ">>",
		bigLt: "<", bigGt: ">", bigLe: "<=", bigGe: ">=", bigEq: "==", bigNe: "!=",
	} {
		v, err := rt.RunString("(function (a, b) { return a " + op + " b })")
		if err != nil {
			return err
		}
		g.ops[name], _ = goja.AssertFunction(v)
	}
	global := rt.GlobalObject()
	define := func(name string, fn func(goja.FunctionCall) goja.Value) error {
		return global.DefineDataProperty(name, rt.ToValue(fn), goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE)
	}
	for _, name := range []string{bigMul, bigPow, bigShl, bigShr} {
		name := name
		if err := define(name, func(c goja.FunctionCall) goja.Value {
			return g.arith(name, c.Argument(0), c.Argument(1))
		}); err != nil {
			return err
		}
	}
	for _, name := range []string{bigLt, bigGt, bigLe, bigGe} {
		name := name
		if err := define(name, func(c goja.FunctionCall) goja.Value {
			return g.relational(name, c.Argument(0), c.Argument(1))
		}); err != nil {
			return err
		}
	}
	for _, name := range []string{bigEq, bigNe} {
		eq := name == bigEq
		if err := define(name, func(c goja.FunctionCall) goja.Value {
			return rt.ToValue(g.looseEqual(c.Argument(0), c.Argument(1)) == eq)
		}); err != nil {
			return err
		}
	}
	if err := define(bigGet, g.get); err != nil {
		return err
	}
	if err := define(bigPut, g.put); err != nil {
		return err
	}
	return g.wrapBuiltins()
}

func (g *bigGuard) throw(ctor goja.Value, format string, args ...any) {
	g.vm.throw(ctor, fmt.Sprintf(format, args...))
}

func (g *bigGuard) tooBig(what string, bits float64) {
	size := fmt.Sprintf("about %.0f bits", bits)
	if bits > 1<<53 {
		size = "more than 2**53 bits"
	}
	g.throw(g.rangeErr, "%s would make a BigInt of %s; app code's BigInts are limited to %d bits (%d decimal digits): keep the numbers smaller, or split the work",
		what, size, MaxBigIntBits, maxBigIntChars-64)
}

// arith is a * b, a ** b, a << b or a >> b, refused when the result
// would pass MaxBigIntBits.
func (g *bigGuard) arith(name string, a, b goja.Value) goja.Value {
	if name == bigMul && goja.IsNumber(a) && goja.IsNumber(b) {
		return g.vm.ToValue(a.ToFloat() * b.ToFloat())
	}
	a = g.toNumeric(a)
	if _, isSym := a.(*goja.Symbol); isSym {
		// ToNumeric of the left throws before the right is converted.
		g.throw(g.typeErr, "Cannot convert a Symbol value to a number")
	}
	b = g.toNumeric(b)
	x, xok := a.Export().(*big.Int)
	y, yok := b.Export().(*big.Int)
	if xok && yok && goja.IsBigInt(a) && goja.IsBigInt(b) {
		if r := g.checkArith(name, x, y); r != nil {
			return r
		}
	}
	return g.call(name, a, b)
}

// checkArith throws when x op y is past the limit; for a shift whose
// answer is known without goja (it truncates large shift counts) it
// returns that answer.
func (g *bigGuard) checkArith(name string, x, y *big.Int) goja.Value {
	switch name {
	case bigMul:
		if bits := x.BitLen() + y.BitLen(); bits > MaxBigIntBits {
			g.tooBig("this multiplication", float64(bits))
		}
	case bigPow:
		if y.Sign() < 0 || x.CmpAbs(big.NewInt(1)) <= 0 {
			return nil // goja's own answer: a RangeError, or 0, 1 or -1
		}
		if !y.IsInt64() || y.Int64() > MaxBigIntBits {
			g.tooBig("this power", math.Inf(1))
		}
		if bits := float64(y.Int64()) * log2Abs(x); bits > MaxBigIntBits {
			g.tooBig("this power", bits)
		}
	case bigShl, bigShr:
		n := new(big.Int).Set(y)
		if name == bigShr {
			n.Neg(n)
		}
		if x.Sign() == 0 {
			return g.vm.ToValue(new(big.Int))
		}
		if n.Sign() > 0 {
			if !n.IsInt64() || int64(x.BitLen())+n.Int64() > MaxBigIntBits {
				g.tooBig("this shift", float64(x.BitLen())+bigFloat(n))
			}
		} else if n.CmpAbs(big.NewInt(int64(x.BitLen()))) >= 0 {
			// Every bit shifted out: 0, or -1 for a negative number.
			return g.vm.ToValue(big.NewInt(int64(min(x.Sign(), 0))))
		}
	}
	return nil
}

func log2Abs(x *big.Int) float64 {
	f, _ := new(big.Float).SetInt(x).Float64()
	if !math.IsInf(f, 0) {
		return math.Log2(math.Abs(f))
	}
	return float64(x.BitLen())
}

func bigFloat(x *big.Int) float64 {
	f, _ := new(big.Float).SetInt(x).Float64()
	return f
}

// relational is a < b and its kin: both operands are made primitive,
// left first as the standard says, then compared.
func (g *bigGuard) relational(name string, a, b goja.Value) goja.Value {
	if goja.IsNumber(a) && goja.IsNumber(b) {
		x, y := a.ToFloat(), b.ToFloat()
		var r bool
		switch name {
		case bigLt:
			r = x < y
		case bigGt:
			r = x > y
		case bigLe:
			r = x <= y
		default:
			r = x >= y
		}
		return g.vm.ToValue(r)
	}
	a, b = g.toPrimitive(a, "number"), g.toPrimitive(b, "number")
	g.checkParse(a, b)
	return g.call(name, a, b)
}

// looseEqual is a == b. An object compared with a primitive is made
// primitive here, so a BigInt it yields is checked with the other side.
func (g *bigGuard) looseEqual(a, b goja.Value) bool {
	ao, aobj := a.(*goja.Object)
	bo, bobj := b.(*goja.Object)
	switch {
	case aobj && bobj:
		return ao == bo
	case aobj && !isNullish(b):
		a = g.toPrimitive(ao, "default")
	case bobj && !isNullish(a):
		b = g.toPrimitive(bo, "default")
	}
	g.checkParse(a, b)
	return a.Equals(b)
}

func isNullish(v goja.Value) bool { return v == nil || goja.IsUndefined(v) || goja.IsNull(v) }

// checkParse refuses a BigInt compared with a string that goja would
// parse in time quadratic in its length.
func (g *bigGuard) checkParse(a, b goja.Value) {
	if goja.IsBigInt(a) && goja.IsString(b) || goja.IsString(a) && goja.IsBigInt(b) {
		s := b
		if goja.IsString(a) {
			s = a
		}
		g.checkString(s.String(), "comparing a BigInt with a string")
	}
}

func (g *bigGuard) checkString(s, what string) {
	if n := len(strings.TrimSpace(s)); n > maxBigIntChars {
		g.throw(g.rangeErr, "%s of %d characters: app code parses BigInts of at most %d characters (%d bits); compare the lengths first, or keep the numbers smaller",
			what, n, maxBigIntChars, MaxBigIntBits)
	}
}

// call runs the plain operator on operands that are primitives.
func (g *bigGuard) call(name string, a, b goja.Value) goja.Value {
	v, err := g.ops[name](goja.Undefined(), a, b)
	if err != nil {
		panic(err)
	}
	return v
}

// toNumeric is ToPrimitive with the number hint, for an object; the
// rest of ToNumeric has no effects and is left to the operator.
func (g *bigGuard) toNumeric(v goja.Value) goja.Value { return g.toPrimitive(v, "number") }

// toPrimitive is the standard's ToPrimitive: Symbol.toPrimitive if the
// object has one, else valueOf and toString in the hint's order.
func (g *bigGuard) toPrimitive(v goja.Value, hint string) goja.Value {
	o, ok := v.(*goja.Object)
	if !ok {
		return v
	}
	rt := g.vm.Runtime
	if ex := o.GetSymbol(goja.SymToPrimitive); !isNullish(ex) {
		fn, ok := goja.AssertFunction(ex)
		if !ok {
			g.throw(g.typeErr, "Symbol.toPrimitive is not a function")
		}
		r, err := fn(o, rt.ToValue(hint))
		if err != nil {
			panic(err)
		}
		if _, isObj := r.(*goja.Object); isObj {
			g.throw(g.typeErr, "Cannot convert object to primitive value")
		}
		return r
	}
	order := [2]string{"valueOf", "toString"}
	if hint == "string" {
		order = [2]string{"toString", "valueOf"}
	}
	for _, m := range order {
		if fn, ok := goja.AssertFunction(o.Get(m)); ok {
			r, err := fn(o)
			if err != nil {
				panic(err)
			}
			if _, isObj := r.(*goja.Object); !isObj {
				return r
			}
		}
	}
	g.throw(g.typeErr, "Cannot convert object to primitive value")
	return nil
}

// bigRef is a compound assignment's target between %get and %put.
type bigRef struct {
	base goja.Value   // the value left of the dot: the receiver
	obj  *goja.Object // base as an object
	key  goja.Value   // a string or a symbol
	old  goja.Value
}

// get is %get(o, k): it reads o[k] for o[k] op= v, before v is
// evaluated, as the standard orders it, with o itself as the receiver
// (a getter on Number.prototype sees the number).
func (g *bigGuard) get(c goja.FunctionCall) goja.Value {
	rt := g.vm.Runtime
	base, key := c.Argument(0), c.Argument(1)
	if isNullish(base) {
		g.throw(g.typeErr, "Cannot read properties of %s (reading '%s')", base, key)
	}
	if _, isSym := key.(*goja.Symbol); !isSym {
		key = rt.ToValue(g.toPrimitive(key, "string").String())
	}
	ref := &bigRef{base: base, obj: base.ToObject(rt), key: key}
	ref.old = g.reflect(g.reflectGet, ref.obj, key, base)
	return rt.ToValue(ref)
}

// put is %put(ref, v, op, strict): it computes ref's old value op v and
// writes it; strict code throws when the write fails.
func (g *bigGuard) put(c goja.FunctionCall) goja.Value {
	ref, ok := c.Argument(0).Export().(*bigRef)
	if !ok {
		g.throw(g.typeErr, "%s is handoff's and is not for app code", bigPut)
	}
	name := ""
	for n, code := range opCodes {
		if int64(code) == c.Argument(2).ToInteger() {
			name = n
		}
	}
	if name == "" {
		g.throw(g.typeErr, "%s is handoff's and is not for app code", bigPut)
	}
	v := g.arith(name, ref.old, c.Argument(1))
	if !g.reflect(g.reflectSet, ref.obj, ref.key, v, ref.base).ToBoolean() && c.Argument(3).ToBoolean() {
		g.throw(g.typeErr, "Cannot assign to read only property '%s' of %s", ref.key, ref.base)
	}
	return v
}

func (g *bigGuard) reflect(fn goja.Callable, args ...goja.Value) goja.Value {
	v, err := fn(goja.Undefined(), args...)
	if err != nil {
		panic(err)
	}
	return v
}

// wrapBuiltins checks the inputs of the builtins that make BigInts from
// a string or a bit count.
func (g *bigGuard) wrapBuiltins() error {
	rt := g.vm.Runtime
	orig := rt.Get("BigInt").ToObject(rt)
	origFn, _ := goja.AssertFunction(orig)
	g.bigint = origFn
	// BigInt(x) parses a string: the only input of unbounded cost.
	fn := rt.ToValue(func(c goja.FunctionCall) goja.Value {
		x := g.toPrimitive(c.Argument(0), "number")
		if goja.IsString(x) {
			g.checkString(x.String(), "BigInt() of a string")
		}
		// goja answers 0n for BigInt(); the standard's ToBigInt of
		// undefined is a TypeError, as in Node.
		v, err := origFn(goja.Undefined(), x)
		if err != nil {
			panic(err)
		}
		return v
	}).(*goja.Object)
	copyIdentity(orig, fn)
	proto := orig.Get("prototype").ToObject(rt)
	if err := fn.DefineDataProperty("prototype", proto, goja.FLAG_FALSE, goja.FLAG_FALSE, goja.FLAG_FALSE); err != nil {
		return err
	}
	if err := proto.DefineDataProperty("constructor", fn, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
		return err
	}
	for _, m := range []struct {
		name   string
		signed bool
	}{{"asIntN", true}, {"asUintN", false}} {
		m := m
		origM, _ := goja.AssertFunction(orig.Get(m.name))
		method := rt.ToValue(func(c goja.FunctionCall) goja.Value {
			bits := g.toIndex(c.Argument(0))
			x := g.toBigInt(c.Argument(1))
			if bits > MaxBigIntBits {
				// goja makes 2**bits first; the answer is x itself
				// whenever x fits, and past the limit otherwise.
				if xb := x.BitLen(); int64(xb) < bits && (m.signed || x.Sign() >= 0) {
					return rt.ToValue(x)
				}
				g.tooBig("BigInt."+m.name, float64(bits))
			}
			v, err := origM(goja.Undefined(), rt.ToValue(bits), rt.ToValue(x))
			if err != nil {
				panic(err)
			}
			return v
		}).(*goja.Object)
		if err := method.DefineDataProperty("name", rt.ToValue(m.name), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return err
		}
		if err := method.DefineDataProperty("length", rt.ToValue(2), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return err
		}
		if err := fn.DefineDataProperty(m.name, method, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return err
		}
	}
	return rt.GlobalObject().DefineDataProperty("BigInt", fn, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE)
}

// toIndex is the standard's ToIndex.
func (g *bigGuard) toIndex(v goja.Value) int64 {
	if goja.IsUndefined(v) {
		return 0
	}
	f := g.toPrimitive(v, "number").ToFloat()
	if math.IsNaN(f) {
		return 0
	}
	f = math.Trunc(f)
	if f < 0 || f > 1<<53-1 {
		g.throw(g.rangeErr, "Invalid value: not (convertible to) a safe integer")
	}
	return int64(f)
}

// toBigInt is the standard's ToBigInt, with a string's length checked
// before goja parses it.
func (g *bigGuard) toBigInt(v goja.Value) *big.Int {
	p := g.toPrimitive(v, "number")
	switch {
	case goja.IsString(p):
		g.checkString(p.String(), "a string made a BigInt")
	case goja.IsNumber(p):
		g.throw(g.typeErr, "Cannot convert %s to a BigInt", p)
	}
	r, err := g.bigint(goja.Undefined(), p)
	if err != nil {
		panic(err)
	}
	return r.Export().(*big.Int)
}
