package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/handoff-run/handoff/errs"
)

func (c *cli) userCmd() *cobra.Command {
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Create a user (admin only); prints its name and first token",
		Example: `  HANDOFF_TOKEN=$(cat handoff-data/admin.token) handoff user add alice
  {"name":"alice","token":"hnd_..."}`,
		Args: exactArgs(1, "NAME"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			u, err := c.client().AddUser(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return c.printJSON(u)
		}),
	}
	token := &cobra.Command{
		Use:   "token [NAME]",
		Short: "Give a user a new token and revoke all their old ones",
		Long: `Give NAME (default: you) a new token and revoke every other token of
theirs at once: for a token that leaked, or a person who left. The admin
may do it for any user, a user for themself. The new token is printed
once; the server keeps only its hash. Device credentials are not tokens
and stay valid: revoke those with 'handoff device revoke'.

The admin's token is replaced the same way. A server started with
$HANDOFF_ADMIN_TOKEN makes that the admin's only token at each start, so
change the variable too.`,
		Example: `  handoff user token alice
  {"name":"alice","token":"hnd_..."}`,
		Args: cobra.MaximumNArgs(1),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			cl := c.client()
			var name string
			if len(args) == 1 {
				name = args[0]
			} else {
				id, err := cl.WhoAmI(cmd.Context())
				if err != nil {
					return err
				}
				name = id.User
			}
			u, err := cl.RotateToken(cmd.Context(), name)
			if err != nil {
				return err
			}
			if err := c.printJSON(u); err != nil {
				return err
			}
			if len(args) == 0 {
				fmt.Fprintln(c.stderr, "your old token no longer works: use the new one (HANDOFF_TOKEN, or handoff login)")
			}
			return nil
		}),
	}
	list := &cobra.Command{
		Use:   "list",
		Short: "List the users and the apps each owns (admin only)",
		Args:  noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			us, err := c.client().Users(cmd.Context())
			if err != nil {
				return err
			}
			return printArray(c.stdout, us)
		}),
	}
	remove := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a user: their tokens and devices stop working, their roles in apps go (admin only)",
		Long: `Remove the user NAME (admin only). Their tokens and devices stop working
at once and their roles in other users' apps are taken; what they wrote
stays in the ledger under their name. The admin cannot be removed, nor a
user who owns apps (a new user of that name would own them): to lock
such a user out, give them a new token with 'handoff user token NAME'.`,
		Example: `  handoff user remove bob
  {"ok":true,"user":"bob"}`,
		Args: exactArgs(1, "NAME"),
		RunE: action(func(cmd *cobra.Command, args []string) error {
			cl := c.client()
			err := cl.RemoveUser(cmd.Context(), args[0])
			if errs.Is(err, errs.NotFound) {
				// A typo reads the same as a user already gone.
				if us, lerr := cl.Users(cmd.Context()); lerr == nil {
					names := make([]string, len(us))
					for i, u := range us {
						names[i] = u.Name
					}
					if near := closest(args[0], names); near != "" {
						return hinted{err, fmt.Sprintf("did you mean %s?", near)}
					}
				}
			}
			if err != nil {
				return err
			}
			return c.printJSON(map[string]any{"ok": true, "user": args[0]})
		}),
	}
	return group("user", "Manage users", add, list, remove, token)
}

func (c *cli) whoamiCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show who the credential (token or device) belongs to",
		Args:  noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			id, err := c.client().WhoAmI(cmd.Context())
			if err != nil {
				return err
			}
			return c.printJSON(id)
		}),
	}
}
