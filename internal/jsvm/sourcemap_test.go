package jsvm

import (
	"slices"
	"strings"
	"testing"

	"github.com/evanw/esbuild/pkg/api"

	"github.com/handoff-run/handoff/internal/apptest"
)

// bundle bundles the backend.js of a folder of files into one ES module
// with an inline source map, as a client that bundles its own code
// might: with none of the limits of `handoff deploy`.
func bundle(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := apptest.Folder(t, files)
	res := api.Build(api.BuildOptions{
		Stdin:         &api.StdinOptions{Contents: files["backend.js"], ResolveDir: dir, Sourcefile: "backend.js"},
		AbsWorkingDir: dir, Bundle: true, Format: api.FormatESModule, Sourcemap: api.SourceMapInline,
	})
	if len(res.Errors) > 0 {
		t.Fatalf("bundle: %v", res.Errors)
	}
	return string(res.OutputFiles[0].Contents)
}

func TestBundleSourcesAreTheUsersFiles(t *testing.T) {
	code := bundle(t, map[string]string{
		"backend.js":  "import { f } from \"./lib/f.js\";\nexport function onChange() { return f(); }\n",
		"lib/f.js":    "export function f() { return 1; }\n",
		"unused.js":   "export const x = 1;\n",
		"lib/note.md": "not code",
	})
	p, err := Compile("backend.js", code)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Sources(); !slices.Equal(got, []string{"lib/f.js", "backend.js"}) {
		t.Fatalf("sources %q", got)
	}
	p, err = Compile("access.js", "export default function () {}\n")
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Sources(); !slices.Equal(got, []string{"access.js"}) {
		t.Fatalf("sources of a plain module %q", got)
	}
}

// TestCompileErrorInABundleNamesTheModule: a bundle made elsewhere may
// hold syntax the runtime cannot run; the refusal points into the module
// it came from, through the bundle's source map.
func TestCompileErrorInABundleNamesTheModule(t *testing.T) {
	code := bundle(t, map[string]string{
		"backend.js":  "import { ready } from \"./lib/boot.js\";\nexport function onChange() { return ready; }\n",
		"lib/boot.js": "// Waits for nothing, at the top level.\nexport const ready = await Promise.resolve(true);\n",
	})
	_, err := Compile("backend.js", code)
	ce, ok := err.(*CompileError)
	if !ok || ce.File != "lib/boot.js" || ce.Line != 2 || !strings.Contains(ce.Message, "await") {
		t.Fatalf("got %#v (%v)", err, err)
	}
}
