package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runIn runs a command line in process, with env as the whole environment.
func runIn(t *testing.T, env map[string]string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return out.String(), errb.String(), code
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"running":     `"running"`,
		"3":           `3`,
		`"3"`:         `"3"`,
		"true":        `true`,
		"null":        `null`,
		"two words":   `"two words"`,
		"":            `""`,
		`{"a":1}`:     `{"a":1}`,
		" 42 ":        `42`,
		`say "hi"`:    `"say \"hi\""`,
		"[1,2":        `"[1,2"`,
		"a-job/with/": `"a-job/with/"`,
	} {
		if got := string(parseKey(in)); got != want {
			t.Errorf("parseKey(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	t.Parallel()
	// No server runs here: every one of these must fail before any request.
	env := map[string]string{"HANDOFF_SERVER": "http://127.0.0.1:1"}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"db", "put", "--app", "a/b", "--db", "d", "{}", "--frob"}, "unknown flag: --frob"},
		{[]string{"db", "put", "--db", "d", "{}"}, "no app given"},
		{[]string{"db", "put", "--app", "a/b", "{}"}, `"db" not set`},
		{[]string{"db", "put", "--app", "a/b", "--db", "d"}, "needs"},
		{[]string{"db", "get", "--app", "a/b", "--db", "d", "x", "y"}, "takes 1 argument"},
		{[]string{"db", "query", "--app", "a/b", "--db", "d", "--field", "status"}, `"key" not set`},
		{[]string{"db", "query", "--app", "a/b", "--db", "d", "--field", "f", "--key", "k", "--limit", "x"}, "invalid argument"},
		{[]string{"db", "get", "--app", "a/b", "--vibe", "c/d", "--db", "d", "x"}, "name different apps"},
		{[]string{"db", "frob"}, `unknown command "frob"`},
		{[]string{"frob"}, `unknown command "frob"`},
		{[]string{"app", "member", "add", "--app", "a/b", "bob"}, `"role" not set`},
		{[]string{"serve", "--postgres", "http://x"}, "--postgres"},
		{[]string{"serve", "--app", "a/b=./no-such-dir"}, "is not a folder"},
		{[]string{"serve", "--app", "A/b=."}, "owner/name"},
		{[]string{"db", "import", "--app", "a/b", "--db", "d", "f", "--batch", "0"}, "--batch"},
		{[]string{"db", "put", "--app", "a/b", "--db", "d", "--if-rev", "1-a", "{}"}, "--if-rev needs the document's id"},
		{[]string{"db", "put", "--app", "a/b", "--db", "d", "--id", "x", "--if-rev", "1-a", "--if-absent", "{}"}, "exclude each other"},
		{[]string{"db", "get", "--app", "jobs", "--db", "d", "x"}, `app "jobs" is not of the form owner/name`},
		{[]string{"db", "query", "--vibe", "jobs", "--db", "d", "--field", "f", "--key", "k"}, "e.g. alice/jobs"},
		{[]string{"db", "query", "--app", "a/b", "--db", "d", "--field", "f", "--key", "k", "--limit", "5000"}, "--limit must be 1 to 1000"},
		{[]string{"device", "add", "ci", "--vibe", "jobs"}, "owner/name"},
		{[]string{"app", "create", "Jobs"}, "e.g. alice/jobs"},
		{[]string{"events", "--app", "a/b", "--replay", "0"}, "--replay"},
		{[]string{"db", "qurey"}, `unknown command "qurey" for "handoff db"; did you mean "query"?`},
		{[]string{"usr", "add", "bob"}, `did you mean "user"?`},
		{[]string{"db", "lst"}, `did you mean "list"?`},
		{[]string{"app", "membr", "add"}, `did you mean "member"?`},
		{[]string{"app", "member", "remuve"}, `did you mean "remove"?`},
		{[]string{"wh"}, `did you mean "whoami"?`},
		{[]string{"db", "put", "--app", "a/b", "--db", "d", "--if-abset", "{}"}, "unknown flag: --if-abset; did you mean --if-absent?"},
	}
	for _, tc := range cases {
		out, errOut, code := runIn(t, env, "", tc.args...)
		if code != 2 {
			t.Errorf("%q: exit %d, want 2 (stderr %q)", tc.args, code, errOut)
		}
		if !strings.HasPrefix(errOut, "error: usage: ") || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: stderr %q, want error: usage: ...%s...", tc.args, errOut, tc.want)
		}
		if out != "" {
			t.Errorf("%q: stdout %q, want nothing", tc.args, out)
		}
	}
}

