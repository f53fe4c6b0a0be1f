package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/handoff-run/handoff/client"
	"github.com/handoff-run/handoff/errs"
	"github.com/handoff-run/handoff/internal/engine"
	"github.com/handoff-run/handoff/internal/suggest"
)

// version is set at build time with -ldflags "-X main.version=v1.2.3";
// otherwise the module version of the build, or "dev".
var version = ""

func versionString() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// cli holds what every command shares: the streams, the environment and
// the global flags. Keeping them here (not in os.*) lets tests run
// commands in process.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string

	root   *cobra.Command
	server string // --server
	token  string // --token
}

// run executes one command line and returns the process exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer, getenv func(string) string) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr, getenv: getenv}
	root := c.rootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return 0
	}
	return c.report(cmd, err)
}

func (c *cli) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "handoff",
		Short: "handoff: a document-status state machine server and its CLI",
		Long: `handoff keeps JSON documents whose status field walks a state machine.

'handoff serve' runs the server; the other commands talk to a server at
--server, $HANDOFF_SERVER, the one 'handoff login' stored, or
` + client.DefaultServer + `, with the token from --token or $HANDOFF_TOKEN, the
device credential in $HANDOFF_DEVICE (each request signed), or what 'handoff
login' stored for that server. Output is JSON on stdout; errors go to
stderr as "error: <code>: <message>".

Exit codes: 0 ok, 1 other error, 2 usage, 3 conflict,
4 forbidden or unauthorized, 5 not found.`,
		Version:       versionString(),
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	root.SetVersionTemplate("handoff {{.Version}}\n")
	root.CompletionOptions.HiddenDefaultCmd = true
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usageError{err.Error() + flagSuggestion(cmd, err)}
	})
	pf := root.PersistentFlags()
	pf.StringVar(&c.server, "server", "", "server URL (default $HANDOFF_SERVER, else "+client.DefaultServer+")")
	pf.StringVar(&c.token, "token", "", "bearer token (default $HANDOFF_TOKEN; else $HANDOFF_DEVICE signs each request, else the token handoff login stored for the server)")
	c.root = root

	root.AddCommand(c.serveCmd(), c.userCmd(), c.whoamiCmd(), c.appCmd(), c.dbCmd(), c.deployCmd(),
		c.logsCmd(), c.eventsCmd(), c.benchCmd(), c.migrateCmd(), c.testCmd(), c.initCmd())
	root.AddCommand(c.identityCmds()...)
	return root
}

// group returns a command that only holds subcommands: alone it prints
// its help; with an unknown subcommand it is a usage error (cobra would
// print the help and exit 0).
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	g := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cmd.Help()
		},
	}
	g.AddCommand(subs...)
	return g
}

// flagSuggestion is "; did you mean --NAME?" for an unknown flag that is
// a typo of one of cmd's, else "".
func flagSuggestion(cmd *cobra.Command, err error) string {
	typed, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return ""
	}
	typed, _, _ = strings.Cut(typed, "=")
	var names []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	})
	if near := closest(typed, names); near != "" {
		return fmt.Sprintf("; did you mean --%s?", near)
	}
	return ""
}

func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		if cmd.HasSubCommands() {
			msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
			if cmd.SuggestionsMinimumDistance <= 0 {
				cmd.SuggestionsMinimumDistance = 2 // cobra's own default
			}
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				// cobra lists them in command order: the nearest first, a
				// command the word begins nearest of all.
				score := func(name string) int {
					if strings.HasPrefix(name, strings.ToLower(args[0])) {
						return 0
					}
					return suggest.EditDistance(args[0], name)
				}
				slices.SortStableFunc(s, func(a, b string) int { return score(a) - score(b) })
				msg += fmt.Sprintf("; did you mean %q?", s[0])
			}
			return usageError{msg}
		}
		return usageError{fmt.Sprintf("%s takes no arguments, got %q", cmd.CommandPath(), args[0])}
	}
	return nil
}

// action wraps a command's work so that its failures are told apart from
// cobra's own parse errors, which are all usage errors (exit 2).
func action(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		var ue usageError
		var ex exitCode
		if err == nil || errors.As(err, &ue) || errors.As(err, &ex) {
			return err
		}
		return runError{err}
	}
}

