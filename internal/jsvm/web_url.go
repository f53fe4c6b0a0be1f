package jsvm

import (
	_ "embed"
	"strings"
	"unicode/utf8"

	"github.com/dop251/goja"
	whatwg "github.com/nlnwa/whatwg-url/url"
)

//go:embed web/url.js
var urlJS string

var urlProgram = webScript("url.js", urlJS)

// urlParser is the WHATWG parser with its defaults, which follow the
// standard; it holds no state between calls.
var urlParser = whatwg.NewParser()

// urlBytes is what one character of a URL may cost while it is parsed
// and its parts are made: the parser's rune and builder copies, and a
// percent-encoded character becomes up to nine. A URL too long for the
// heap limit at this rate fails its call before any of it is allocated.
const urlBytes = 24

// urlHandle is the Go half of one URL object; url.js keeps it private.
type urlHandle struct{ u *whatwg.Url }

// installURL defines URL and URLSearchParams.
func installURL(vm *VM) error {
	_, err := runWebScript(vm, urlProgram(), map[string]any{
		"parse":      vm.urlParse,
		"parts":      vm.urlParts,
		"set":        vm.urlSet,
		"formParse":  vm.formParse,
		"formEncode": vm.formEncode,
		"usv":        vm.usv,
	})
	return err
}

// usv(string) is the string with each lone surrogate replaced by U+FFFD.
// It is looked at in place, not copied, unless it needs the change.
func (vm *VM) usv(c goja.FunctionCall) goja.Value {
	v := c.Argument(0)
	s, ok := v.(goja.String)
	if !ok {
		return v
	}
	for i, n := 0, s.Length(); i < n; i++ {
		if u := s.CharAt(i); u >= 0xD800 && u <= 0xDFFF {
			vm.charge(float64(n)*6, "a string this long")
			// Go's UTF-8 of the string has U+FFFD for each lone one.
			return vm.ToValue(s.String())
		}
	}
	return v
}

// strLen is the length of a JS string value in UTF-16 units.
func strLen(v goja.Value) int {
	if s, ok := v.(goja.String); ok {
		return s.Length()
	}
	return len(v.String())
}

// urlParse(input[, base]) → a handle, or null when input is not a URL.
func (vm *VM) urlParse(c goja.FunctionCall) goja.Value {
	n := strLen(c.Argument(0))
	hasBase := len(c.Arguments) > 1
	if hasBase {
		n += strLen(c.Argument(1))
	}
	vm.charge(float64(n)*urlBytes, "parsing a URL this long")
	base := ""
	if hasBase {
		base = c.Argument(1).String()
	}
	u, ok := parseURL(c.Argument(0).String(), base, hasBase)
	if !ok {
		return goja.Null()
	}
	return vm.ToValue(&urlHandle{u: u})
}

// parseURL parses input against base. A panic of the library is a URL
// it cannot parse, never the server's end (FuzzParseURL looks for them).
func parseURL(input, base string, hasBase bool) (u *whatwg.Url, ok bool) {
	defer func() {
		if recover() != nil {
			u, ok = nil, false
		}
	}()
	var err error
	if hasBase {
		var b *whatwg.Url
		if b, err = urlParser.Parse(base); err == nil {
			u, err = urlParser.BasicParser(input, b, nil, whatwg.NoState)
		}
	} else {
		u, err = urlParser.Parse(input)
	}
	if err != nil || u == nil {
		return nil, false
	}
	// Made now, so reading the parts later cannot panic either.
	_, _ = u.Href(false), urlOrigin(u)
	return u, true
}

func (vm *VM) handleArg(v goja.Value) *urlHandle {
	if h, ok := v.Export().(*urlHandle); ok {
		return h
	}
	panic(vm.NewTypeError("not a URL"))
}

// urlParts(handle) → [href, origin, protocol, username, password, host,
// hostname, port, pathname, search, hash].
func (vm *VM) urlParts(c goja.FunctionCall) goja.Value {
	u := vm.handleArg(c.Argument(0)).u
	href := u.Href(false)
	vm.charge(float64(len(href))*4, "a URL this long")
	parts := []any{href, urlOrigin(u), u.Protocol(), u.Username(), u.Password(), u.Host(),
		u.Hostname(), u.Port(), u.Pathname(), u.Search(), u.Hash()}
	return vm.NewArray(parts...)
}

// urlSet(handle, part, value) runs the standard's setter of part. A value
// the setter cannot use leaves the URL as it was, as the standard says.
func (vm *VM) urlSet(c goja.FunctionCall) goja.Value {
	h := vm.handleArg(c.Argument(0))
	value := c.Argument(2)
	vm.charge(float64(strLen(value)+len(h.u.Href(false)))*urlBytes, "a URL this long")
	part := c.Argument(1).String()
	if !validPart[part] {
		panic(vm.NewTypeError("no such URL part"))
	}
	if u, ok := setURLPart(h.u, part, value.String()); ok {
		h.u = u
	}
	return goja.Undefined()
}

