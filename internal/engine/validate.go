package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/identity"
)

var (
	dbNameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	roleRE   = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
)

// MaxIDBytes is the longest document id.
const MaxIDBytes = 512

// ParseAppRef splits "owner/name" and checks both parts.
func ParseAppRef(ref string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(ref, "/")
	if !ok || !identity.IsName(owner) || !identity.IsName(name) {
		return "", "", errs.New(errs.Invalid, "app %q is not of the form owner/name (lowercase letters, digits and '-', 1-64 each)", ref)
	}
	return owner, name, nil
}

// ValidUserName checks a user name: the same rule as an app part.
func ValidUserName(name string) error { return identity.ValidUserName(name) }

// ValidDB checks a database name.
func ValidDB(db string) error {
	if !dbNameRE.MatchString(db) {
		return errs.New(errs.Invalid, "database name %q must be 1-64 letters, digits, '_' or '-'", db)
	}
	return nil
}

// ValidRole checks a role name.
func ValidRole(role string) error {
	if !roleRE.MatchString(role) {
		return errs.New(errs.Invalid, "role %q must be 1-64 letters, digits, '_' or '-'", role)
	}
	return nil
}

// fieldRE is compiled on first use: its bounded repeats make a large
// program, and every CLI command would compile it at start.
var fieldRE = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,7}$`)
})

// ValidField checks a query field: a name or a dotted path of names.
func ValidField(f string) error {
	if !fieldRE().MatchString(f) {
		return errs.New(errs.Invalid, "field %q must be a name of letters, digits, '_' or '-', or a dotted path of such names", f)
	}
	return nil
}

// ValidID checks a document id: 1-512 bytes of UTF-8 without control
// characters, not starting with '_' (reserved for the server).
func ValidID(id string) error {
	if id == "" {
		return errs.New(errs.Invalid, "document id is empty; pass an id or leave _id out to get one minted")
	}
	if len(id) > MaxIDBytes {
		return errs.New(errs.Invalid, "document id is %d bytes; the limit is %d", len(id), MaxIDBytes)
	}
	if !utf8.ValidString(id) {
		return errs.New(errs.Invalid, "document id is not valid UTF-8")
	}
	if strings.HasPrefix(id, "_") {
		return errs.New(errs.Invalid, "document id %q starts with '_', which is reserved; choose another id", id)
	}
	for _, r := range id {
		if unicode.IsControl(r) {
			return errs.New(errs.Invalid, "document id %q contains a control character; use printable characters", id)
		}
	}
	return nil
}

// parsedDoc is a validated document body.
type parsedDoc struct {
	id   string // the body's _id, if any
	body []byte // canonical JSON without reserved fields
}

// parseDoc validates a document body: a JSON object within the size limit
// with no reserved fields but _id and _rev. _rev is dropped (handlers
// spread a read document into the next write); _id is returned. The body
// is re-encoded with sorted keys so equal documents get equal revs.
func parseDoc(raw []byte, maxBytes int) (parsedDoc, error) {
	if len(raw) > maxBytes {
		return parsedDoc{}, errs.New(errs.TooLarge, "document is %d bytes; the limit is %d bytes; store large data elsewhere and keep a reference", len(raw), maxBytes)
	}
	// JSON's own white space only: bytes.TrimSpace would also take
	// characters such as \v that json.Valid refuses.
	trimmed := bytes.Trim(raw, jsonSpace)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		if !json.Valid(trimmed) {
			return parsedDoc{}, errs.New(errs.Invalid, "document is not valid JSON; send a JSON object such as {\"status\":\"pending\"}")
		}
		return parsedDoc{}, errs.New(errs.Invalid, "document must be a JSON object, not %s", jsonKind(trimmed))
	}
	if !utf8.Valid(trimmed) {
		// Stored as sent, it would read back with U+FFFD in its place.
		return parsedDoc{}, errs.New(errs.Invalid, "document is not valid UTF-8 (first bad byte at offset %d); send the text as UTF-8", invalidUTF8At(trimmed))
	}
	if d := jsonDepth(trimmed); d > MaxDepth {
		return parsedDoc{}, errs.New(errs.Invalid, "document nests %d levels deep; the limit is %d; flatten it", d, MaxDepth)
	}
	if json.Valid(trimmed) {
		return parseValidDoc(trimmed, len(raw), len(raw)-len(bytes.TrimLeft(raw, jsonSpace)))
	}
	// Invalid: decode it anyway, for the decoder's account of what is
	// wrong. When the decoder takes a whole object, what follows it is.
	var v json.RawMessage
	if err := json.NewDecoder(bytes.NewReader(trimmed)).Decode(&v); err != nil {
		return parsedDoc{}, syntaxError(err)
	}
	return parsedDoc{}, errs.New(errs.Invalid, "document has data after the JSON object; send exactly one object")
}

// parseValidDoc is parseDoc for a valid JSON object that starts at byte
// lead of the body as sent.
func parseValidDoc(b []byte, size, lead int) (parsedDoc, error) {
	if ve := checkValues(b); ve != nil {
		return parsedDoc{}, ve.docError(lead)
	}
	ms, err := canonicalObject(b)
	if err != nil {
		return parsedDoc{}, errs.New(errs.Invalid, "document is not valid JSON: %v", err)
	}
	if ms.dup != nil {
		// Which one counts would be up to each reader; refuse instead.
		return parsedDoc{}, errs.New(errs.Invalid, "document has the field %q more than once; keep one", ms.dup)
	}
	var p parsedDoc
	kept := ms.ms[:0]
	for _, x := range ms.ms {
		key := ms.key(x)
		if len(key) == 0 || key[0] != '_' {
			kept = append(kept, x)
			continue
		}
		switch string(key) {
		case "_id":
			if err := json.Unmarshal(b[x.vs:x.ve], &p.id); err != nil {
				return parsedDoc{}, errs.New(errs.Invalid, "_id must be a string")
			}
			if err := ValidID(p.id); err != nil {
				return parsedDoc{}, err
			}
		case "_rev":
		default:
			return parsedDoc{}, errs.New(errs.Invalid, "field %q is reserved (top-level fields starting with '_' belong to the server); rename it", key)
		}
	}
	ms.ms = kept
	if p.body, err = appendCanonical(make([]byte, 0, size), ms); err != nil {
		return parsedDoc{}, errs.New(errs.Invalid, "document cannot be encoded: %v", err)
	}
	return p, nil
}

// jsonSpace is the white space JSON allows around values.
const jsonSpace = " \t\r\n"

// MaxDepth bounds how deeply a document nests: the stores' JSON functions
// refuse very deep documents, and no state machine needs them.
const MaxDepth = 128

// jsonDepth returns the deepest nesting of objects and arrays in valid
// JSON, counting the outermost as 1.
func jsonDepth(b []byte) int {
	depth, deepest := 0, 0
	inString, escaped := false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

func jsonKind(b []byte) string {
	switch b[0] {
	case '[':
		return "an array"
	case '"':
		return "a string"
	case 'n':
		return "null"
	case 't', 'f':
		return "a boolean"
	}
	return "a number"
}

// invalidUTF8At is the offset of the first byte of b that is not part of
// valid UTF-8.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// syntaxError says where a document's JSON breaks and what to look for.
func syntaxError(err error) *errs.Error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return errs.New(errs.Invalid, "document is not valid JSON at byte %d: %v; check the quotes, commas and brackets there", se.Offset, se)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errs.New(errs.Invalid, "document is not valid JSON: it ends before its last brace, bracket or string is closed; send the whole object")
	}
	return errs.New(errs.Invalid, "document is not valid JSON: %v; send one JSON object such as {\"status\":\"pending\"}", err)
}