// client returns an API client: --server, then $HANDOFF_SERVER, then the
// config file of `handoff login`, then the default; --token, then
// $HANDOFF_TOKEN, then $HANDOFF_DEVICE (requests signed with the device
// key), then the config file's credential if it was stored for that same
// server (identity.go).
func (c *cli) client() *client.Client {
	return c.newClient(c.credentials())
}

// appFlag is --app owner/name with its alias --vibe.
type appFlag struct{ app, vibe string }

func (a *appFlag) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&a.app, "app", "", "the app, owner/name")
	cmd.Flags().StringVar(&a.vibe, "vibe", "", "alias of --app")
}

// value returns the app, or a usage error when none (or two different
// ones) were given.
func (a *appFlag) value() (string, error) {
	switch {
	case a.app == "" && a.vibe == "":
		return "", usageError{"no app given; pass --app owner/name"}
	case a.app != "" && a.vibe != "" && a.app != a.vibe:
		return "", usageError{fmt.Sprintf("--app %q and --vibe %q name different apps; pass one", a.app, a.vibe)}
	}
	app := a.app
	if app == "" {
		app = a.vibe
	}
	return app, checkAppRef(app)
}

// optional is value for a command where the app may be left out.
func (a *appFlag) optional() (string, error) {
	if a.app == "" && a.vibe == "" {
		return "", nil
	}
	return a.value()
}

// checkAppRef refuses an app that is not owner/name before any request:
// "--app jobs" is a usage mistake, not a missing app.
func checkAppRef(app string) error {
	if _, _, err := engine.ParseAppRef(app); err != nil {
		_, name, _ := strings.Cut(app, "/")
		if name == "" {
			name = app
		}
		return usageError{fmt.Sprintf("%s; e.g. alice/%s, where alice is the owner (handoff app list shows yours)", err.(*errs.Error).Message, strings.ToLower(name))}
	}
	return nil
}

// report prints err in the contract's shape and returns the exit code.
func (c *cli) report(cmd *cobra.Command, err error) int {
	var ex exitCode
	if errors.As(err, &ex) {
		return int(ex)
	}
	var re runError
	if errors.As(err, &re) {
		code := errs.CodeOf(re.err)
		msg := re.err.Error()
		var e *errs.Error
		if errors.As(re.err, &e) {
			msg = e.Message
			if msg == "" {
				msg = e.Reason
			}
		}
		fmt.Fprintf(c.stderr, "error: %s: %s\n", code, msg)
		var h hinted
		if errors.As(re.err, &h) && h.hint != "" {
			fmt.Fprintf(c.stderr, "hint: %s\n", h.hint)
		}
		if code == errs.Unauthorized && (cmd == nil || cmd.Name() != "login") {
			c.hintNoCredential()
		}
		return errs.ExitCode(code)
	}
	// Anything else came from parsing the command line.
	fmt.Fprintf(c.stderr, "error: usage: %s\n", usageMessage(err))
	if cmd != nil {
		fmt.Fprintf(c.stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
	}
	return 2
}

// hintNoCredential explains a refusal of a command that sent no
// credential at all: often a login made for another server address.
func (c *cli) hintNoCredential() {
	cr := c.credentials()
	if cr.token != "" || cr.device != "" || cr.err != nil {
		return
	}
	server := cr.server
	if server == "" {
		server = client.DefaultServer
	}
	fmt.Fprintf(c.stderr, "hint: no credential was sent to %s; run `handoff login --server %s`, or set HANDOFF_TOKEN (a login counts only for the server address it was made for)\n", server, server)
}

func usageMessage(err error) string {
	var ue usageError
	if errors.As(err, &ue) {
		return ue.msg
	}
	return err.Error()
}

// usageError is a mistake in the command line: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// hinted is an error with a line of advice that report prints after it.
type hinted struct {
	err  error
	hint string
}

func (h hinted) Error() string { return h.err.Error() }
func (h hinted) Unwrap() error { return h.err }

// runError is a failure of a command's work; its code decides the exit.
type runError struct{ err error }

func (e runError) Error() string { return e.err.Error() }
func (e runError) Unwrap() error { return e.err }

// exitCode ends the command with that code after it printed its own
// errors (an import with failed lines).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }
