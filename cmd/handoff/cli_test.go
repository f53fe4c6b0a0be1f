package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runIn runs a command line in process, with env as the whole environment.
func runIn(t *testing.T, env map[string]string, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, strings.NewReader(stdin), &out, &errb, func(k string) string { return env[k] })
	return out.String(), errb.String(), code
}

func TestParseKey(t *testing.T) {
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
