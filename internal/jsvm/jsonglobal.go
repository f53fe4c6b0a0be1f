package jsvm

import (
	"fmt"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// goja's own JSON.parse and JSON.stringify recurse on the Go stack once per
// level of nesting, out of reach of Interrupt: JSON.parse("[".repeat(3e6))
// overflows the goroutine's stack, a fatal error that no recover catches,
// and stringify checks for cycles by scanning its whole path at every
// level, so a 60,000-deep array takes seconds after the deadline passed.
// Every runtime's JSON object gets these two instead. They follow the
// spec's algorithms (reviver, toJSON, replacer function or list, gap),
// stop at maxJSONDepth levels with a RangeError, find cycles with a set,
// and look at the call's stop flag as they go, so a deadline or the heap
// guard ends them mid-way.

// stopCheckEvery is how many values the JSON functions handle between two
// looks at the stop flag.
const stopCheckEvery = 1024

// jsonBuiltins holds the constructors the JSON functions throw with,
// captured before user code runs so reassigning a global cannot change
// them.
type jsonBuiltins struct {
	rangeError  goja.Value
	syntaxError goja.Value
	isArray     goja.Callable
	objectKeys  goja.Callable
	reflectGet  goja.Callable
	// Reflect.defineProperty and deleteProperty answer false where the
	// standard ignores a failure, and let a Proxy trap's throw through.
	reflectDefine goja.Callable
	reflectDelete goja.Callable
}

func installJSON(vm *VM) error {
	rt := vm.Runtime
	isArray, ok := goja.AssertFunction(rt.Get("Array").ToObject(rt).Get("isArray"))
	if !ok {
		return fmt.Errorf("jsvm: this goja has no Array.isArray")
	}
	objectKeys, ok := goja.AssertFunction(rt.Get("Object").ToObject(rt).Get("keys"))
	if !ok {
		return fmt.Errorf("jsvm: this goja has no Object.keys")
	}
	reflectGet, ok := goja.AssertFunction(rt.Get("Reflect").ToObject(rt).Get("get"))
	if !ok {
		return fmt.Errorf("jsvm: this goja has no Reflect.get")
	}
	reflect := rt.Get("Reflect").ToObject(rt)
	reflectDefine, _ := goja.AssertFunction(reflect.Get("defineProperty"))
	reflectDelete, _ := goja.AssertFunction(reflect.Get("deleteProperty"))
	if reflectDefine == nil || reflectDelete == nil {
		return fmt.Errorf("jsvm: this goja has no Reflect.defineProperty or deleteProperty")
	}
	vm.builtins = jsonBuiltins{rangeError: rt.Get("RangeError"), syntaxError: rt.Get("SyntaxError"),
		isArray: isArray, objectKeys: objectKeys, reflectGet: reflectGet, reflectDefine: reflectDefine, reflectDelete: reflectDelete}

	json := rt.Get("JSON").ToObject(rt)
	parse := rt.ToValue(vm.jsParse).(*goja.Object)
	stringify := rt.ToValue(vm.jsStringify).(*goja.Object)
	for _, f := range []struct {
		fn     *goja.Object
		name   string
		length int
	}{{parse, "parse", 2}, {stringify, "stringify", 3}} {
		if err := f.fn.DefineDataProperty("name", rt.ToValue(f.name), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return err
		}
		if err := f.fn.DefineDataProperty("length", rt.ToValue(f.length), goja.FLAG_FALSE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return err
		}
		if err := json.DefineDataProperty(f.name, f.fn, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_FALSE); err != nil {
			return err
		}
	}
	vm.toJSONFn, _ = goja.AssertFunction(rt.ToValue(vm.toJSONNative))
	return nil
}

// throw raises a JS error of the given constructor with msg.
func (vm *VM) throw(ctor goja.Value, msg string) {
	c, ok := goja.AssertConstructor(ctor)
	if !ok {
		panic(vm.NewTypeError(msg))
	}
	obj, err := c(nil, vm.ToValue(msg))
	if err != nil {
		panic(err)
	}
	panic(obj)
}

// checkStop ends native work when the running call was stopped: the
// interrupt is raised by goja at the next instruction, so any exception
// does; a RangeError names why.
func (vm *VM) checkStop() {
	if vm.halted.Load() {
		vm.throw(vm.builtins.rangeError, "the call was stopped")
	}
}

// jsParse is JSON.parse(text, reviver).
func (vm *VM) jsParse(c goja.FunctionCall) goja.Value {
	if isSymbol(c.Argument(0)) {
		panic(vm.NewTypeError("Cannot convert a Symbol value to a string"))
	}
	text := c.Argument(0).String()
	v, err := vm.parseJSON([]byte(text))
	if err != nil {
		vm.checkStop()
		vm.throw(vm.builtins.syntaxError, strings.TrimPrefix(err.Error(), "jsvm: "))
	}
	reviver, ok := goja.AssertFunction(c.Argument(1))
	if !ok {
		return v
	}
	root := vm.NewObject()
	// CreateDataProperty, not [[Set]]: a setter for "" on
	// Object.prototype must not run.
	if err := root.DefineDataProperty("", v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
		panic(err)
	}
	w := walker{vm: vm}
	return w.revive(reviver, root, "", 0)
}

// walker carries the step count of one JSON.parse or JSON.stringify.
type walker struct {
	vm    *VM
	steps int
}

func (w *walker) step(depth int) {
	if depth > maxJSONDepth {
		w.vm.throw(w.vm.builtins.rangeError, "JSON value nested deeper than "+strconv.Itoa(maxJSONDepth)+" levels")
	}
	w.steps++
	if w.steps%stopCheckEvery == 0 {
		w.vm.checkStop()
	}
}

// revive is the spec's InternalizeJSONProperty. The reviver may add
// deeper values to the holders it is given, so depth is checked here too.
func (w *walker) revive(reviver goja.Callable, holder *goja.Object, name string, depth int) goja.Value {
	w.step(depth)
	vm := w.vm
	val := holder.Get(name)
	if obj, ok := val.(*goja.Object); ok {
		if w.isArray(obj) {
			n := toLength(obj.Get("length"))
			for i := int64(0); i < n; i++ {
				w.reviveMember(reviver, obj, strconv.FormatInt(i, 10), depth)
			}
		} else {
			for _, k := range obj.Keys() {
				w.reviveMember(reviver, obj, k, depth)
			}
		}
	}
	if val == nil {
		val = goja.Undefined()
	}
	v, err := reviver(holder, vm.ToValue(name), val)
	if err != nil {
		panic(err)
	}
	return v
}

func (w *walker) reviveMember(reviver goja.Callable, obj *goja.Object, key string, depth int) {
	v := w.revive(reviver, obj, key, depth+1)
	// The spec ignores a property that cannot be deleted or redefined
	// (the reviver may have frozen it): a false answer is dropped, and a
	// Proxy trap's exception goes on up.
	var err error
	if goja.IsUndefined(v) {
		_, err = w.vm.builtins.reflectDelete(goja.Undefined(), obj, w.vm.ToValue(key))
	} else {
		// No prototype: a getter on Object.prototype named "get" must
		// not turn the descriptor into an accessor's.
		desc := w.vm.CreateObject(nil)
		for k, v := range map[string]goja.Value{"value": v, "writable": w.vm.ToValue(true), "enumerable": w.vm.ToValue(true), "configurable": w.vm.ToValue(true)} {
			if err := desc.DefineDataProperty(k, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
				panic(err)
			}
		}
		_, err = w.vm.builtins.reflectDefine(goja.Undefined(), obj, w.vm.ToValue(key), desc)
	}
	if err != nil {
		panic(err)
	}
}

func (w *walker) isArray(obj *goja.Object) bool {
	v, err := w.vm.builtins.isArray(goja.Undefined(), obj)
	if err != nil {
		panic(err)
	}
	return v.ToBoolean()
}

func toLength(v goja.Value) int64 {
	if v == nil {
		return 0
	}
	f := v.ToFloat()
	if math.IsNaN(f) || f <= 0 {
		return 0
	}
	return int64(min(f, 1<<53-1))
}

// stringifier is the state of one JSON.stringify call.
type stringifier struct {
	walker
	buf      []byte
	gap      string
	indent   string
	props    []string // the replacer list; nil: every enumerable key
	replacer goja.Callable
	path     map[*goja.Object]struct{} // objects being serialized, for cycles
	limit    int                       // output bytes allowed; 0: no limit
}

// jsStringify is JSON.stringify(value, replacer, space).
func (vm *VM) jsStringify(c goja.FunctionCall) goja.Value {
	s := vm.newStringifier()
	if r, ok := c.Argument(1).(*goja.Object); ok {
		if fn, ok := goja.AssertFunction(r); ok {
			s.replacer = fn
		} else if s.isArray(r) {
			s.props = s.propertyList(r)
		}
	}
	s.gap = gapOf(c.Argument(2))
	root := vm.NewObject()
	if err := root.DefineDataProperty("", c.Argument(0), goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
		panic(err)
	}
	if !s.property(root, "", 0) {
		return goja.Undefined()
	}
	return vm.ToValue(string(s.buf))
}

func (vm *VM) newStringifier() stringifier {
	s := stringifier{walker: walker{vm: vm}}
	if vm.opts.HeapLimit > 0 {
		s.limit = int(min(vm.heapLimit(), math.MaxInt32))
	}
	return s
}

// toJSONNative is what ToJSON calls: JSON.stringify(value) with no
// replacer or gap, which needs no holder object, and whose text stays in
// Go bytes (vm.jsonOut) instead of going through a JS string. It returns
// false for a value with no JSON form.
func (vm *VM) toJSONNative(c goja.FunctionCall) goja.Value {
	s := vm.newStringifier()
	s.step(0)
	if !s.serialize(nil, "", nil, c.Argument(0), 0) {
		return vm.ToValue(false)
	}
	vm.jsonOut = s.buf
	return vm.ToValue(true)
}

// propertyList is the spec's PropertyList from an array replacer: strings,
// numbers and their wrappers, first occurrence kept.
func (s *stringifier) propertyList(r *goja.Object) []string {
	n := toLength(r.Get("length"))
	seen := map[string]bool{}
	list := []string{}
	for i := int64(0); i < n; i++ {
		s.step(0)
		v := r.Get(strconv.FormatInt(i, 10))
		var name string
		switch {
		case goja.IsString(v) || goja.IsNumber(v):
			name = v.String()
		default:
			o, ok := v.(*goja.Object)
			if !ok || (o.ClassName() != "String" && o.ClassName() != "Number") {
				continue
			}
			name = o.String()
		}
		if !seen[name] {
			seen[name] = true
			list = append(list, name)
		}
	}
	return list
}

// gapOf is the indentation that the space argument asks for.
func gapOf(space goja.Value) string {
	if o, ok := space.(*goja.Object); ok {
		switch o.ClassName() {
		case "Number":
			space = o.ToNumber()
		case "String":
			space = o.ToString()
		}
	}
	switch {
	case goja.IsNumber(space):
		f := space.ToFloat()
		if math.IsNaN(f) || f < 1 {
			return ""
		}
		return strings.Repeat(" ", int(min(f, 10)))
	case goja.IsString(space):
		if js, ok := space.(goja.String); ok && js.Length() > 10 {
			return js.Substring(0, 10).String() // ten UTF-16 units
		}
		return space.String()
	}
	return ""
}

// property is the spec's SerializeJSONProperty: it appends holder[key]
// and reports false for a value with no JSON form (undefined).
func (s *stringifier) property(holder *goja.Object, key string, depth int) bool {
	return s.propertyOf(holder, key, nil, depth)
}

// propertyOf is property for a key given as a JS string when keyVal is not
// nil: a key holding a lone surrogate has no Go string that reaches it.
func (s *stringifier) propertyOf(holder *goja.Object, key string, keyVal goja.Value, depth int) bool {
	s.step(depth)
	var v goja.Value
	if keyVal == nil {
		v = holder.Get(key)
	} else {
		var err error
		if v, err = s.vm.builtins.reflectGet(goja.Undefined(), holder, keyVal); err != nil {
			panic(err)
		}
	}
	return s.serialize(holder, key, keyVal, v, depth)
}

// serialize is propertyOf once holder[key] has been read as v; holder is
// only read by a replacer function.
func (s *stringifier) serialize(holder *goja.Object, key string, keyVal, v goja.Value, depth int) bool {
	vm := s.vm
	if v == nil {
		v = goja.Undefined()
	}
	var err error
	if o, ok := v.(*goja.Object); ok || goja.IsBigInt(v) {
		var method goja.Value
		if ok {
			method = o.Get("toJSON")
		} else {
			// GetV: a getter on BigInt.prototype sees the primitive.
			if method, err = vm.builtins.reflectGet(goja.Undefined(), v.ToObject(vm.Runtime), vm.ToValue("toJSON"), v); err != nil {
				panic(err)
			}
		}
		if toJSON, ok := goja.AssertFunction(method); ok {
			if v, err = toJSON(v, s.keyValue(key, keyVal)); err != nil {
				panic(err)
			}
		}
	}
	if s.replacer != nil {
		if v, err = s.replacer(holder, s.keyValue(key, keyVal), v); err != nil {
			panic(err)
		}
	}
	if o, ok := v.(*goja.Object); ok {
		switch o.ClassName() {
		case "Number":
			v = o.ToNumber()
		case "String":
			v = o.ToString()
		case "Boolean", "BigInt":
			v = vm.ToValue(o.Export())
		case "Object":
			if o.ExportType() == bigIntType {
				// goja's BigInt wrapper has the class of a plain object.
				panic(vm.NewTypeError("Do not know how to serialize a BigInt"))
			}
		case "RawJSON":
			s.buf = append(s.buf, o.Get("rawJSON").String()...)
			return true
		}
	}
	switch {
	case goja.IsUndefined(v):
		return false
	case goja.IsNull(v):
		s.buf = append(s.buf, "null"...)
	case goja.IsString(v):
		s.quote(v)
	case goja.IsNumber(v):
		if f := v.ToFloat(); math.IsNaN(f) || math.IsInf(f, 0) {
			s.buf = append(s.buf, "null"...)
		} else {
			s.buf = append(s.buf, v.String()...)
		}
	case goja.IsBigInt(v):
		panic(vm.NewTypeError("Do not know how to serialize a BigInt"))
	case isSymbol(v):
		return false
	default:
		o, ok := v.(*goja.Object)
		if !ok {
			// A boolean: the only primitive left.
			s.buf = strconv.AppendBool(s.buf, v.ToBoolean())
			break
		}
		if _, callable := goja.AssertFunction(o); callable {
			return false
		}
		if _, seen := s.path[o]; seen {
			panic(vm.NewTypeError("Converting circular structure to JSON"))
		}
		if s.path == nil {
			s.path = map[*goja.Object]struct{}{}
		}
		s.path[o] = struct{}{}
		if s.isArray(o) {
			s.array(o, depth+1)
		} else {
			s.object(o, depth+1)
		}
		delete(s.path, o)
	}
	s.checkSize()
	return true
}

// checkSize stops the call once the result outgrows the heap limit.
func (s *stringifier) checkSize() {
	if s.limit > 0 && len(s.buf) > s.limit {
		s.vm.stopRunning(causeHeap)
		s.vm.throw(s.vm.builtins.rangeError, "JSON.stringify: the result would exceed the heap limit")
	}
}

func (s *stringifier) open(c byte) (stepback, sep string) {
	stepback = s.indent
	s.buf = append(s.buf, c)
	if s.gap == "" {
		return stepback, ","
	}
	s.indent += s.gap
	return stepback, ",\n" + s.indent
}

func (s *stringifier) close(c byte, stepback string, empty bool) {
	if s.gap != "" && !empty {
		s.buf = append(s.buf, '\n')
		s.buf = append(s.buf, stepback...)
	}
	s.indent = stepback
	s.buf = append(s.buf, c)
}

func (s *stringifier) newline() {
	if s.gap != "" {
		s.buf = append(s.buf, '\n')
		s.buf = append(s.buf, s.indent...)
	}
}

func (s *stringifier) array(o *goja.Object, depth int) {
	stepback, sep := s.open('[')
	n := toLength(o.Get("length"))
	for i := int64(0); i < n; i++ {
		if i == 0 {
			s.newline()
		} else {
			s.buf = append(s.buf, sep...)
		}
		if !s.property(o, strconv.FormatInt(i, 10), depth) {
			s.buf = append(s.buf, "null"...)
			s.checkSize() // holes make output without a value to check it
		}
	}
	s.close(']', stepback, n == 0)
}

func (s *stringifier) object(o *goja.Object, depth int) {
	keys := s.props
	if keys == nil {
		keys = o.Keys()
		if slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, "\uFFFD") }) {
			s.objectByJSKeys(o, depth)
			return
		}
	}
	stepback, sep := s.open('{')
	empty := true
	for _, k := range keys {
		mark := s.memberKey(empty, sep, k, nil)
		s.memberValue(mark, &empty, s.property(o, k, depth))
	}
	s.close('}', stepback, empty)
}

