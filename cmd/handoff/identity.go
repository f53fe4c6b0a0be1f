package main

import "github.com/spf13/cobra"

// identityCmds are device, login and secret.
func (c *cli) identityCmds() []*cobra.Command { return nil }
