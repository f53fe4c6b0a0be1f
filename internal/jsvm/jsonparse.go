package jsvm

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/dop251/goja"
)

// Every write hands access.js two documents, so turning JSON into JS
// objects is most of a call's cost. goja's JSON.parse reads through
// encoding/json's Decoder.Token, which allocates a token per value and
// spends most of its time there (about 13µs for a 200-byte document).
// This parser walks the bytes once and builds the goja values directly,
// with the same result as JSON.parse: plain objects in key order,
// integers as goja integers, "__proto__" as an own property. Keys repeat
// from document to document, so each runtime keeps a small table of key
// strings instead of allocating them every time. BenchmarkParseJSON
// compares the two.

// maxJSONDepth bounds nesting so a hostile document cannot recurse the
// parser's Go stack without limit.
const maxJSONDepth = 1000

// Per-runtime tables of strings seen before: object keys (up to
// maxCachedKey bytes) and short string values (statuses, owners, kinds;
// up to maxCachedValue bytes). A table that reaches maxStringCache
// entries is emptied and starts over, so one-off values such as ids
// cannot crowd out the ones that recur.
const (
	maxStringCache = 4096
	maxCachedKey   = 64
	maxCachedValue = 16
)

type jsonParser struct {
	vm    *VM
	data  []byte
	pos   int
	depth int
	steps int    // values read, for looking at the stop flag
	buf   []byte // unescaping scratch
}

// parseJSON parses data into goja values, or fails with the byte offset.
func (vm *VM) parseJSON(data []byte) (goja.Value, error) {
	p := jsonParser{vm: vm, data: data}
	p.skipSpace()
	v, err := p.value()
	if err != nil {
		return nil, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return nil, p.errorf("unexpected %s after the value", p.describe())
	}
	return v, nil
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("jsvm: invalid JSON at byte %d: %s", p.pos, fmt.Sprintf(format, args...))
}

func (p *jsonParser) describe() string {
	if p.pos >= len(p.data) {
		return "end of input"
	}
	return strconv.QuoteRune(rune(p.data[p.pos]))
}

func (p *jsonParser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (goja.Value, error) {
	if p.steps++; p.steps%stopCheckEvery == 0 && p.vm.halted.Load() {
		return nil, errors.New("jsvm: parsing stopped: the call was stopped")
	}
	if p.pos >= len(p.data) {
		return nil, p.errorf("unexpected end of input")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		return p.strValue()
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == 't':
		return p.literal("true", goja.Value(p.vm.ToValue(true)))
	case c == 'f':
		return p.literal("false", goja.Value(p.vm.ToValue(false)))
	case c == 'n':
		return p.literal("null", goja.Null())
	}
	return nil, p.errorf("unexpected %s", p.describe())
}

func (p *jsonParser) literal(word string, v goja.Value) (goja.Value, error) {
	if len(p.data)-p.pos < len(word) || string(p.data[p.pos:p.pos+len(word)]) != word {
		return nil, p.errorf("unexpected %s", p.describe())
	}
	p.pos += len(word)
	return v, nil
}

func (p *jsonParser) enter() error {
	p.depth++
	if p.depth > maxJSONDepth {
		return p.errorf("nested deeper than %d levels", maxJSONDepth)
	}
	return nil
}

func (p *jsonParser) object() (goja.Value, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // {
	obj := p.vm.NewObject()
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		p.depth--
		return obj, nil
	}
	for {
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.errorf("expected a string key, found %s", p.describe())
		}
		key, err := p.key()
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.errorf("expected ':', found %s", p.describe())
		}
		p.pos++
		p.skipSpace()
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		// JSON.parse makes own data properties (CreateDataProperty): Set
		// would call a setter on Object.prototype, or __proto__'s.
		err = obj.DefineDataProperty(key, v, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE)
		if err != nil {
			return nil, err
		}
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of input in an object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
		case '}':
			p.pos++
			p.depth--
			return obj, nil
		default:
			return nil, p.errorf("expected ',' or '}', found %s", p.describe())
		}
	}
}

func (p *jsonParser) array() (goja.Value, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	p.pos++ // [
	var items []any
	p.skipSpace()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		p.depth--
		return p.vm.NewArray(), nil
	}
	for {
		v, err := p.value()
		if err != nil {
			return nil, err
		}
		items = append(items, v)
		p.skipSpace()
		if p.pos >= len(p.data) {
			return nil, p.errorf("unexpected end of input in an array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
			p.skipSpace()
		case ']':
			p.pos++
			p.depth--
			return p.vm.NewArray(items...), nil
		default:
			return nil, p.errorf("expected ',' or ']', found %s", p.describe())
		}
	}
}

// key reads an object key, reusing the runtime's copy of common keys.
func (p *jsonParser) key() (string, error) {
	start := p.pos + 1
	end := start
	for end < len(p.data) && p.data[end] != '"' && p.data[end] != '\\' && p.data[end] >= 0x20 {
		end++
	}
	if end < len(p.data) && p.data[end] == '"' && end-start <= maxCachedKey {
		raw := p.data[start:end]
		if k, ok := p.vm.keys[string(raw)]; ok { // no allocation for the lookup
			p.pos = end + 1
			return k, nil
		}
		k, err := p.str()
		if err == nil {
			if p.vm.keys == nil || len(p.vm.keys) >= maxStringCache {
				p.vm.keys = make(map[string]string)
			}
			p.vm.keys[k] = k
		}
		return k, err
	}
	return p.str()
}