// objectByJSKeys is object for an object with a key that may hold a lone
// surrogate: keys are read and written as JS strings, which is slower.
func (s *stringifier) objectByJSKeys(o *goja.Object, depth int) {
	stepback, sep := s.open('{')
	keys, err := s.vm.builtins.objectKeys(goja.Undefined(), o)
	if err != nil {
		panic(err)
	}
	list := keys.(*goja.Object)
	empty := true
	for i := range toLength(list.Get("length")) {
		k := list.Get(strconv.FormatInt(i, 10))
		mark := s.memberKey(empty, sep, "", k)
		s.memberValue(mark, &empty, s.propertyOf(o, "", k, depth))
	}
	s.close('}', stepback, empty)
}

// keyValue is the key as a JS value, made only when user code is to see it.
func (s *stringifier) keyValue(key string, keyVal goja.Value) goja.Value {
	if keyVal != nil {
		return keyVal
	}
	return s.vm.ToValue(key)
}

// memberKey writes what comes before a member's value: the separator or
// the first line's break, the key (jsKey if not nil, else key), the colon.
// It returns where the member began, to cut it back if its value has no
// JSON form.
func (s *stringifier) memberKey(first bool, sep, key string, jsKey goja.Value) int {
	mark := len(s.buf)
	if first {
		s.newline()
	} else {
		s.buf = append(s.buf, sep...)
	}
	if jsKey != nil {
		s.quote(jsKey)
	} else {
		s.quoteGo(key)
	}
	s.buf = append(s.buf, ':')
	if s.gap != "" {
		s.buf = append(s.buf, ' ')
	}
	return mark
}

