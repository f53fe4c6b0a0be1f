package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

func (c *cli) appCmd() *cobra.Command {
	var public bool
	create := &cobra.Command{
		Use:   "create OWNER/NAME",
		Short: "Create an app; users create apps under their own name",
		Args:  exactArgs(1, "OWNER/NAME"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			if err := checkAppRef(args[0]); err != nil {
				return err
			}
			info, err := c.client().CreateApp(cmd.Context(), args[0], public)
			if err != nil {
				return err
			}
			return c.printJSON(info)
		}),
	}
	create.Flags().BoolVar(&public, "public", false, "let anonymous readers read what access.js grants to public")

	list := &cobra.Command{
		Use:   "list",
		Short: "List the apps you own or are a member of (all of them for the admin)",
		Args:  noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			apps, err := c.client().Apps(cmd.Context())
			if err != nil {
				return err
			}
			return printArray(c.stdout, apps)
		}),
	}

	return group("app", "Manage apps, their members and their code versions", create, list, c.memberCmd(),
		c.versionsCmd(), c.rollbackCmd(), c.setCmd(), c.inviteCmd(), c.moveCmd())
}

func (c *cli) moveCmd() *cobra.Command {
	to := -1
	cmd := &cobra.Command{
		Use:   "move OWNER/NAME --to N",
		Short: "Move an app to another of the server's PostgreSQL databases (its writes pause meanwhile)",
		Long: `Move an app to database N of a server started with several --postgres
URLs, numbered from 0 in their order. The app's writes wait while it is
copied (and are refused as unavailable, to retry, if that takes more than
a few seconds); reads go on. A move cut short is finished by running it
again, or undone by moving the app to the database it is in.`,
		Args: exactArgs(1, "OWNER/NAME"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			if err := checkAppRef(args[0]); err != nil {
				return err
			}
			if to < 0 {
				return usageError{"pass --to N, the number of the database to move the app to (0 for the first --postgres URL)"}
			}
			from, err := c.client().MoveApp(cmd.Context(), args[0], to)
			if err != nil {
				return err
			}
			return c.printJSON(map[string]any{"ok": true, "app": args[0], "from": from, "to": to})
		}),
	}
	cmd.Flags().IntVar(&to, "to", -1, "the database to move the app to, numbered from 0 in the order of the server's --postgres URLs")
	return cmd
}

func (c *cli) memberCmd() *cobra.Command {
	var (
		addApp appFlag
		role   string
	)
	add := &cobra.Command{
		Use:   "add --app OWNER/NAME USER --role ROLE",
		Short: "Give a user a role in an app (editor, viewer, or a role access.js uses)",
		Args:  exactArgs(1, "USER"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			app, err := addApp.value()
			if err != nil {
				return err
			}
			if err := c.client().AddMember(cmd.Context(), app, args[0], role); err != nil {
				return err
			}
			return c.printJSON(map[string]any{"ok": true, "app": app, "user": args[0], "role": role})
		}),
	}
	addApp.register(add)
	add.Flags().StringVar(&role, "role", "", "the role to give (required)")
	_ = add.MarkFlagRequired("role")

	var listApp appFlag
	list := &cobra.Command{
		Use:   "list --app OWNER/NAME",
		Short: "List an app's members and their roles",
		Args:  noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			app, err := listApp.value()
			if err != nil {
				return err
			}
			ms, err := c.client().Members(cmd.Context(), app)
			if err != nil {
				return err
			}
			return printArray(c.stdout, ms)
		}),
	}
	listApp.register(list)

	return group("member", "Manage the members of an app", add, list, c.memberRemoveCmd())
}

// exactArgs wants n positional arguments, named in the error message.
func exactArgs(n int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == n {
			return nil
		}
		want := strings.Join(names, " ")
		if len(args) < n {
			return usageError{fmt.Sprintf("%s needs %s", cmd.CommandPath(), want)}
		}
		return usageError{fmt.Sprintf("%s takes %d argument(s) (%s), got %d: %q", cmd.CommandPath(), n, want, len(args), args)}
	}
}