var validPart = map[string]bool{"protocol": true, "username": true, "password": true, "host": true,
	"hostname": true, "port": true, "pathname": true, "search": true, "hash": true}

// setURLPart runs part's setter on a copy of u. A panic of the library
// leaves the URL as it was.
func setURLPart(orig *whatwg.Url, part, v string) (u *whatwg.Url, ok bool) {
	defer func() {
		if recover() != nil {
			u, ok = nil, false
		}
	}()
	u = orig.Clone()
	switch part {
	case "protocol":
		u.SetProtocol(v)
	case "username":
		u.SetUsername(v)
	case "password":
		u.SetPassword(v)
	case "host":
		u.SetHost(v)
	case "hostname":
		u.SetHostname(v)
	case "port":
		u.SetPort(v)
	case "pathname":
		u.SetPathname(v)
	case "search":
		u.SetSearch(v)
	case "hash":
		u.SetHash(v)
	}
	_, _ = u.Href(false), urlOrigin(u)
	return u, true
}

// urlOrigin serialises the URL's origin: scheme, host and port for the
// schemes that have one, the inner URL's for blob:, else "null".
func urlOrigin(u *whatwg.Url) string {
	switch u.Scheme() {
	case "http", "https", "ws", "wss", "ftp":
		return u.Protocol() + "//" + u.Host()
	case "blob":
		if inner, err := urlParser.Parse(u.Pathname()); err == nil && (inner.Scheme() == "http" || inner.Scheme() == "https") {
			return urlOrigin(inner)
		}
	}
	return "null"
}

// formParse(query) → [[name, value], ...], the
// application/x-www-form-urlencoded parser. The library's own
// SearchParams decodes "+" after percent-decoding (so %2B became a
// space) and percent-encodes with the wrong set, so this is written out.
func (vm *VM) formParse(c goja.FunctionCall) goja.Value {
	s := c.Argument(0).String()
	pairs := strings.Count(s, "&") + 1
	// Each pair is an array and two strings in the runtime.
	vm.charge(float64(pairs)*256+float64(len(s))*4, "parsing a query this long")
	items := make([]any, 0, pairs)
	for i, part := range strings.Split(s, "&") {
		if i%stopCheckEvery == 0 {
			vm.checkStop()
		}
		if part == "" {
			continue
		}
		name, value, _ := strings.Cut(part, "=")
		items = append(items, vm.NewArray(formDecode(name), formDecode(value)))
	}
	return vm.NewArray(items...)
}

// formDecode replaces "+" with a space, then percent-decodes, then reads
// the bytes as UTF-8 with each invalid sequence one U+FFFD.
func formDecode(s string) string {
	if !strings.ContainsAny(s, "+%") && utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '+':
			b = append(b, ' ')
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
		default:
			b = append(b, c)
		}
	}
	return decodeUTF8(b)
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c >= 'a':
		return c - 'a' + 10
	case c >= 'A':
		return c - 'A' + 10
	}
	return c - '0'
}

// decodeUTF8 is the Encoding standard's UTF-8 decode: each maximal
// subpart of an invalid sequence becomes one U+FFFD (Go's ToValidUTF8
// would make one of a whole run).
func decodeUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b))
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size != 1 {
			sb.WriteRune(r)
			i += size
			continue
		}
		sb.WriteRune(utf8.RuneError)
		i += maximalSubpart(b[i:])
	}
	return sb.String()
}

// maximalSubpart is how many bytes of b, which starts an invalid UTF-8
// sequence, one U+FFFD stands for.
func maximalSubpart(b []byte) int {
	need, lo, hi := 0, byte(0x80), byte(0xBF)
	switch c := b[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c == 0xED:
		need, hi = 2, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 2
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	i := 1
	for ; i <= need && i < len(b) && b[i] >= lo && b[i] <= hi; i++ {
		lo, hi = 0x80, 0xBF
	}
	return i
}

// formEncode(s) is the application/x-www-form-urlencoded byte serializer
// of s's UTF-8: a space is "+", and all but ASCII letters, digits and
// *-._ are percent-encoded.
func (vm *VM) formEncode(c goja.FunctionCall) goja.Value {
	arg := c.Argument(0)
	vm.charge(float64(strLen(arg))*10, "encoding a query this long")
	s := arg.String()
	var sb strings.Builder
	sb.Grow(len(s))
	const hex = "0123456789ABCDEF"
	for i := 0; i < len(s); i++ {
		switch b := s[i]; {
		case b == ' ':
			sb.WriteByte('+')
		case b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '*' || b == '-' || b == '.' || b == '_':
			sb.WriteByte(b)
		default:
			sb.WriteByte('%')
			sb.WriteByte(hex[b>>4])
			sb.WriteByte(hex[b&15])
		}
	}
	return vm.ToValue(sb.String())
}
