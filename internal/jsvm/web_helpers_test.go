package jsvm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// webCase is a JavaScript expression and the JSON of what Node 20 gives
// for it (checked with node; HANDOFF_NODE=1 checks again where node is
// installed).
type webCase struct {
	expr string
	want string
}

// webPrelude is shared by the cases, here and under node.
const webPrelude = `
const err = (f) => { try { return f() } catch (e) { return "throws " + (e instanceof Error ? "Error " : "") + e.name + ": " + e.message + (e.code === undefined ? "" : " [" + e.code + "]") } }
const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("")
const tick = () => new Promise((resolve) => Promise.resolve().then(() => Promise.resolve()).then(resolve))
`

func webModule(cases []webCase) string {
	var b strings.Builder
	b.WriteString(webPrelude)
	for i, c := range cases {
		fmt.Fprintf(&b, "export async function c%d() { return (%s) }\n", i, c.expr)
	}
	return b.String()
}

// webOptions gives the test pools the web API, as access.js has it.
func webOptions(o Options) Options {
	o.Setup = func(vm *VM) error { return InstallWeb(vm, WebOptions{}) }
	return o
}

// runWebCases runs each case in a runtime with the web API and compares
// its JSON with Node's.
func runWebCases(t *testing.T, cases []webCase) {
	t.Helper()
	runHandoffCases(t, cases)
	if os.Getenv("HANDOFF_NODE") != "" {
		checkWithNode(t, cases)
	}
}

// runHandoffCases is runWebCases for answers that are handoff's own,
// where Node's differ (it ends the process on an uncaught error).
func runHandoffCases(t *testing.T, cases []webCase) {
	t.Helper()
	p := newTestPool(t, "web.js", webModule(cases), webOptions(Options{}))
	for i, c := range cases {
		got, err := callJSON(t, p, fmt.Sprintf("c%d", i))
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s\n got  %s\n want %s", c.expr, got, c.want)
		}
	}
}

// checkWithNode runs the cases in node and compares with want, to keep
// the hard-coded answers honest.
func checkWithNode(t *testing.T, cases []webCase) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("node is not installed")
	}
	dir := t.TempDir()
	src := webModule(cases) + fmt.Sprintf(`
const out = []
for (let i = 0; i < %d; i++) out.push(JSON.stringify(await eval("c" + i)()) ?? null)
console.log(JSON.stringify(out))
`, len(cases))
	file := filepath.Join(dir, "cases.mjs")
	if err := os.WriteFile(file, []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(node, file).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got []*string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("node said %s: %v", out, err)
	}
	for i, c := range cases {
		g := "undefined"
		if got[i] != nil {
			g = *got[i]
		}
		if g != c.want {
			t.Errorf("node: %s\n node %s\n want %s", c.expr, g, c.want)
		}
	}
}

// webValue runs export and returns its JSON, or the error.
func webValue(p *Pool, export string) (string, error) {
	var out string
	err := p.Call(context.Background(), export, nil, func(vm *VM, v goja.Value) error {
		b, err := vm.ToJSON(v)
		out = string(b)
		return err
	})
	return out, err
}