// strValue reads a string value, reusing the runtime's goja value for
// short strings it has seen: strings are immutable, so sharing is safe,
// and it saves the three allocations of a fresh one.
func (p *jsonParser) strValue() (goja.Value, error) {
	start := p.pos + 1
	end := start
	for end < len(p.data) && end-start <= maxCachedValue && p.data[end] != '"' && p.data[end] != '\\' && p.data[end] >= 0x20 {
		end++
	}
	if end < len(p.data) && p.data[end] == '"' && end-start <= maxCachedValue {
		if v, ok := p.vm.strs[string(p.data[start:end])]; ok {
			p.pos = end + 1
			return v, nil
		}
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		v := p.vm.ToValue(s)
		if p.vm.strs == nil || len(p.vm.strs) >= maxStringCache {
			p.vm.strs = make(map[string]goja.Value)
		}
		p.vm.strs[s] = v
		return v, nil
	}
	s, err := p.str()
	if err != nil {
		return nil, err
	}
	return p.vm.ToValue(s), nil
}

// str reads a string literal. Strings without escapes are one copy.
func (p *jsonParser) str() (string, error) {
	p.pos++ // opening quote
	start := p.pos
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			s := string(p.data[start:p.pos])
			p.pos++
			return s, nil
		case c == '\\':
			return p.escapedStr(start)
		case c < 0x20:
			return "", p.errorf("control character %s in a string", p.describe())
		}
		p.pos++
	}
	return "", p.errorf("unterminated string")
}

// escapedStr finishes a string that contains escapes, from start.
func (p *jsonParser) escapedStr(start int) (string, error) {
	b := append(p.buf[:0], p.data[start:p.pos]...)
	defer func() { p.buf = b[:0] }()
	for p.pos < len(p.data) {
		c := p.data[p.pos]
		switch {
		case c == '"':
			p.pos++
			return string(b), nil
		case c < 0x20:
			return "", p.errorf("control character %s in a string", p.describe())
		case c != '\\':
			b = append(b, c)
			p.pos++
			continue
		}
		p.pos++ // backslash
		if p.pos >= len(p.data) {
			break
		}
		e := p.data[p.pos]
		p.pos++
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, err := p.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				r = p.lowSurrogate(r)
			}
			b = utf8.AppendRune(b, r)
		default:
			p.pos--
			return "", p.errorf("invalid escape \\%c", e)
		}
	}
	return "", p.errorf("unterminated string")
}

// lowSurrogate completes the high surrogate r with a following \u low
// surrogate. Go strings cannot hold an unpaired surrogate, so like
// goja's JSON.parse (which decodes with encoding/json) an unpaired one
// becomes U+FFFD.
func (p *jsonParser) lowSurrogate(r rune) rune {
	if r < 0xdc00 && p.pos+6 <= len(p.data) && p.data[p.pos] == '\\' && p.data[p.pos+1] == 'u' {
		save := p.pos
		p.pos += 2
		if r2, err := p.hex4(); err == nil && r2 >= 0xdc00 && r2 < 0xe000 {
			return utf16.DecodeRune(r, r2)
		}
		p.pos = save
	}
	return utf8.RuneError
}

func (p *jsonParser) hex4() (rune, error) {
	if p.pos+4 > len(p.data) {
		return 0, p.errorf("short \\u escape")
	}
	var r rune
	for _, c := range p.data[p.pos : p.pos+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, p.errorf("invalid \\u escape")
		}
	}
	p.pos += 4
	return r, nil
}

// number reads a JSON number. Small integers skip strconv entirely and
// become goja integers, as JSON.parse makes them.
func (p *jsonParser) number() (goja.Value, error) {
	start := p.pos
	neg := false
	if p.data[p.pos] == '-' {
		neg = true
		p.pos++
	}
	digits := p.pos
	switch {
	case p.pos < len(p.data) && p.data[p.pos] == '0':
		p.pos++
	case p.pos < len(p.data) && p.data[p.pos] >= '1' && p.data[p.pos] <= '9':
		for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
			p.pos++
		}
	default:
		return nil, p.errorf("invalid number")
	}
	integer := true
	if p.pos < len(p.data) && p.data[p.pos] == '.' {
		integer = false
		p.pos++
		if !p.digits() {
			return nil, p.errorf("invalid number")
		}
	}
	if p.pos < len(p.data) && (p.data[p.pos] == 'e' || p.data[p.pos] == 'E') {
		integer = false
		p.pos++
		if p.pos < len(p.data) && (p.data[p.pos] == '+' || p.data[p.pos] == '-') {
			p.pos++
		}
		if !p.digits() {
			return nil, p.errorf("invalid number")
		}
	}
	// Up to 15 digits always fit a float64 exactly; -0 must stay a float.
	if integer && p.pos-digits <= 15 && !(neg && p.data[digits] == '0') {
		var n int64
		for _, c := range p.data[digits:p.pos] {
			n = n*10 + int64(c-'0')
		}
		if neg {
			n = -n
		}
		return p.vm.ToValue(n), nil
	}
	f, err := strconv.ParseFloat(string(p.data[start:p.pos]), 64)
	if err != nil {
		var ne *strconv.NumError
		if !errors.As(err, &ne) || ne.Err != strconv.ErrRange {
			return nil, p.errorf("invalid number")
		}
		// Out of range: ParseFloat returns ±Inf, as JSON.parse does.
	}
	return p.vm.ToValue(f), nil
}

func (p *jsonParser) digits() bool {
	start := p.pos
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
	}
	return p.pos > start
}
