package jsvm

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"

	"github.com/dop251/goja/file"
	"github.com/go-sourcemap/sourcemap"
)

// inlineMapPrefix starts the inline source map that esbuild appends.
const inlineMapPrefix = "//# sourceMappingURL=data:application/json;base64,"

// inlineMap returns the JSON of code's inline source map, or nil.
func inlineMap(code string) []byte {
	i := strings.LastIndex(code, inlineMapPrefix)
	if i < 0 {
		return nil
	}
	data := strings.TrimSpace(code[i+len(inlineMapPrefix):])
	b, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return nil
	}
	return b
}

// mapSources lists the files that code's inline source map points into,
// named as goja names them in stack frames. A bundled module has one per
// file it was built from ("backend.js", "lib/resize.js"); a plain one has
// just its own name.
func mapSources(filename, code string) []string {
	var m struct {
		Sources []string `json:"sources"`
	}
	if b := inlineMap(code); b == nil || json.Unmarshal(b, &m) != nil || len(m.Sources) == 0 {
		return []string{filename}
	}
	out := make([]string, len(m.Sources))
	for i, s := range m.Sources {
		out[i] = s
		if u := file.ResolveSourcemapURL(filename, s); u != nil {
			out[i] = u.String()
		}
	}
	return out
}

// mapBack moves the position of a compile error in a bundle the user
// deployed back to the file it came from, through the bundle's own
// inline source map. A module without one is left alone.
func mapBack(e *CompileError, source string) {
	b := inlineMap(source)
	if b == nil || e.Line == 0 {
		return
	}
	sm, err := sourcemap.Parse("", b)
	if err != nil {
		return
	}
	// The map counts columns from 0, as esbuild does.
	if src, _, line, col, ok := sm.Source(e.Line, e.Column-1); ok {
		e.File, e.Line, e.Column, e.LineText = src, line, col+1, ""
	}
}

// isSource reports whether a stack frame's file is one of the user's.
func (p *Program) isSource(name string) bool { return slices.Contains(p.sources, name) }
