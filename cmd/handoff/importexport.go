package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/handoff-run/handoff/client"
	"github.com/handoff-run/handoff/errs"
)

// Import batches: at most this many documents or bytes per bulk request.
// A batch the server finds too large is split in halves and retried.
const (
	defaultImportBatch = 500
	maxImportBatchSize = 8 << 20
	// maxLineErrors is how many failed lines are reported one by one; the
	// rest are only counted (a wrong credential fails every line alike).
	maxLineErrors = 100
)

func (c *cli) dbImportCmd() *cobra.Command {
	var (
		f        dbFlags
		ifAbsent bool
		batch    int
	)
	cmd := &cobra.Command{
		Use:   "import --app A --db D FILE|- [--if-absent]",
		Short: "Write the documents of an NDJSON file (one JSON object per line)",
		Long: `Write every line of an NDJSON file (or stdin with -) as a document, in
batches. Each line is a JSON object; its _id is kept (else one is minted)
and a _rev is ignored, so the output of 'db export' imports as it is.
--if-absent skips documents whose id already exists, which makes a
re-run of the same import a no-op; every line then needs an _id (a line
without one fails, since a minted id is new each time).

Lines that fail are reported on stderr with their line number, and the
others are still written. The counts go to stdout as JSON; the exit code
is 1 when any line failed.

Ctrl-C (or SIGTERM) stops the import: the counts so far are printed with
"stopped":true, and stderr says how many documents were written; the same
import again with --if-absent skips those and writes the rest.`,
		Args: exactArgs(1, "FILE|-"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			app, err := f.app.value()
			if err != nil {
				return err
			}
			if batch < 1 || batch > client.MaxBulkDocs {
				return usageError{fmt.Sprintf("--batch must be 1 to %d", client.MaxBulkDocs)}
			}
			in, size, closeIn, err := c.openInput(args[0])
			if err != nil {
				return err
			}
			defer closeIn()
			im := &importer{
				cl:  c.client().WithPathLabel("import"),
				app: app, db: f.db, opts: client.BulkOptions{IfAbsent: ifAbsent},
				batch: batch, stderr: c.stderr,
			}
			if isTerminal(c.stderr) {
				im.bar = progressbar.NewOptions64(size,
					progressbar.OptionSetWriter(c.stderr),
					progressbar.OptionSetDescription("importing"),
					progressbar.OptionShowBytes(true),
					progressbar.OptionClearOnFinish(),
					progressbar.OptionThrottle(100_000_000))
			}
			err = im.run(cmd.Context(), in)
			var stop stoppedImport
			if err != nil && !errors.As(err, &stop) {
				return err
			}
			sum := importSummary{OK: im.failed == 0 && err == nil, Docs: im.docs, Written: im.written, Existing: im.existing, Failed: im.failed, Stopped: err != nil}
			if err := c.printJSON(sum); err != nil {
				return err
			}
			if err != nil {
				return err
			}
			if im.failed > 0 {
				if im.failed > maxLineErrors {
					fmt.Fprintf(c.stderr, "(%d more failed lines not shown)\n", im.failed-maxLineErrors)
				}
				if ok := im.written + im.existing; ok > 0 {
					fmt.Fprintf(c.stderr, "%d of %d documents failed (see above); the other %d were written or already there\n", im.failed, im.docs, ok)
				} else {
					fmt.Fprintf(c.stderr, "all %d documents failed (see above)\n", im.docs)
				}
				// Every line failed for one reason (no credential, not a
				// member): exit as that error would; otherwise 1.
				if im.written+im.existing == 0 && len(im.codes) == 1 {
					for code := range im.codes {
						return exitCode(errs.ExitCode(code))
					}
				}
				return exitCode(1)
			}
			return nil
		}),
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&ifAbsent, "if-absent", false, "skip documents whose id already exists")
	cmd.Flags().IntVar(&batch, "batch", defaultImportBatch, "documents per bulk request")
	return cmd
}

type importSummary struct {
	OK       bool `json:"ok"`
	Docs     int  `json:"docs"`
	Written  int  `json:"written"`
	Existing int  `json:"existing"`
	Failed   int  `json:"failed"`
	// Stopped is set when Ctrl-C or SIGTERM ended the import early.
	Stopped bool `json:"stopped,omitempty"`
}

// openInput opens FILE, or stdin for "-"; size is -1 when unknown.
func (c *cli) openInput(name string) (io.Reader, int64, func(), error) {
	if name == "-" {
		return c.stdin, -1, func() {}, nil
	}
	fh, err := os.Open(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil, errs.New(errs.NotFound, "file %s does not exist", name)
	}
	if err != nil {
		return nil, 0, nil, errs.New(errs.Invalid, "cannot open %s: %v", name, err)
	}
	size := int64(-1)
	if st, err := fh.Stat(); err == nil && st.Mode().IsRegular() {
		size = st.Size()
	}
	return fh, size, func() { fh.Close() }, nil
}

