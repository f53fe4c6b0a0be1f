package jsvm

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"unicode/utf8"

	"github.com/dop251/goja"
	"github.com/evanw/esbuild/pkg/api"
)

// Program is one compiled version of a user's module. It is immutable and
// safe to share: every runtime of every Pool built from it runs the same
// *goja.Program, so a deploy pays for parsing and compiling exactly once,
// and the same source compiles once per process (compile_cache.go).
type Program struct {
	filename string
	sources  []string // the user's files in stack frames (mapSources)
	code     string
	prog     *goja.Program
	exports  []string
	bigint   bool // the module names BigInt: its runtimes have it, checked (bigint.go)
}

// Filename is the name errors use for the user's file, e.g. "access.js".
func (p *Program) Filename() string { return p.filename }

// Exports lists the module's export names in source order as esbuild saw
// them ("default" for a default export). It is read from the module's
// syntax, not by running it, so a deploy can validate exports without
// executing user code.
func (p *Program) Exports() []string { return slices.Clone(p.exports) }

// Sources are the user's files the program was built from: its own
// name, or for a bundle every module in it ("lib/resize.js").
func (p *Program) Sources() []string { return slices.Clone(p.sources) }

// HasExport reports whether the module exports name.
func (p *Program) HasExport(name string) bool { return slices.Contains(p.exports, name) }

// Code is the JavaScript that goja runs, after esbuild. It is meant for
// debugging the pipeline, not for users: errors already map back to the
// original source.
func (p *Program) Code() string { return p.code }

// moduleBanner and moduleFooter wrap the CommonJS output in a function so
// each runtime can evaluate the module with its own exports object. esbuild
// accounts for the banner in the source map, and goja's source-map lookup
// skips a trailing "})" line, so positions stay exact.
const (
	moduleBanner = "(function (exports, require, module) {"
	moduleFooter = "})"
)

// loweredFeatures are the ESNext features goja cannot run, so esbuild must
// rewrite them. Everything else goja handles natively (classes with
// private members, optional chaining, BigInt, ...) and is left alone,
// because native syntax is faster and keeps stack traces readable.
// TestGojaRunsUnloweredSyntax proves that list against the goja in go.mod.
var loweredFeatures = map[string]bool{
	"async-generator":      false, // goja: "Async generators are not supported yet"
	"for-await":            false, // goja's parser rejects for await
	"using":                false, // explicit resource management
	"decorators":           false,
	"regexp-match-indices": false, // /d flag: becomes new RegExp, fails only if run
	"regexp-set-notation":  false, // /v flag: same
	"top-level-await":      false, // CommonJS has none; esbuild reports it with a position
}

// Defines are the names a bundle sees replaced by constants, as the
// bundlers npm packages are written for do: process.env.NODE_ENV picks a
// package's production build (immer, react and others read it at load,
// and there is no process object to read it from).
func Defines() map[string]string {
	return map[string]string{"process.env.NODE_ENV": `"production"`}
}

// Unsupported is the feature set of esbuild that the runtime cannot or
// will not run (refused.go), for a bundler that should refuse that syntax
// where the user wrote it.
func Unsupported() map[string]bool { return supported() }

func supported() map[string]bool {
	m := maps.Clone(loweredFeatures)
	maps.Copy(m, refusedFeatures)
	return m
}

// Compile turns the ES module source (named filename in errors) into a
// Program. Syntax errors, imports (a module must be self-contained) and
// syntax the runtime cannot run come back as a *CompileError that names
// the user's file, line and column.
func Compile(filename, source string) (*Program, error) {
	k := keyOf(filename, source)
	if p := programs.get(k); p != nil {
		return p, nil
	}
	p, err := compile(filename, source)
	if err != nil {
		return nil, err // errors are not kept: they are cheap to find again
	}
	programs.put(k, p)
	return p, nil
}

