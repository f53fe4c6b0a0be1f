package main

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/handoff-run/handoff/internal/appdir"
	"github.com/handoff-run/handoff/internal/jstest"
)

func (c *cli) testCmd() *cobra.Command {
	var (
		runRE, field, against string
		jsonOut, watch        bool
		timeout               time.Duration
	)
	cmd := &cobra.Command{
		Use:   "test [DIR]",
		Short: "Run the app's *.test.js against the real engine on a virtual clock",
		Long: `Run the *.test.js files of the app folder DIR (default .), under test/ or
beside the code. Each test gets a fresh, in-process instance of the engine
with the folder's access.js and backend.js, on an embedded store in a
temporary folder and a virtual clock: t.advance("2m") plays two minutes of
leases, sweeps and retries in milliseconds. Nothing is served and nothing
leaves the machine (a handler's fetch is answered by t.stubFetch).

Prints a line per test, "N passed, N failed", and the transitions of
--field (default status) that the tests committed and saw refused. With
--against OWNER/NAME it also lists the transitions that app's history on
the server took and no test committed: the untested edges.
Exit code 1 when a test fails. See docs/testing.md for the test API.`,
		Args: optionalFolder,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			dir := "."
			if len(args) == 1 {
				dir = args[0]
			}
			o := jstest.Options{Dir: dir, Timeout: timeout, Field: field}
			if runRE != "" {
				re, err := regexp.Compile(runRE)
				if err != nil {
					return usageError{fmt.Sprintf("--run %q is not a regular expression: %v", runRE, err)}
				}
				o.Run = re
			}
			if o, n, ok := strings.Cut(against, "/"); against != "" && (!ok || o == "" || n == "") {
				return usageError{fmt.Sprintf("--against %q is not an app; pass owner/name", against)}
			}
			once := func(ctx context.Context) (bool, error) { return c.testOnce(ctx, o, against, jsonOut) }
			if !watch {
				ok, err := once(cmd.Context())
				if err != nil {
					return err
				}
				if !ok {
					return exitCode(1)
				}
				return nil
			}
			return c.testWatch(cmd.Context(), dir, once)
		}),
	}
	f := cmd.Flags()
	f.StringVar(&runRE, "run", "", "run only the tests whose \"file › name\" matches this regular expression")
	f.BoolVar(&jsonOut, "json", false, "print JSON lines: one per test, then a summary")
	f.BoolVar(&watch, "watch", false, "run again whenever a file of the folder changes")
	f.StringVar(&field, "field", "status", "the document field whose transitions are counted")
	f.StringVar(&against, "against", "", "compare with the transitions app OWNER/NAME took on the server")
	f.DurationVar(&timeout, "timeout", jstest.DefaultTimeout, "stop a test that runs longer than this in real time")
	return cmd
}

// testOnce runs the tests once and prints them; ok is false when a test
// failed.
func (c *cli) testOnce(ctx context.Context, o jstest.Options, against string, jsonOut bool) (bool, error) {
	o.OnResult = func(r jstest.Result) {
		if jsonOut {
			_ = jstest.WriteResultJSON(c.stdout, r)
		} else {
			jstest.WriteResult(c.stdout, r)
		}
	}
	rep, err := jstest.Run(ctx, o)
	if err != nil {
		return false, err
	}
	var history map[jstest.Transition]int
	if against != "" {
		if history, err = c.historyTransitions(ctx, against, rep.Coverage.Field); err != nil {
			return false, err
		}
	}
	rep.Coverage.Finish(history)
	if jsonOut {
		err = jstest.WriteSummaryJSON(c.stdout, rep)
	} else {
		jstest.WriteSummary(c.stdout, rep, against)
	}
	return rep.Failed == 0, err
}

// historyTransitions reads the whole ledger of app from the server.
func (c *cli) historyTransitions(ctx context.Context, app, field string) (map[jstest.Transition]int, error) {
	cl := c.client()
	var ledger []jstest.Rev
	var since int64
	for {
		page, err := cl.Changes(ctx, app, "", since, 1000)
		if err != nil {
			return nil, fmt.Errorf("reading the history of %s for --against: %w", app, err)
		}
		for _, e := range page.Changes {
			ledger = append(ledger, jstest.Rev{DB: e.DB, ID: e.ID, Deleted: e.Deleted, Doc: e.Doc})
		}
		if len(page.Changes) == 0 || page.Last == since {
			return jstest.Transitions(ledger, field), nil
		}
		since = page.Last
	}
}

// testWatch runs the tests, then again after every change in dir, until
// interrupted.
func (c *cli) testWatch(ctx context.Context, dir string, once func(context.Context) (bool, error)) error {
	changed := make(chan struct{}, 1)
	go appdir.Watch(ctx, dir, 300*time.Millisecond, "", func() []string { return nil }, func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	})
	for {
		if _, err := once(ctx); err != nil {
			fmt.Fprintf(c.stderr, "error: %v\n", err)
		}
		fmt.Fprintf(c.stderr, "watching %s for changes; Ctrl-C to stop\n", dir)
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
			fmt.Fprintln(c.stdout)
		}
	}
}
