package jstest

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteResult prints one test's line, and for a failure why and where,
// with what the test printed.
func WriteResult(w io.Writer, r Result) {
	took := fmt.Sprintf("%.2fs", r.Elapsed.Seconds())
	if r.Virtual >= time.Second {
		took += ", " + r.Virtual.Round(time.Second).String() + " virtual"
	}
	if r.OK {
		fmt.Fprintf(w, "ok    %s › %s (%s)\n", r.File, r.Name, took)
		return
	}
	fmt.Fprintf(w, "FAIL  %s › %s (%s)\n", r.File, r.Name, took)
	for _, line := range strings.Split(r.Message, "\n") {
		fmt.Fprintf(w, "      %s\n", line)
	}
	if r.At != "" {
		fmt.Fprintf(w, "      at %s\n", r.At)
	}
	for i, line := range strings.Split(r.Stack, "\n") {
		if line == "" || i == 0 && r.At != "" && strings.Contains(line, r.At) {
			continue // the line above already says it
		}
		fmt.Fprintf(w, "      %s\n", line)
	}
	writeHandlerErrors(w, r)
	for _, line := range r.Console {
		fmt.Fprintf(w, "      console: %s\n", line)
	}
	writeLogs(w, r)
}

// WriteSummary prints the counts and the transition table.
func WriteSummary(w io.Writer, rep *Report, against string) {
	fmt.Fprintf(w, "\n%d passed, %d failed in %.2fs\n", rep.Passed, rep.Failed, rep.Elapsed.Seconds())
	c := rep.Coverage
	if c == nil || len(c.Edges) == 0 && len(c.Untested) == 0 {
		return
	}
	fmt.Fprintf(w, "\ntransitions of %q the tests committed and saw refused:\n", c.Field)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  db\tfrom\t\tto\tcommitted\trefused")
	for _, e := range c.Edges {
		fmt.Fprintf(tw, "  %s\t%s\t→\t%s\t%d\t%d\n", e.DB, e.From, e.To, e.Committed, e.Refused)
	}
	_ = tw.Flush()
	if against == "" {
		return
	}
	if len(c.Untested) == 0 {
		fmt.Fprintf(w, "\nevery transition of %q in %s's history is committed by a test\n", c.Field, against)
		return
	}
	fmt.Fprintf(w, "\ntransitions of %q that %s took and no test committed:\n", c.Field, against)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range c.Untested {
		fmt.Fprintf(tw, "  %s\t%s\t→\t%s\n", t.DB, t.From, t.To)
	}
	_ = tw.Flush()
}

// JSON lines: one object per test as it ends ("test"), then one for the
// run ("summary"), so a tool can follow a long run.

// WriteResultJSON prints a test's line.
func WriteResultJSON(w io.Writer, r Result) error {
	return json.NewEncoder(w).Encode(struct {
		Type string `json:"type"`
		Result
	}{"test", r})
}

// WriteSummaryJSON prints the run's line.
func WriteSummaryJSON(w io.Writer, rep *Report) error {
	return json.NewEncoder(w).Encode(struct {
		Type     string        `json:"type"`
		Passed   int           `json:"passed"`
		Failed   int           `json:"failed"`
		Elapsed  time.Duration `json:"elapsedNs"`
		Coverage *Coverage     `json:"coverage"`
	}{"summary", rep.Passed, rep.Failed, rep.Elapsed, rep.Coverage})
}
