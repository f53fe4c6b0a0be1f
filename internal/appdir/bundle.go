package appdir

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// Module is one code file of an app's folder after bundling.
type Module struct {
	// Code is what is deployed: the file itself when it imports nothing,
	// else one ES module holding it and everything it imports, with an
	// inline source map back to each file.
	Code string
	// Uses are the files the code was read from, slash-separated and
	// relative to the folder, the entry file first.
	Uses []string
}

// innerResolve marks the plugin's own resolve calls, told apart from
// the imports it checks.
type innerResolve struct{}

// Bundle reads the module name (access.js or backend.js) in dir and
// follows its imports: relative paths inside dir, and bare package names
// under dir/node_modules. An import that leads outside dir, by path or by
// a symbolic link, or that names nothing, is refused with the importing
// file and line.
func Bundle(dir, name string) (Module, error) {
	root, err := realDir(dir)
	if err != nil {
		return Module{}, err
	}
	res, uses, err := build(root, name, false)
	if err != nil {
		return Module{}, err
	}
	if err := confined(root, name, uses); err != nil {
		// Built again, resolving every import through the plugin: slower,
		// but the refusal names the importing file and line.
		if _, _, serr := build(root, name, true); serr != nil {
			return Module{}, serr
		}
		return Module{}, err
	}
	if len(uses) == 1 {
		// Nothing imported: deploy the file exactly as written.
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			return Module{}, errs.New(errs.Invalid, "cannot read %s: %v", filepath.Join(dir, name), err)
		}
		return Module{Code: string(b), Uses: uses}, nil
	}
	if len(res.OutputFiles) != 1 {
		return Module{}, errs.New(errs.Internal, "bundling %s gave %d output files, want 1", name, len(res.OutputFiles))
	}
	return Module{Code: string(res.OutputFiles[0].Contents), Uses: uses}, nil
}

// build bundles name in root. With strict, every import is resolved
// through the plugin, the plain relative ones too.
func build(root, name string, strict bool) (api.BuildResult, []string, error) {
	res := api.Build(api.BuildOptions{
		EntryPoints:   []string{name},
		AbsWorkingDir: root,
		Bundle:        true,
		Format:        api.FormatESModule,
		Target:        api.ESNext,
		Supported:     jsvm.Unsupported(),
		LogOverride:   jsvm.Refusals(),
		Define:        jsvm.Defines(),
		Platform:      api.PlatformNeutral,
		MainFields:    []string{"module", "main"},
		// The server compiles the result once more; keep it as written.
		Sourcemap:      api.SourceMapInline,
		SourcesContent: api.SourcesContentExclude,
		Metafile:       true,
		Write:          false,
		Outfile:        filepath.Join(root, name),
		LogLevel:       api.LogLevelSilent,
		Plugins:        []api.Plugin{confine(root, strict)},
	})
	if len(res.Errors) > 0 {
		return res, nil, bundleError(name, wordMissing(res.Errors, root))
	}
	uses, err := inputs(res.Metafile, name)
	return res, uses, err
}

// realDir is dir as an absolute path with its symbolic links resolved, so
// that an import's real path can be compared with it.
func realDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", errs.New(errs.Invalid, "cannot read %s: %v", dir, err)
	}
	return abs, nil
}

// confine checks every import against the folder. esbuild's own resolver
// finds the file; the plugin refuses what it finds outside root, and
// words a missing module as something the user can act on. A path that
// stays inside the folder as written is left to esbuild alone: a plugin's
// own resolve reads a package's package.json afresh each time, and a
// package of many files (date-fns) took seconds of it. Where such a path
// leads through a symbolic link is checked on the build's inputs
// (confined).
func confine(root string, strict bool) api.Plugin {
	return api.Plugin{Name: "app-folder", Setup: func(b api.PluginBuild) {
		b.OnResolve(api.OnResolveOptions{Filter: ".*"}, func(args api.OnResolveArgs) (api.OnResolveResult, error) {
			if _, ok := args.PluginData.(innerResolve); ok {
				return api.OnResolveResult{}, nil
			}
			if !strict && !isBare(args.Path) && args.Namespace == "file" {
				target := args.Path
				if !filepath.IsAbs(target) {
					target = filepath.Join(args.ResolveDir, target)
				}
				if inside(root, target) {
					return api.OnResolveResult{}, nil
				}
			}
			r := b.Resolve(args.Path, api.ResolveOptions{
				Importer: args.Importer, Namespace: args.Namespace, ResolveDir: args.ResolveDir,
				Kind: args.Kind, PluginData: innerResolve{}, With: args.With,
			})
			if len(r.Errors) > 0 {
				return refuse(missingHint(args.Path, root)), nil
			}
			if r.External || (r.Namespace != "file" && r.Namespace != "") {
				return api.OnResolveResult{Path: r.Path, External: r.External, Namespace: r.Namespace, SideEffects: sideEffects(r.SideEffects)}, nil
			}
			real, err := filepath.EvalSymlinks(r.Path)
			if err != nil {
				return refuse(missingHint(args.Path, root)), nil
			}
			if !inside(root, real) {
				return refuse(outsideHint(args.Path, real)), nil
			}
			return api.OnResolveResult{Path: real, SideEffects: sideEffects(r.SideEffects)}, nil
		})
	}}
}