func TestVersionAndHelp(t *testing.T) {
	t.Parallel()
	out, _, code := runIn(t, nil, "", "--version")
	if code != 0 || !strings.HasPrefix(out, "handoff ") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
	out, _, code = runIn(t, nil, "", "db", "--help")
	if code != 0 || !strings.Contains(out, "query") {
		t.Errorf("db --help: exit %d, %q", code, out)
	}
	out, _, code = runIn(t, nil, "", "db", "query", "--help")
	if code != 0 || !strings.Contains(out, "--vibe") {
		t.Errorf("db query --help does not list --vibe: %q", out)
	}
}

func TestUnreachableServerIsReported(t *testing.T) {
	t.Parallel()
	env := map[string]string{"HANDOFF_SERVER": "http://127.0.0.1:1", "HANDOFF_TOKEN": "t"}
	_, errOut, code := runIn(t, env, "", "app", "list")
	if code != 1 || !strings.HasPrefix(errOut, "error: unavailable: ") ||
		!strings.Contains(errOut, "http://127.0.0.1:1") || !strings.Contains(errOut, "handoff serve") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
	// --server wins over HANDOFF_SERVER.
	_, errOut, _ = runIn(t, env, "", "--server", "127.0.0.1:2", "app", "list")
	if !strings.Contains(errOut, "http://127.0.0.1:2") {
		t.Errorf("--server was not used: %q", errOut)
	}
}

// TestServeOnABusyAddress: a start that cannot listen fails with a clear
// error before it creates anything in the data directory.
func TestServeOnABusyAddress(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	data := filepath.Join(t.TempDir(), "data")
	_, stderr, code := runIn(t, nil, "", "serve", "--data", data, "--addr", ln.Addr().String())
	if code == 0 || !strings.Contains(stderr, "cannot listen on "+ln.Addr().String()) || !strings.Contains(stderr, "--addr") {
		t.Fatalf("serve on a busy address: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("the failed start left %s behind (%v)", data, err)
	}
}

// TestEveryAppFlagHasVibe: --vibe is the alias of --app on every command
// that takes an app (docs/architecture.md, "The CLI contract"), and nowhere else.
func TestEveryAppFlagHasVibe(t *testing.T) {
	t.Parallel()
	c := &cli{getenv: func(string) string { return "" }}
	var walk func(cmd *cobra.Command)
	n := 0
	walk = func(cmd *cobra.Command) {
		app, vibe := cmd.Flags().Lookup("app"), cmd.Flags().Lookup("vibe")
		switch {
		case app != nil && vibe == nil:
			t.Errorf("%s takes --app but not --vibe", cmd.CommandPath())
		case app == nil && vibe != nil:
			t.Errorf("%s takes --vibe but not --app", cmd.CommandPath())
		case app != nil && vibe.Value.Type() != app.Value.Type():
			t.Errorf("%s: --vibe is a %s, --app a %s", cmd.CommandPath(), vibe.Value.Type(), app.Value.Type())
		case app != nil:
			n++
		}
		for _, sub := range cmd.Commands() {
			walk(sub)
		}
	}
	walk(c.rootCmd())
	if n < 15 {
		t.Fatalf("only %d commands take --app: the walk missed some", n)
	}
}

// TestLoginHelpNamesTheConfigFile: the help shows where the file is, as
// the command would resolve it.
func TestLoginHelpNamesTheConfigFile(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	out, _, code := runIn(t, map[string]string{"HOME": home}, "", "login", "--help")
	if want := filepath.Join(home, ".config", "handoff", "config.json"); code != 0 || !strings.Contains(out, want) || strings.Contains(out, "UserConfigDir") {
		t.Fatalf("login --help: exit %d, want %s in\n%s", code, want, out)
	}
	out, _, _ = runIn(t, map[string]string{"HOME": home, "XDG_CONFIG_HOME": "/etc/xdg-test"}, "", "login", "--help")
	if !strings.Contains(out, "/etc/xdg-test/handoff/config.json") {
		t.Fatalf("login --help ignores XDG_CONFIG_HOME:\n%s", out)
	}
}

func TestClosest(t *testing.T) {
	t.Parallel()
	names := []string{"jobs", "logs", "bob", "alice", "admin"}
	for typed, want := range map[string]string{
		"jbos": "jobs", "job": "jobs", "Jobs": "jobs", "bbo": "bob", "alcie": "alice",
		"jobs": "", "x": "", "zzzz": "", "ab": "",
	} {
		if got := closest(typed, names); got != want {
			t.Errorf("closest(%q) = %q, want %q", typed, got, want)
		}
	}
}
