package jsvm_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/dop251/goja"
)

// test262Meta is the part of a test262 file's YAML frontmatter that the
// runner reads (test262's INTERPRETING.md).
type test262Meta struct {
	features []string
	flags    []string
	includes []string
	phase    string // negative.phase: parse, resolution or runtime
	errType  string // negative.type, e.g. SyntaxError
}

func (m *test262Meta) hasFlag(f string) bool {
	for _, x := range m.flags {
		if x == f {
			return true
		}
	}
	return false
}

// parseTest262Meta reads the frontmatter between /*--- and ---*/. It
// understands the few shapes test262 uses for the keys it needs: inline
// lists ([a, b]), block lists (- a) and the negative mapping.
func parseTest262Meta(src string) test262Meta {
	var m test262Meta
	start := strings.Index(src, "/*---")
	if start < 0 {
		return m
	}
	end := strings.Index(src[start:], "---*/")
	if end < 0 {
		return m
	}
	var cur *[]string
	inNegative := false
	for _, line := range strings.Split(src[start+5:start+end], "\n") {
		line = strings.TrimRight(line, " \r\t")
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			continue
		}
		indented := line[0] == ' ' || line[0] == '\t'
		if !indented {
			cur, inNegative = nil, false
			key, val, ok := strings.Cut(trimmed, ":")
			if !ok {
				continue
			}
			val = strings.TrimSpace(val)
			switch key {
			case "features":
				cur = &m.features
			case "flags":
				cur = &m.flags
			case "includes":
				cur = &m.includes
			case "negative":
				inNegative = true
				continue
			default:
				continue
			}
			if strings.HasPrefix(val, "[") {
				*cur = append(*cur, inlineList(val)...)
				cur = nil
			}
			continue
		}
		switch {
		case inNegative:
			key, val, _ := strings.Cut(trimmed, ":")
			val = strings.TrimSpace(val)
			switch key {
			case "phase":
				m.phase = val
			case "type":
				m.errType = val
			}
		case cur != nil && strings.HasPrefix(trimmed, "- "):
			*cur = append(*cur, unquote(strings.TrimSpace(trimmed[2:])))
		}
	}
	return m
}

func inlineList(v string) []string {
	v = strings.TrimSuffix(strings.TrimPrefix(v, "["), "]")
	var out []string
	for _, x := range strings.Split(v, ",") {
		if x = unquote(strings.TrimSpace(x)); x != "" {
			out = append(out, x)
		}
	}
	return out
}

func unquote(s string) string {
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	return strings.Trim(s, `"'`)
}

// test262Skipped are the features whose tests are not run, with why.
// Everything else runs, including features goja lacks (they fail on both
// runtimes alike).
var test262Skipped = map[string]string{
	"Temporal":                     "not in goja",
	"Atomics":                      "not in goja (needs SharedArrayBuffer and agents)",
	"Atomics.waitAsync":            "not in goja",
	"Atomics.pause":                "not in goja",
	"SharedArrayBuffer":            "not in goja",
	"async-iteration":              "goja: no async generators or for await",
	"regexp-v-flag":                "not in goja",
	"decorators":                   "not in goja",
	"explicit-resource-management": "not in goja",
	"import-defer":                 "modules: handoff runs scripts",
	"source-phase-imports":         "modules: handoff runs scripts",
	"ShadowRealm":                  "not in goja",
	"cross-realm":                  "the harness offers no $262.createRealm",
	"IsHTMLDDA":                    "the harness offers no $262.IsHTMLDDA",
}

// test262SkipReason says why a test is not run, or "" to run it.
func test262SkipReason(m *test262Meta) string {
	for _, f := range m.features {
		if _, ok := test262Skipped[f]; ok {
			return "feature " + f
		}
	}
	for _, f := range m.flags {
		switch f {
		case "module":
			return "flag module"
		case "CanBlockIsTrue", "CanBlockIsFalse":
			return "flag " + f
		}
	}
	for _, inc := range m.includes {
		if inc == "atomicsHelper.js" {
			return "include atomicsHelper.js"
		}
	}
	return ""
}

// harnessCache compiles each harness file once, with compile; a
// *goja.Program may run on any number of runtimes.
type harnessCache struct {
	dir     string
	compile func(name, src string, strict bool) (*goja.Program, error)
	mu      sync.Mutex
	progs   map[string]*goja.Program
	errs    map[string]error
}

func newHarnessCache(dir string, compile func(name, src string, strict bool) (*goja.Program, error)) *harnessCache {
	return &harnessCache{dir: dir, compile: compile, progs: map[string]*goja.Program{}, errs: map[string]error{}}
}

func (h *harnessCache) get(name string) (*goja.Program, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if p, ok := h.progs[name]; ok {
		return p, nil
	}
	if err, ok := h.errs[name]; ok {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(h.dir, "harness", name))
	if err == nil {
		var p *goja.Program
		if p, err = h.compile(name, string(b), false); err == nil {
			h.progs[name] = p
			return p, nil
		}
	}
	h.errs[name] = err
	return nil, err
}
