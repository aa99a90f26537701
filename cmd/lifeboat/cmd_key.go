package main

import (
	"github.com/spf13/cobra"
)

func newKeyCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key",
		Short: "Manage the key files that unlock the repository",
		Long: "Every key file wraps the same master keys under its own password. A key unlocks the workspace tier, " +
			"and optionally the sensitive tier (browser profiles); a workspace-only key holds no sensitive key material at all.",
	}
	cmd.AddCommand(newKeyAddCommand(g), newKeyListCommand(g), newKeyRemoveCommand(g), newKeyPasswdCommand(g))
	return cmd
}
