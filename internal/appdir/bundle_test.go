package appdir

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dop251/goja"

	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/apptest"
	"github.com/handoff-run/handoff/internal/jsvm"
)

// label is a small app: backend.js uses a helper module and a vendored
// package (CommonJS, as many on npm are).
var label = map[string]string{
	"backend.js": `import { shout } from "./lib/text.js";
import wrap from "brackets";

export async function onChange(event) {
  return wrap(shout(event.docId));
}
`,
	"lib/text.js": `// Upper-cases a name; throws on an empty one.
export function shout(s) {
  if (!s) {
    throw new Error("nothing to shout");
  }
  return s.toUpperCase();
}
`,
	"node_modules/brackets/package.json": `{"name": "brackets", "main": "index.js"}`,
	"node_modules/brackets/index.js":     `module.exports = function (s) { return "[" + s + "]"; };`,
}

// run compiles code as the server does and calls onChange({docId}).
func run(t *testing.T, code, docID string) (any, error) {
	t.Helper()
	prog, err := jsvm.Compile(BackendFile, code)
	if err != nil {
		t.Fatal(err)
	}
	pool, err := jsvm.NewPool(prog, jsvm.Options{Size: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var out any
	err = pool.Do(context.Background(), jsvm.Call{
		Export: "onChange",
		Args: func(vm *jsvm.VM) ([]goja.Value, error) {
			o := vm.NewObject()
			return []goja.Value{o}, o.Set("docId", docID)
		},
		Result: func(vm *jsvm.VM, v goja.Value) error { out = v.Export(); return nil },
	})
	return out, err
}

func TestBundleFollowsImports(t *testing.T) {
	dir := t.TempDir()
	apptest.Write(t, dir, label)
	m, err := Bundle(dir, BackendFile)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"backend.js", "lib/text.js", "node_modules/brackets/index.js"}
	if !slices.Equal(m.Uses, want) {
		t.Errorf("uses %q, want %q", m.Uses, want)
	}
	if strings.Contains(m.Code, "import ") || !strings.Contains(m.Code, "// lib/text.js") {
		t.Errorf("not one readable module:\n%s", m.Code)
	}
	if out, err := run(t, m.Code, "job1"); err != nil || out != "[JOB1]" {
		t.Fatalf("onChange: %v, %v", out, err)
	}
	// A throw in the helper names the helper's own file and line, through
	// the bundle's source map and the server's.
	_, err = run(t, m.Code, "")
	if err == nil || !strings.HasPrefix(err.Error(), "lib/text.js:4:") || !strings.Contains(err.Error(), "nothing to shout") {
		t.Fatalf("throw in a module: %v", err)
	}
}

func TestBundleLeavesASingleFileAsWritten(t *testing.T) {
	dir := t.TempDir()
	src := "// one file\nexport async function onChange(event) { return event.docId; }\n"
	apptest.Write(t, dir, map[string]string{BackendFile: src})
	m, err := Bundle(dir, BackendFile)
	if err != nil || m.Code != src || !slices.Equal(m.Uses, []string{BackendFile}) {
		t.Fatalf("got %+v, %v", m, err)
	}
}

func TestBundleRefuses(t *testing.T) {
	outside := t.TempDir()
	apptest.Write(t, outside, map[string]string{
		"secret.js":                      "export const key = 1;",
		"node_modules/leak/index.js":     "export default 1;",
		"node_modules/leak/package.json": `{"name": "leak", "main": "index.js"}`,
	})
	for _, c := range []struct {
		name  string
		files map[string]string
		want  []string // all in the error
	}{
		{"a path above the folder", map[string]string{
			"backend.js": "import { key } from \"./lib/a.js\";\nexport const config = {};",
			"lib/a.js":   "// reaches up\nexport { key } from \"../../secret.js\";"},
			[]string{"lib/a.js:2:", `cannot import "../../secret.js"`, "outside the app's folder"}},
		{"an absolute path", map[string]string{
			"backend.js": "import { key } from \"" + filepath.ToSlash(filepath.Join(outside, "secret.js")) + "\";\nexport const config = {};"},
			[]string{"backend.js:1:", "outside the app's folder"}},
		{"a package found above the folder", map[string]string{
			"backend.js": "\nimport leak from \"leak\";\nexport const config = {};"},
			[]string{"backend.js:2:", `cannot import "leak"`, "install it there"}},
		{"a missing file", map[string]string{
			"backend.js": "import { x } from \"./lib/nope.js\";\nexport const config = {};"},
			[]string{"backend.js:1:", `cannot import "./lib/nope.js"`, "no such file"}},
		{"a missing package", map[string]string{
			"backend.js": "import x from \"left-pad\";\nexport const config = {};"},
			[]string{"backend.js:1:", `cannot import "left-pad"`, "node_modules/"}},
		{"a syntax error in a module", map[string]string{
			"backend.js": "import { f } from \"./lib/f.js\";\nexport const config = {};",
			"lib/f.js":   "export function f() {\n  return 1 +;\n}"},
			[]string{"lib/f.js:2:"}},
		{"syntax the runtime cannot run, in a module", map[string]string{
			"backend.js": "import { f } from \"./lib/f.js\";\nexport const config = {};",
			"lib/f.js":   "export function f() {}\nawait f();"},
			[]string{"lib/f.js:2:"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			// The app's folder sits inside outside/, so that a package
			// there is what a lookup walking upwards would find.
			dir := filepath.Join(outside, strings.ReplaceAll(c.name, " ", "-"))
			apptest.Write(t, dir, c.files)
			_, err := Read(dir)
			if !errs.Is(err, errs.Invalid) {
				t.Fatalf("got %v, want invalid", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %q", err, w)
				}
			}
		})
	}
}

func TestBundleRefusesASymlinkOut(t *testing.T) {
	outside, dir := t.TempDir(), t.TempDir()
	apptest.Write(t, outside, map[string]string{"secret.js": "export const key = 1;"})
	apptest.Write(t, dir, map[string]string{"backend.js": "import { key } from \"./lib/key.js\";\nexport const config = {};"})
	os.MkdirAll(filepath.Join(dir, "lib"), 0o755)
	if err := os.Symlink(filepath.Join(outside, "secret.js"), filepath.Join(dir, "lib", "key.js")); err != nil {
		t.Skip(err)
	}
	_, err := Read(dir)
	if !errs.Is(err, errs.Invalid) || !strings.Contains(err.Error(), "backend.js:1:") || !strings.Contains(err.Error(), "outside the app's folder") {
		t.Fatalf("got %v", err)
	}
	// A link that stays inside the folder is fine.
	apptest.Write(t, dir, map[string]string{"lib/real.js": "export const key = 2;"})
	os.Remove(filepath.Join(dir, "lib", "key.js"))
	if err := os.Symlink(filepath.Join(dir, "lib", "real.js"), filepath.Join(dir, "lib", "key.js")); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(dir); err != nil {
		t.Fatal(err)
	}
}

// TestWatchSeesImports: an edit of an imported module, of a used file in
// node_modules/, or a module created for a missing import is a change.
func TestWatchSeesImports(t *testing.T) {
	dir := t.TempDir()
	apptest.Write(t, dir, label)
	c, err := Read(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"lib/text.js", "node_modules/brackets/index.js", "lib/new.js"} {
		before := stamp(dir, c.Uses)
		apptest.Write(t, dir, map[string]string{p: "// edited " + p})
		if stamp(dir, c.Uses) == before {
			t.Errorf("an edit of %s is not seen", p)
		}
	}
	// Files of node_modules/ that the code does not use are not watched.
	apptest.Write(t, dir, map[string]string{"node_modules/brackets/README.md": "unused"})
	os.Chtimes(filepath.Join(dir, "node_modules"), time.Unix(1, 0), time.Unix(1, 0))
	os.Chtimes(filepath.Join(dir, "node_modules", "brackets"), time.Unix(1, 0), time.Unix(1, 0))
	before := stamp(dir, c.Uses)
	apptest.Write(t, dir, map[string]string{"node_modules/brackets/README.md": "unused, edited"})
	os.Chtimes(filepath.Join(dir, "node_modules", "brackets"), time.Unix(1, 0), time.Unix(1, 0))
	if stamp(dir, c.Uses) != before {
		t.Error("an unused file in node_modules/ is watched")
	}
}

// BenchmarkBundleManyFilePackage bundles an app that imports the index of
// a package of 300 files with an exports map of 600 entries, the shape of
// date-fns: the folder's checks must not make each import cost a read of
// the package's package.json.
func BenchmarkBundleManyFilePackage(b *testing.B) {
	dir := b.TempDir()
	files := map[string]string{"backend.js": "import { f7 } from \"many\";\nexport function onChange() { return f7(); }"}
	index := ""
	exports := "{\".\": \"./index.js\""
	for i := range 300 {
		name := fmt.Sprintf("f%d", i)
		files["node_modules/many/"+name+".js"] = fmt.Sprintf("import { helper } from \"./helper.js\";\nexport function %s() { return helper(%d); }", name, i)
		index += fmt.Sprintf("export * from \"./%s.js\";\n", name)
		exports += fmt.Sprintf(", \"./%s\": \"./%s.js\", \"./%s.js\": \"./%s.js\"", name, name, name, name)
	}
	files["node_modules/many/helper.js"] = "export function helper(n) { return n; }"
	files["node_modules/many/index.js"] = index
	files["node_modules/many/package.json"] = `{"name": "many", "type": "module", "sideEffects": false, "exports": ` + exports + `}}`
	apptest.Write(b, dir, files)
	b.ResetTimer()
	for range b.N {
		if _, err := Bundle(dir, "backend.js"); err != nil {
			b.Fatal(err)
		}
	}
}