func sideEffects(b bool) api.SideEffects {
	if b {
		return api.SideEffectsTrue
	}
	return api.SideEffectsFalse
}

func refuse(text string) api.OnResolveResult {
	return api.OnResolveResult{Errors: []api.Message{{Text: text}}}
}

// missingHint says how to fix an import that names no file.
func missingHint(path, root string) string {
	if isBare(path) {
		return fmt.Sprintf("cannot import %q: no such package in the app's node_modules/; install it there (npm install in the app's folder), since packages are looked up nowhere else", path)
	}
	return fmt.Sprintf("cannot import %q: no such file in the app's folder; fix the path (it is relative to the importing file) or create the file", path)
}

// outsideHint says how to fix an import that leads out of the folder.
func outsideHint(path, real string) string {
	if isBare(path) {
		return fmt.Sprintf("cannot import %q: it was found outside the app's folder (%s), and packages come only from the folder's own node_modules/; install it there (npm install in the app's folder)", path, real)
	}
	return fmt.Sprintf("cannot import %q: it leads outside the app's folder (to %s), and only files inside the folder are deployed; copy the code into the folder", path, real)
}

// isBare reports whether an import names a package rather than a path.
func isBare(path string) bool {
	return !strings.HasPrefix(path, "./") && !strings.HasPrefix(path, "../") && path != "." && path != ".." && !filepath.IsAbs(path) && !strings.HasPrefix(path, "/")
}

// inside reports whether p is root or below it.
func inside(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}

// inputs lists the files a build read, from its metafile: the entry file
// first, then the rest in order.
func inputs(metafile, entry string) ([]string, error) {
	var meta struct {
		Inputs map[string]json.RawMessage `json:"inputs"`
	}
	if err := json.Unmarshal([]byte(metafile), &meta); err != nil {
		return nil, errs.New(errs.Internal, "reading the bundle's metafile: %v", err)
	}
	uses := []string{entry}
	for p := range meta.Inputs {
		if p = filepath.ToSlash(p); p != entry {
			uses = append(uses, p)
		}
	}
	slices.Sort(uses[1:])
	return uses, nil
}

// confined refuses a build that read a file outside root: one reached by
// a path inside the folder that is a symbolic link to elsewhere.
func confined(root, entry string, uses []string) error {
	for _, u := range uses {
		p := filepath.Join(root, filepath.FromSlash(u))
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			real = p
		}
		if !inside(root, real) {
			return errs.New(errs.Invalid, "%s: %s", entry, outsideHint(u, real))
		}
	}
	return nil
}

// wordMissing words esbuild's own "Could not resolve" of a path, which
// the plugin left to it, as the plugin words a missing module.
func wordMissing(msgs []api.Message, root string) []api.Message {
	for i, m := range msgs {
		if p, ok := strings.CutPrefix(m.Text, "Could not resolve \""); ok {
			if p, _, ok := strings.Cut(p, "\""); ok {
				msgs[i].Text = missingHint(p, root)
				msgs[i].PluginName = "app-folder"
			}
		}
	}
	return msgs
}

// bundleError is the refusal of a module that does not bundle, worded
// as the server words a compile error.
func bundleError(name string, msgs []api.Message) error {
	if msgs[0].PluginName != "" {
		// confine's refusals already say what to do.
		return errs.New(errs.Invalid, "%v", jsvm.NewCompileError(name, msgs))
	}
	return errs.New(errs.Invalid, "%v; fix it and deploy again (the live version stays)", jsvm.NewCompileError(name, msgs))
}
