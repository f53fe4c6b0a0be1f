package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/handoff-run/handoff/client"
	"github.com/handoff-run/handoff/errs"
)

// pageSize is how many documents or changes the CLI asks for per request
// when it reads everything (export, changes): the server's maximum.
const pageSize = 1000

func (c *cli) dbCmd() *cobra.Command {
	return group("db", "Read and write documents",
		c.dbPutCmd(), c.dbGetCmd(), c.dbDelCmd(), c.dbQueryCmd(), c.dbListCmd(),
		c.dbChangesCmd(), c.dbImportCmd(), c.dbExportCmd())
}

// dbFlags are --app (--vibe) and --db, shared by the document commands.
type dbFlags struct {
	app appFlag
	db  string
}

func (f *dbFlags) register(cmd *cobra.Command, dbRequired bool) {
	f.app.register(cmd)
	cmd.Flags().StringVar(&f.db, "db", "", "the database")
	if dbRequired {
		_ = cmd.MarkFlagRequired("db")
	}
}

// writeOutput is what db put and db del print.
type writeOutput struct {
	ID       string `json:"id"`
	Rev      string `json:"rev"`
	OK       bool   `json:"ok"`
	Existing bool   `json:"existing,omitempty"`
}

func (c *cli) dbPutCmd() *cobra.Command {
	var (
		f        dbFlags
		id       string
		ifRev    string
		ifAbsent bool
	)
	cmd := &cobra.Command{
		Use:   "put --app A --db D '{json}'|- [--id ID] [--if-rev REV] [--if-absent]",
		Short: "Write a document (from the argument, or stdin with -)",
		Long: `Write a document. The id comes from --id, else the body's _id, else the
server mints one. --if-rev commits only if the document is still at that
revision (else exit 3, conflict); --if-absent creates it only if it does
not exist (an existing one is reported with "existing":true).`,
		Example: `  handoff db put --app alice/jobs --db jobs '{"_id":"job-1","status":"pending"}'
  echo '{"status":"running"}' | handoff db put --app alice/jobs --db jobs --id job-1 --if-rev 1-ab12... -`,
		Args: exactArgs(1, "'{json}'|-"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			app, err := f.app.value()
			if err != nil {
				return err
			}
			if err := checkIfRev(cmd, ifRev); err != nil {
				return err
			}
			if ifRev != "" && ifAbsent {
				return usageError{"--if-rev and --if-absent exclude each other: --if-rev updates the document at that revision, --if-absent only creates one; pass one"}
			}
			body, err := c.readArg(args[0])
			if err != nil {
				return err
			}
			if id == "" {
				id = bodyID(body)
			}
			if ifAbsent && id == "" {
				return usageError{"--if-absent needs an id (--id, or an _id in the body): without one every run mints a new document"}
			}
			if ifRev != "" && id == "" {
				return usageError{"--if-rev needs the document's id (--id, or an _id in the body): a revision belongs to one document"}
			}
			res, err := c.client().Put(cmd.Context(), app, f.db, id, body, client.PutOptions{IfRev: ifRev, IfAbsent: ifAbsent})
			if err != nil {
				return err
			}
			return c.printJSON(writeOutput{ID: res.ID, Rev: res.Rev, OK: true, Existing: res.Existing})
		}),
	}
	f.register(cmd, true)
	cmd.Flags().StringVar(&id, "id", "", "the document id (default: the body's _id, else minted)")
	cmd.Flags().StringVar(&ifRev, "if-rev", "", "commit only if the document is at this revision")
	cmd.Flags().BoolVar(&ifAbsent, "if-absent", false, "create only; report an existing document instead of changing it")
	return cmd
}

// checkIfRev refuses an --if-rev given but empty: a script whose rev
// variable came back empty would otherwise write without the check.
func checkIfRev(cmd *cobra.Command, ifRev string) error {
	if cmd.Flags().Changed("if-rev") && ifRev == "" {
		return usageError{"--if-rev is empty; pass the _rev you read (handoff db get prints it), or leave --if-rev out to write without a check"}
	}
	return nil
}

