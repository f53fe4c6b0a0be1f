package main

import (
	"github.com/spf13/cobra"
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
	return group("user", "Manage users", add)
}

func (c *cli) whoamiCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "whoami",
		Short: "Show who the token belongs to",
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
