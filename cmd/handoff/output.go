package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"

	"golang.org/x/term"

	"github.com/handoff-run/handoff/errs"
)

// printJSON writes v as one line of JSON on stdout.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// writeLine writes one JSON document compactly on its own line (NDJSON).
func writeLine(w io.Writer, raw json.RawMessage) error {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		b.Reset()
		b.Write(raw)
	}
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// arrayWriter streams a JSON array with one element per line, so a long
// listing is still valid JSON and still easy to grep.
type arrayWriter struct {
	w io.Writer
	n int
}

func (a *arrayWriter) add(raw json.RawMessage) error {
	sep := ",\n"
	if a.n == 0 {
		sep = "[\n"
	}
	a.n++
	if _, err := io.WriteString(a.w, sep); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		b.Reset()
		b.Write(raw)
	}
	_, err := a.w.Write(b.Bytes())
	return err
}

func (a *arrayWriter) close() error {
	end := "\n]\n"
	if a.n == 0 {
		end = "[]\n"
	}
	_, err := io.WriteString(a.w, end)
	return err
}

// printArray prints a slice as a JSON array, one element per line.
func printArray[T any](w io.Writer, items []T) error {
	aw := &arrayWriter{w: w}
	for _, it := range items {
		raw, err := json.Marshal(it)
		if err != nil {
			return errs.New(errs.Internal, "cannot encode the output: %v", err)
		}
		if err := aw.add(raw); err != nil {
			return err
		}
	}
	return aw.close()
}

// isTerminal reports whether w is a terminal (for progress bars).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// readArg returns the argument itself, or all of stdin when it is "-".
func (c *cli) readArg(arg string) ([]byte, error) {
	if arg != "-" {
		return []byte(arg), nil
	}
	b, err := io.ReadAll(c.stdin)
	if err != nil {
		return nil, errs.New(errs.Invalid, "cannot read the document from standard input: %v", err)
	}
	return b, nil
}