// importer reads NDJSON and writes it through the bulk route.
type importer struct {
	cl      *client.Client
	app, db string
	opts    client.BulkOptions
	batch   int
	stderr  io.Writer
	bar     *progressbar.ProgressBar

	pending      []importLine
	pendingBytes int

	docs, written, existing, failed int
	codes                           map[errs.Code]bool // codes of the failed lines
	// inFlight is how many documents the request a stop cut off carried:
	// the server may have written them or not.
	inFlight int
}

type importLine struct {
	n   int // 1-based line number
	doc json.RawMessage
}

// readLine is one line of the input, or the error that ended it.
type readLine struct {
	b   []byte
	err error
}

func (im *importer) run(ctx context.Context, in io.Reader) error {
	// The input is read apart, so that Ctrl-C stops an import that waits
	// on a slow pipe or a terminal as promptly as one that waits on the
	// server.
	lines := make(chan readLine, 64)
	go func() {
		r := bufio.NewReaderSize(in, 1<<16)
		for {
			line, err := r.ReadBytes('\n')
			select {
			case lines <- readLine{line, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	for n := 1; ; n++ {
		var l readLine
		select {
		case l = <-lines:
		case <-ctx.Done():
			return im.stopped(ctx, n, nil)
		}
		if len(l.b) > 0 {
			if im.bar != nil {
				_ = im.bar.Add(len(l.b))
			}
			if err := im.line(ctx, n, l.b); err != nil {
				return im.stopped(ctx, n, err)
			}
		}
		if l.err == io.EOF {
			break
		}
		if l.err != nil {
			return errs.New(errs.Invalid, "cannot read line %d of the input: %v", n, l.err)
		}
	}
	if err := im.flush(ctx); err != nil {
		return im.stopped(ctx, -1, err)
	}
	if im.bar != nil {
		_ = im.bar.Finish()
	}
	return nil
}

// stopped is the error of an import that ended before its input did:
// ctx ended (Ctrl-C, SIGTERM) while line n (-1: the last batch) was
// read or sent, or err stopped it. It says what was written, what may
// have been, and how to finish the job.
func (im *importer) stopped(ctx context.Context, n int, err error) error {
	if ctx.Err() == nil {
		return err
	}
	if im.bar != nil {
		_ = im.bar.Clear()
	}
	where := fmt.Sprintf("at line %d", n)
	if n < 0 {
		where = "at the last batch"
	}
	msg := fmt.Sprintf("the import was stopped %s: %d documents were written and %d were there already before the stop", where, im.written, im.existing)
	if im.failed > 0 {
		msg += fmt.Sprintf(", %d failed", im.failed)
	}
	if im.inFlight > 0 {
		msg += fmt.Sprintf("; the %d documents being sent may or may not be written", im.inFlight)
	}
	return stoppedImport{errs.New(errs.Unavailable, "%s; run the same import again with --if-absent to skip the documents already written", msg)}
}

// stoppedImport marks an import stopped part-way, whose counts are
// still printed.
type stoppedImport struct{ err error }

func (e stoppedImport) Error() string { return e.err.Error() }
func (e stoppedImport) Unwrap() error { return e.err }

func (im *importer) line(ctx context.Context, n int, line []byte) error {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return nil
	}
	im.docs++
	var raw json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		im.fail(n, "", &errs.Error{Code: errs.Invalid, Message: "not valid JSON: " + err.Error()})
		return nil
	}
	im.pending = append(im.pending, importLine{n: n, doc: raw})
	im.pendingBytes += len(raw)
	if len(im.pending) >= im.batch || im.pendingBytes >= maxImportBatchSize {
		return im.flush(ctx)
	}
	return nil
}

func (im *importer) flush(ctx context.Context) error {
	if len(im.pending) == 0 {
		return nil
	}
	err := im.send(ctx, im.pending)
	im.pending, im.pendingBytes = im.pending[:0], 0
	return err
}

// send writes one batch. A failure of the whole request stops the import
// (a wrong app, a missing credential, a server gone) except too_large,
// which splits the batch until the offending document stands alone.
func (im *importer) send(ctx context.Context, lines []importLine) error {
	docs := make([]json.RawMessage, len(lines))
	for i, l := range lines {
		docs[i] = l.doc
	}
	im.inFlight = len(docs)
	res, err := im.cl.Bulk(ctx, im.app, im.db, docs, im.opts)
	if err == nil || ctx.Err() == nil {
		im.inFlight = 0
	}
	if errs.Is(err, errs.TooLarge) {
		if len(lines) == 1 {
			im.fail(lines[0].n, bodyID(lines[0].doc), err)
			return nil
		}
		half := len(lines) / 2
		if err := im.send(ctx, lines[:half]); err != nil {
			return err
		}
		return im.send(ctx, lines[half:])
	}
	if err != nil {
		return err
	}
	for i, r := range res {
		switch {
		case r.OK && r.Existing:
			im.existing++
		case r.OK:
			im.written++
		default:
			e := r.Error
			if e == nil {
				e = errs.New(errs.Internal, "the server reported a failure without an error")
			}
			id := r.ID
			if id == "" {
				id = bodyID(lines[i].doc)
			}
			im.fail(lines[i].n, id, e)
		}
	}
	return nil
}

func (im *importer) fail(n int, id string, err error) {
	im.failed++
	if im.codes == nil {
		im.codes = map[errs.Code]bool{}
	}
	im.codes[errs.CodeOf(err)] = true
	if im.failed > maxLineErrors {
		return
	}
	if im.bar != nil {
		_ = im.bar.Clear()
	}
	msg := err.Error()
	var e *errs.Error
	if errors.As(err, &e) {
		msg = e.Message
	}
	where := fmt.Sprintf("line %d", n)
	if id != "" {
		where += fmt.Sprintf(" (id %q)", id)
	}
	fmt.Fprintf(im.stderr, "error: %s: %s: %s\n", errs.CodeOf(err), where, msg)
}

func (c *cli) dbExportCmd() *cobra.Command {
	var f dbFlags
	cmd := &cobra.Command{
		Use:   "export --app A --db D [FILE]",
		Short: "Write every live document of a database as NDJSON (to FILE or stdout)",
		Long: `Write every live document of a database, one JSON object per line with
its _id and _rev, ordered by id, to FILE (written whole, then renamed into
place) or to stdout. The export reads page after page: documents written
while it runs may or may not be in it. 'db import' reads it back.`,
		Args: cobra.RangeArgs(0, 1),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			app, err := f.app.value()
			if err != nil {
				return err
			}
			file := ""
			if len(args) == 1 && args[0] != "-" {
				file = args[0]
			}
			out := c.stdout
			var tmp *os.File
			if file != "" {
				tmp, err = os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*.tmp")
				if err != nil {
					return errs.New(errs.Invalid, "cannot write %s: %v", file, err)
				}
				defer func() {
					if tmp != nil {
						tmp.Close()
						os.Remove(tmp.Name())
					}
				}()
				out = tmp
			}
			var bar *progressbar.ProgressBar
			if isTerminal(c.stderr) {
				bar = progressbar.NewOptions(-1,
					progressbar.OptionSetWriter(c.stderr),
					progressbar.OptionSetDescription("exporting"),
					progressbar.OptionShowCount(),
					progressbar.OptionClearOnFinish(),
					progressbar.OptionThrottle(100_000_000))
			}
			w := bufio.NewWriterSize(out, 1<<16)
			n, err := exportDocs(cmd.Context(), c.client(), app, f.db, w, bar)
			if err != nil {
				return err
			}
			if n == 0 {
				if err := c.missingDB(cmd.Context(), app, f.db); err != nil {
					return err
				}
			}
			if err := w.Flush(); err != nil {
				return errs.New(errs.Internal, "cannot write the export: %v", err)
			}
			if bar != nil {
				_ = bar.Finish()
			}
			if tmp == nil {
				return nil
			}
			// CreateTemp makes the file 0600; an export is an ordinary file.
			if err := tmp.Chmod(0o644); err != nil {
				return errs.New(errs.Internal, "cannot write %s: %v", file, err)
			}
			if err := tmp.Sync(); err != nil {
				return errs.New(errs.Internal, "cannot write %s: %v", file, err)
			}
			if err := tmp.Close(); err != nil {
				return errs.New(errs.Internal, "cannot write %s: %v", file, err)
			}
			if err := os.Rename(tmp.Name(), file); err != nil {
				return errs.New(errs.Internal, "cannot write %s: %v", file, err)
			}
			tmp = nil
			return c.printJSON(struct {
				OK   bool   `json:"ok"`
				Docs int    `json:"docs"`
				File string `json:"file"`
			}{true, n, file})
		}),
	}
	f.register(cmd, true)
	return cmd
}

// exportDocs writes every live document of db to w, one per line, page by
// page through Scan.
func exportDocs(ctx context.Context, cl *client.Client, app, db string, w io.Writer, bar *progressbar.ProgressBar) (int, error) {
	n := 0
	after := ""
	for {
		p, err := cl.Scan(ctx, app, db, pageSize, after)
		if err != nil {
			return n, err
		}
		for _, d := range p.Docs {
			if err := writeLine(w, d); err != nil {
				return n, errs.New(errs.Internal, "cannot write the export: %v", err)
			}
		}
		n += len(p.Docs)
		if bar != nil {
			_ = bar.Add(len(p.Docs))
		}
		if p.Next == "" {
			return n, nil
		}
		after = p.Next
	}
}