// memberValue keeps a member whose value was written, or cuts it back.
func (s *stringifier) memberValue(mark int, empty *bool, written bool) {
	if written {
		*empty = false
	} else {
		s.buf = s.buf[:mark]
	}
}

// quote appends a JS string as a JSON string. Lone surrogates, which a Go
// string cannot hold, are written as \u escapes (well-formed stringify).
func (s *stringifier) quote(v goja.Value) {
	str := v.String()
	if !strings.Contains(str, "\uFFFD") {
		s.quoteGo(str)
		return
	}
	js, _ := v.(goja.String)
	if js == nil {
		s.quoteGo(str)
		return
	}
	s.buf = append(s.buf, '"')
	n := js.Length()
	for i := 0; i < n; i++ {
		c := rune(js.CharAt(i))
		switch {
		case c >= 0xd800 && c < 0xdc00 && i+1 < n && js.CharAt(i+1) >= 0xdc00 && js.CharAt(i+1) < 0xe000:
			r := (c-0xd800)<<10 + (rune(js.CharAt(i+1)) - 0xdc00) + 0x10000
			s.buf = utf8.AppendRune(s.buf, r)
			i++
		case c >= 0xd800 && c < 0xe000:
			s.buf = append(s.buf, `\u`...)
			s.buf = append(s.buf, strconv.FormatInt(int64(c), 16)...)
		default:
			s.quoteRune(c)
		}
	}
	s.buf = append(s.buf, '"')
}

func (s *stringifier) quoteGo(str string) {
	s.buf = append(s.buf, '"')
	for _, c := range str {
		s.quoteRune(c)
	}
	s.buf = append(s.buf, '"')
}

const hexDigits = "0123456789abcdef"

func (s *stringifier) quoteRune(c rune) {
	switch c {
	case '"', '\\':
		s.buf = append(s.buf, '\\', byte(c))
	case '\b':
		s.buf = append(s.buf, `\b`...)
	case '\f':
		s.buf = append(s.buf, `\f`...)
	case '\n':
		s.buf = append(s.buf, `\n`...)
	case '\r':
		s.buf = append(s.buf, `\r`...)
	case '\t':
		s.buf = append(s.buf, `\t`...)
	default:
		if c < 0x20 {
			s.buf = append(s.buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			return
		}
		s.buf = utf8.AppendRune(s.buf, c)
	}
}

var bigIntType = reflect.TypeOf((*big.Int)(nil))

func isSymbol(v goja.Value) bool {
	_, ok := v.(*goja.Symbol)
	return ok
}
