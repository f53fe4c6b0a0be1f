package main

import "github.com/spf13/cobra"

func (c *cli) inviteCmd() *cobra.Command {
	var app appFlag
	cmd := &cobra.Command{
		Use:   "invite --app OWNER/NAME",
		Short: "Make a single-use invite code for visitors' sign-up (with `handoff app set --signup invite`)",
		Args:  noArgs,
		RunE: action(func(cmd *cobra.Command, args []string) error {
			a, err := app.value()
			if err != nil {
				return err
			}
			code, err := c.client().Invite(cmd.Context(), a)
			if err != nil {
				return err
			}
			return c.printJSON(map[string]any{"app": a, "code": code})
		}),
	}
	app.register(cmd)
	return cmd
}
