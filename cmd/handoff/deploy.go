package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/handoff-run/handoff/client"
	"github.com/handoff-run/handoff/internal/appdir"
)

func (c *cli) deployCmd() *cobra.Command {
	var app appFlag
	cmd := &cobra.Command{
		Use:   "deploy --app OWNER/NAME DIR",
		Short: "Upload DIR/access.js, DIR/backend.js and DIR/public/ as the app's next code version",
		Long: `Upload DIR/access.js, DIR/backend.js and the static files under DIR/public/
as the app's next numbered code version and make it live. access.js and
backend.js may import modules from the folder ("./lib/resize.js") and
packages from its node_modules/; each is bundled with what it imports,
and nothing outside the folder can be imported. Code that does not
compile is refused with its file, line and column, and the live version
stays. Static files are served on the app's own site,
http://NAME--OWNER.localhost:PORT/ (public/index.html at /); names
starting with "." are skipped.`,
		Args: exactArgs(1, "DIR"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			a, err := app.value()
			if err != nil {
				return err
			}
			code, err := appdir.Read(args[0])
			if err != nil {
				return err
			}
			v, err := c.client().DeployFiles(cmd.Context(), a, code.Access, code.Backend, code.Files)
			if err != nil {
				return err
			}
			out := map[string]any{"ok": true, "app": a, "version": v.Version}
			if len(code.Files) > 0 {
				out["files"] = len(code.Files)
			}
			return c.printJSON(out)
		}),
	}
	app.register(cmd)
	return cmd
}

func (c *cli) versionsCmd() *cobra.Command {
	var app appFlag
	cmd := &cobra.Command{
		Use:   "versions --app OWNER/NAME",
		Short: "List the app's code versions; the live one has active: true",
		Args:  noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			a, err := app.value()
			if err != nil {
				return err
			}
			vs, err := c.client().CodeVersions(cmd.Context(), a)
			if err != nil {
				return err
			}
			return printArray(c.stdout, vs)
		}),
	}
	app.register(cmd)
	return cmd
}

func (c *cli) rollbackCmd() *cobra.Command {
	var app appFlag
	cmd := &cobra.Command{
		Use:   "rollback --app OWNER/NAME VERSION",
		Short: "Make an earlier code version live again",
		Args:  exactArgs(1, "VERSION"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			a, err := app.value()
			if err != nil {
				return err
			}
			v, err := strconv.Atoi(args[0])
			if err != nil || v < 1 {
				return usageError{fmt.Sprintf("VERSION must be a version number from `handoff app versions`, not %q", args[0])}
			}
			if err := c.client().Activate(cmd.Context(), a, v); err != nil {
				return err
			}
			return c.printJSON(map[string]any{"ok": true, "app": a, "version": v})
		}),
	}
	app.register(cmd)
	return cmd
}

func (c *cli) setCmd() *cobra.Command {
	var app appFlag
	var timeout time.Duration
	var public bool
	var origins []string
	var signup string
	var jsMemory int
	cmd := &cobra.Command{
		Use:   "set --app OWNER/NAME [--access-timeout DURATION] [--public=true|false] [--origin URL]... [--signup closed|invite|open] [--js-memory MIB]",
		Short: "Change an app's settings (the access function's deadline, public reads, web origins, visitor sign-up, JavaScript memory)",
		Args:  noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			a, err := app.value()
			if err != nil {
				return err
			}
			var s client.Settings
			out := map[string]any{"ok": true, "app": a}
			if cmd.Flags().Changed("access-timeout") {
				s.AccessTimeout = &timeout
				out["accessTimeout"] = timeout.String()
			}
			if cmd.Flags().Changed("public") {
				s.Public = &public
				out["public"] = public
			}
			if cmd.Flags().Changed("origin") {
				list := []string{}
				for _, o := range origins {
					if o != "" {
						list = append(list, o)
					}
				}
				s.Origins = &list
				out["origins"] = list
			}
			if cmd.Flags().Changed("signup") {
				s.Signup = &signup
				out["signup"] = signup
			}
			if cmd.Flags().Changed("js-memory") {
				s.JSMemory = &jsMemory
				out["jsMemory"] = jsMemory
			}
			if s.AccessTimeout == nil && s.Public == nil && s.Origins == nil && s.Signup == nil && s.JSMemory == nil {
				return usageError{"nothing to set; pass --access-timeout 250ms (0 restores the default), --public=true|false, --origin URL, --signup closed|invite|open or --js-memory 256"}
			}
			if err := c.client().SetSettings(cmd.Context(), a, s); err != nil {
				return err
			}
			return c.printJSON(out)
		}),
	}
	app.register(cmd)
	cmd.Flags().DurationVar(&timeout, "access-timeout", 0, "deadline of one access-function call, e.g. 250ms (default 100ms)")
	cmd.Flags().BoolVar(&public, "public", false, "let anonymous readers read what access.js grants to public (--public=false closes the app again)")
	cmd.Flags().StringArrayVar(&origins, "origin", nil, "a web origin besides the app's own site whose pages may call the API for the app, e.g. http://localhost:5173 (repeatable; replaces the list; --origin= clears it)")
	cmd.Flags().StringVar(&signup, "signup", "", "who may sign up as a visitor on the app's page: closed (the default), invite (with a code from `handoff app invite`) or open")
	cmd.Flags().IntVar(&jsMemory, "js-memory", 0, "MiB one call of the app's JavaScript may grow the heap by (default 64; at most the server's --js-memory; 0 restores the default); server admins only")
	return cmd
}