func compile(filename, source string) (*Program, error) {
	res := api.Transform(source, api.TransformOptions{
		// goja resolves the map's sources against filename's folder, so
		// the map names the file by its base name: a test at
		// test/jobs.test.js must not become test/test/jobs.test.js.
		Sourcefile:     path.Base(filename),
		Loader:         api.LoaderJS,
		Format:         api.FormatCommonJS,
		Target:         api.ESNext,
		Supported:      supported(),
		LogOverride:    Refusals(),
		Sourcemap:      api.SourceMapInline,
		SourcesContent: api.SourcesContentExclude,
		// Characters are written as they are, not as escapes: goja's
		// parser panics on the escape \u{10FFFF}, which esbuild would
		// write for "\uDBFF\uDFFF".
		Charset:  api.CharsetUTF8,
		Define:   Defines(),
		Banner:   moduleBanner,
		Footer:   moduleFooter,
		LogLevel: api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		e := NewCompileError(filename, res.Errors)
		mapBack(e, source)
		return nil, e
	}
	exports, err := moduleExports(filename, source)
	if err != nil {
		return nil, err
	}
	code := string(res.Code)
	// Strict: the input is an ES module, and modules are always strict.
	prog, bigint, err := compileGoja(filename, code)
	if err != nil {
		return nil, err
	}
	return &Program{filename: filename, sources: mapSources(filename, code), code: code, prog: prog, exports: exports, bigint: bigint}, nil
}

// compileGoja is goja.Compile, with a panic of goja's parser or compiler
// (a bug of goja's that some input reaches) turned into a CompileError:
// no app's code may take down a deploy, or the server that compiles it.
// Code that names BigInt is compiled with its operators checked
// (bigint_rewrite.go), and bigint says so.
func compileGoja(filename, code string) (prog *goja.Program, bigint bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			prog, err = nil, &CompileError{File: filename, Message: fmt.Sprintf(
				"the JavaScript runtime failed to compile this file (%v); rewrite the construct it names, or report the code that caused it", r)}
		}
	}()
	tree, err := goja.Parse(filename, code)
	if err != nil {
		return nil, false, gojaCompileError(filename, err)
	}
	if mayUseBigInt(code) && usesBigInt(tree) {
		bigint = true
		if _, err := rewriteBigInt(tree, true); err != nil {
			return nil, false, &CompileError{File: filename, Message: err.Error()}
		}
	}
	prog, err = goja.CompileAST(tree, true)
	if err != nil {
		return nil, false, gojaCompileError(filename, err)
	}
	return prog, bigint, nil
}

// moduleExports asks esbuild for the module's export names. A Transform
// reports none, so this runs a bundling Build that writes nothing and reads
// its metafile. Bundling also resolves imports, and with nothing to resolve
// against, every import fails with its position: exactly the error a user
// needs, since a deployed module runs alone and has nothing to import.
func moduleExports(filename, source string) ([]string, error) {
	res := api.Build(api.BuildOptions{
		Stdin: &api.StdinOptions{
			Contents:   source,
			Sourcefile: filename,
			Loader:     api.LoaderJS,
		},
		Bundle:   true,
		Format:   api.FormatESModule,
		Target:   api.ESNext,
		Metafile: true,
		Write:    false,
		Outfile:  "out.js",
		LogLevel: api.LogLevelSilent,
	})
	if len(res.Errors) > 0 {
		for i := range res.Errors {
			res.Errors[i].Text = importHint(res.Errors[i].Text)
		}
		return nil, NewCompileError(filename, res.Errors)
	}
	var meta struct {
		Outputs map[string]struct {
			Exports []string `json:"exports"`
		} `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(res.Metafile), &meta); err != nil {
		return nil, fmt.Errorf("jsvm: reading esbuild metafile: %w", err)
	}
	var exports []string
	for _, out := range meta.Outputs {
		exports = append(exports, out.Exports...)
	}
	return exports, nil
}

// importHint explains the one build error that is about the platform, not
// the user's syntax.
func importHint(text string) string {
	const prefix = "Could not resolve "
	if len(text) > len(prefix) && text[:len(prefix)] == prefix {
		return "cannot import " + text[len(prefix):] +
			": code sent to the server must be one file; deploy the app's folder with `handoff deploy`, which bundles the modules it imports, or inline the code"
	}
	return text
}

// NewCompileError describes esbuild's errors: the first one at its file
// (filename unless esbuild names another), line and column.
func NewCompileError(filename string, msgs []api.Message) *CompileError {
	m := msgs[0]
	e := &CompileError{File: filename, Message: m.Text, More: len(msgs) - 1}
	if loc := m.Location; loc != nil {
		if loc.File != "" {
			e.File = filepath.ToSlash(loc.File)
		}
		e.Line = loc.Line
		col := loc.Column
		if col > len(loc.LineText) {
			col = len(loc.LineText)
		}
		// esbuild counts bytes from 0; people and editors count
		// characters from 1.
		e.Column = utf8.RuneCountInString(loc.LineText[:col]) + 1
		e.LineText = loc.LineText
	}
	return e
}

// gojaCompileError reports syntax that esbuild accepted but goja rejects.
// goja maps the offset through the inline source map when it can.
func gojaCompileError(filename string, err error) *CompileError {
	e := &CompileError{File: filename, Message: err.Error()}
	var se *goja.CompilerSyntaxError
	if errors.As(err, &se) {
		e.Message = se.Message
		if se.File != nil {
			pos := se.File.Position(se.Offset)
			e.File, e.Line, e.Column = pos.Filename, pos.Line, pos.Column
		}
	}
	e.Message += " (this syntax is not supported by handoff's JavaScript runtime; rewrite it with older syntax)"
	return e
}