// bodyID is the _id of a JSON object body, "" if it has none (or is not
// an object: the server explains what is wrong with it).
func bodyID(body []byte) string {
	var v struct {
		ID any `json:"_id"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	s, _ := v.ID.(string)
	return s
}

func (c *cli) dbGetCmd() *cobra.Command {
	var (
		f       dbFlags
		history bool
	)
	cmd := &cobra.Command{
		Use:   "get --app A --db D ID [--history]",
		Short: "Read a document, or with --history every revision of it",
		Args:  exactArgs(1, "ID"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			app, err := f.app.value()
			if err != nil {
				return err
			}
			cl := c.client()
			if history {
				h, err := cl.History(cmd.Context(), app, f.db, args[0])
				if err != nil {
					return err
				}
				return printArray(c.stdout, h)
			}
			doc, err := cl.Get(cmd.Context(), app, f.db, args[0])
			if errs.Is(err, errs.NotFound) {
				return hinted{err, c.unknownDBHint(cmd.Context(), app, f.db)}
			}
			if err != nil {
				return err
			}
			return writeLine(c.stdout, doc)
		}),
	}
	f.register(cmd, true)
	cmd.Flags().BoolVar(&history, "history", false, "print every revision (the ledger), oldest first, deletions included")
	return cmd
}

func (c *cli) dbDelCmd() *cobra.Command {
	var (
		f     dbFlags
		ifRev string
	)
	cmd := &cobra.Command{
		Use:   "del --app A --db D ID [--if-rev REV]",
		Short: "Delete a document (its history stays in the ledger)",
		Args:  exactArgs(1, "ID"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			app, err := f.app.value()
			if err != nil {
				return err
			}
			if err := checkIfRev(cmd, ifRev); err != nil {
				return err
			}
			res, err := c.client().Delete(cmd.Context(), app, f.db, args[0], ifRev)
			if err != nil {
				return err
			}
			return c.printJSON(writeOutput{ID: res.ID, Rev: res.Rev, OK: true})
		}),
	}
	f.register(cmd, true)
	cmd.Flags().StringVar(&ifRev, "if-rev", "", "delete only if the document is at this revision")
	return cmd
}

// parseKey reads --key: a JSON value, or a bare word that is not valid
// JSON, taken as a string (--key running is "running", --key 3 is 3).
func parseKey(s string) json.RawMessage {
	t := bytes.TrimSpace([]byte(s))
	if len(t) > 0 && json.Valid(t) {
		return t
	}
	q, _ := json.Marshal(s)
	return q
}

func (c *cli) dbQueryCmd() *cobra.Command {
	var (
		f      dbFlags
		field  string
		key    string
		limit  int
		after  string
		ndjson bool
		all    bool
	)
	cmd := &cobra.Command{
		Use:   "query --app A --db D --field F --key K [--limit N] [--after CURSOR] [--ndjson] [--all]",
		Short: "List the documents whose field equals a value",
		Long: `List the live documents whose --field equals --key, by id. --key is a JSON
value; a bare word that is not valid JSON is a string (--key running is
"running", --key 3 is the number 3, --key '"3"' the string "3").

Prints a JSON array (or one document per line with --ndjson). When more
pages follow, "next: CURSOR" goes to stderr: pass it as --after, or use
--all to read every page.`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			app, err := f.app.value()
			if err != nil {
				return err
			}
			if limit < 0 || limit > pageSize {
				return usageError{fmt.Sprintf("--limit must be 1 to %d (0: the server's default); read more with --all", pageSize)}
			}
			cl := c.client()
			k := parseKey(key)
			var emit func(json.RawMessage) error
			var done func() error
			if ndjson {
				emit = func(d json.RawMessage) error { return writeLine(c.stdout, d) }
				done = func() error { return nil }
			} else {
				aw := &arrayWriter{w: c.stdout}
				emit, done = aw.add, aw.close
			}
			printed := 0
			for {
				p, err := cl.Query(cmd.Context(), app, f.db, field, k, limit, after)
				if err != nil {
					return err
				}
				for _, d := range p.Docs {
					if err := emit(d); err != nil {
						return err
					}
				}
				printed += len(p.Docs)
				if !all || p.Next == "" {
					if printed == 0 {
						if err := c.missingDB(cmd.Context(), app, f.db); err != nil {
							return err
						}
					}
					if err := done(); err != nil {
						return err
					}
					if p.Next != "" {
						c.errorf("next: %s\n", p.Next)
					}
					return nil
				}
				after = p.Next
			}
		}),
	}
	f.register(cmd, true)
	fl := cmd.Flags()
	fl.StringVar(&field, "field", "", "the field to match, a name or a dotted path (required)")
	fl.StringVar(&key, "key", "", "the value to match, JSON or a bare word (required)")
	fl.IntVar(&limit, "limit", 0, "documents per page (server default 100, at most 1000)")
	fl.StringVar(&after, "after", "", "the cursor printed as next: by the previous page")
	fl.BoolVar(&ndjson, "ndjson", false, "print one document per line instead of an array")
	fl.BoolVar(&all, "all", false, "follow the cursors and print every page")
	_ = cmd.MarkFlagRequired("field")
	_ = cmd.MarkFlagRequired("key")
	return cmd
}

func (c *cli) dbListCmd() *cobra.Command {
	var app appFlag
	cmd := &cobra.Command{
		Use:   "list --app A",
		Short: "List the databases of an app",
		Args:  noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			a, err := app.value()
			if err != nil {
				return err
			}
			dbs, err := c.client().Databases(cmd.Context(), a)
			if err != nil {
				return err
			}
			return printArray(c.stdout, dbs)
		}),
	}
	app.register(cmd)
	return cmd
}

// errLimitReached stops --follow once --limit changes are printed.
var errLimitReached = errors.New("limit reached")

func (c *cli) dbChangesCmd() *cobra.Command {
	var (
		f        dbFlags
		since    int64
		limit    int
		follow   bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "changes --app A [--db D] [--since SEQ] [--follow]",
		Short: "Print the changes feed as NDJSON, one ledger entry per line",
		Long: `Print every revision committed after --since, in commit order, one JSON
entry per line ({"seq","id","db","rev","doc","writer","path","time"}).
Without --db, the feed of every database of the app. With --follow, keep
printing new changes as they are committed, from the server's live feed,
until interrupted; a dropped connection is reopened and resumed by
itself (resume a later run with --since set to the last seq seen).`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			app, err := f.app.value()
			if err != nil {
				return err
			}
			if since < 0 || limit < 0 {
				return usageError{"--since and --limit must not be negative"}
			}
			if interval <= 0 {
				return usageError{"--interval must be positive"}
			}
			ctx := cmd.Context()
			cl := c.client()
			if follow {
				return c.followChanges(ctx, cl, app, f.db, since, limit)
			}
			printed := 0
			for {
				page := pageSize
				if limit > 0 && limit-printed < page {
					page = limit - printed
				}
				ch, err := cl.Changes(ctx, app, f.db, since, page)
				if err != nil {
					return err
				}
				for _, e := range ch.Changes {
					if err := c.printEntry(e); err != nil {
						return err
					}
					printed++
				}
				if ch.Last > since {
					since = ch.Last
				}
				if limit > 0 && printed >= limit {
					return nil
				}
				if len(ch.Changes) < page {
					if printed == 0 && f.db != "" {
						// A database that does not exist has no changes
						// either: say so rather than print nothing.
						return c.missingDB(ctx, app, f.db)
					}
					return nil
				}
			}
		}),
	}
	f.register(cmd, false)
	fl := cmd.Flags()
	fl.Int64Var(&since, "since", 0, "print changes after this sequence number")
	fl.IntVar(&limit, "limit", 0, "stop after this many changes (0: no limit)")
	fl.BoolVar(&follow, "follow", false, "keep printing new changes until interrupted")
	// --follow used to poll every --interval; it now streams. The flag is
	// still accepted so that existing scripts keep working.
	fl.DurationVar(&interval, "interval", time.Second, "unused: --follow streams changes as they are committed")
	_ = fl.MarkHidden("interval")
	return cmd
}

// followChanges prints the live feed until ctx ends (SIGINT, SIGTERM) or
// limit changes (0: no limit) are printed.
func (c *cli) followChanges(ctx context.Context, cl *client.Client, app, db string, since int64, limit int) error {
	printed := 0
	err := cl.Follow(ctx, app, db, since, func(e client.Entry) error {
		if err := c.printEntry(e); err != nil {
			return err
		}
		printed++
		if limit > 0 && printed >= limit {
			return errLimitReached
		}
		return nil
	})
	switch {
	case errors.Is(err, errLimitReached):
		return nil
	case ctx.Err() != nil:
		return nil // interrupted: the normal end of --follow
	}
	return err
}

// printEntry writes one ledger entry as a line of NDJSON.
func (c *cli) printEntry(e client.Entry) error {
	raw, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return writeLine(c.stdout, raw)
}

func (c *cli) errorf(format string, args ...any) {
	fmt.Fprintf(c.stderr, format, args...)
}

// unknownDBHint says when db is not a database of app ("" when it is):
// a typo reads the same as an empty database or a missing document.
func (c *cli) unknownDBHint(ctx context.Context, app, db string) string {
	dbs, err := c.client().Databases(ctx, app)
	if err != nil || slices.Contains(dbs, db) {
		return ""
	}
	if len(dbs) == 0 {
		return fmt.Sprintf("%s has no databases yet; a database appears with its first document", app)
	}
	msg := fmt.Sprintf("%s has no database %q; ", app, db)
	if near := closest(db, dbs); near != "" {
		msg += fmt.Sprintf("did you mean --db %s? ", near)
	}
	return msg + "its databases are " + strings.Join(dbs, ", ")
}

// missingDB is the not_found error of a read that found nothing because
// db is not a database of app; nil when it is (it is merely empty), or
// when the app's databases cannot be listed.
func (c *cli) missingDB(ctx context.Context, app, db string) error {
	if hint := c.unknownDBHint(ctx, app, db); hint != "" {
		return errs.New(errs.NotFound, "%s", hint)
	}
	return nil
}
