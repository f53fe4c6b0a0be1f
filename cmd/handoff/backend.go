package main

import (
	"encoding/json"
	"time"

	"github.com/spf13/cobra"
)

func (c *cli) logsCmd() *cobra.Command {
	var (
		app      appFlag
		after    int64
		follow   bool
		interval time.Duration
	)
	cmd := &cobra.Command{
		Use:   "logs --app OWNER/NAME [--follow]",
		Short: "Print the app's handler log (ctx.log, console, failed runs) as NDJSON",
		Long: `Print the app's log lines as NDJSON ({"id","time","level","source","message",
"fields"}): what backend.js wrote with ctx.log or console, failed onChange
runs and scheduled ticks, loop-guard stops, and edits that serve --app
could not deploy. With --follow, keep
printing new lines until interrupted.`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			a, err := app.value()
			if err != nil {
				return err
			}
			if interval <= 0 {
				return usageError{"--interval must be positive"}
			}
			ctx, cl := cmd.Context(), c.client()
			for {
				lines, err := cl.Logs(ctx, a, after, pageSize)
				if err != nil {
					if follow && ctx.Err() != nil {
						return nil
					}
					return err
				}
				for _, l := range lines {
					raw, err := json.Marshal(l)
					if err != nil {
						return err
					}
					if err := writeLine(c.stdout, raw); err != nil {
						return err
					}
					after = l.ID
				}
				if len(lines) == pageSize {
					continue
				}
				if !follow {
					return nil
				}
				select {
				case <-ctx.Done():
					return nil
				case <-time.After(interval):
				}
			}
		}),
	}
	app.register(cmd)
	cmd.Flags().Int64Var(&after, "after", 0, "print lines after this line id")
	cmd.Flags().BoolVar(&follow, "follow", false, "keep printing new lines until interrupted")
	cmd.Flags().DurationVar(&interval, "interval", time.Second, "with --follow, how often to ask for new lines")
	return cmd
}

func (c *cli) eventsCmd() *cobra.Command {
	var (
		app    appFlag
		dead   bool
		replay int64
	)
	cmd := &cobra.Command{
		Use:   "events --app OWNER/NAME [--dead] [--replay SEQ]",
		Short: "List the app's waiting onChange events, or dead ones, and replay a dead one",
		Long: `List the onChange events waiting in the app's outbox (being delivered or
waiting for a retry), one JSON object per line. With --dead, the events
parked after their last attempt, with their lastError. --replay SEQ
delivers a dead event again, as it was committed, with fresh attempts.`,
		Args: noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			a, err := app.value()
			if err != nil {
				return err
			}
			cl := c.client()
			if cmd.Flags().Changed("replay") {
				if replay < 1 {
					return usageError{"--replay takes the seq of a dead event, from `handoff events --dead`"}
				}
				if err := cl.Replay(cmd.Context(), a, replay); err != nil {
					return err
				}
				return c.printJSON(map[string]any{"ok": true, "app": a, "replayed": replay})
			}
			var after int64
			for {
				evs, err := cl.Events(cmd.Context(), a, dead, after, pageSize)
				if err != nil {
					return err
				}
				for _, ev := range evs {
					raw, err := json.Marshal(ev)
					if err != nil {
						return err
					}
					if err := writeLine(c.stdout, raw); err != nil {
						return err
					}
					after = ev.Seq
				}
				if len(evs) < pageSize {
					return nil
				}
			}
		}),
	}
	app.register(cmd)
	cmd.Flags().BoolVar(&dead, "dead", false, "list dead events instead of waiting ones")
	cmd.Flags().Int64Var(&replay, "replay", 0, "replay the dead event with this seq")
	return cmd
}
