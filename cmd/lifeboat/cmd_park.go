package main

import (
	"github.com/spf13/cobra"

	"lifeboat/recovery"
)

func newParkCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "park WORKSPACE",
		Short: "Capture a workspace before its sandbox is parked (throttled)",
		Long: "Capture the workspace through the lifecycle before the sandbox is parked: writers are quiesced, the snapshot is written " +
			"and verified, and only then does it become the last good checkpoint. A park within the park interval (5 minutes) of the " +
			"last good checkpoint captures nothing. A failure is recorded on the workspace (`lifeboat workspace show`) and the exit " +
			"code says what happened; the sandbox may be parked either way. Goes through a running server (--server, or --config), " +
			"else needs --state-dir.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if c, err := g.client(); err != nil || c != nil {
				if err != nil {
					return err
				}
				r, err := c.Park(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				return g.emitReceipt(r)
			}
			return g.withLifecycle(cmd.Context(), "park", func(l *recovery.Lifecycle) error {
				return g.emitReceipt(l.Park(cmd.Context(), args[0]))
			})
		},
	}
}
