package jobs_test

import (
	"html"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// patternAttr finds an input's pattern attribute in HTML, or in a page
// built by a script.
var patternAttr = regexp.MustCompile(`\spattern\s*=\s*(?:"([^"]*)"|'([^']*)')`)

// TestShippedPatternsCompileWithTheVFlag: browsers compile an input's
// pattern as ^(?:pattern)$ with the v flag, where a bare "-" at the end
// of a class is a syntax error; the browser then ignores the pattern and
// logs an error to the console. Every page the project serves (the
// examples, the starter app, the console and client) must compile.
func TestShippedPatternsCompileWithTheVFlag(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("skipping: node is not installed, and it is what compiles the patterns as a browser does; install Node.js to run this test")
	}
	root := filepath.Join("..", "..")
	var found int
	for _, dir := range []string{"examples", filepath.Join("cmd", "handoff", "starter"), filepath.Join("internal", "server", "web", "assets")} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				if d != nil && d.Name() == "node_modules" {
					return filepath.SkipDir
				}
				return err
			}
			if ext := filepath.Ext(p); ext != ".html" && ext != ".htm" && ext != ".js" {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range patternAttr.FindAllStringSubmatch(string(b), -1) {
				found++
				pattern := html.UnescapeString(m[1] + m[2])
				out, err := exec.Command(node, "-e", `new RegExp("^(?:" + process.argv[1] + ")$", "v")`, pattern).CombinedOutput()
				if err != nil {
					msg, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n    at ")
					t.Errorf("%s: pattern=%q does not compile with the v flag, so browsers ignore it: %s\n(escape a literal '-' in a class as \\-)", p, pattern, lastLine(msg))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if found == 0 {
		t.Fatal("no pattern attribute found; examples/jobs/public/index.html has one, so the walk is broken")
	}
}

func lastLine(s string) string {
	lines := strings.Split(s, "\n")
	return lines[len(lines)-1]
}
