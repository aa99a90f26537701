package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"lifeboat/recovery"
)

type restartMessage struct {
	MessageType string `json:"message_type"` // "restart"
	recovery.RestartReceipt
}

func newRestartCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "restart WORKSPACE",
		Short: "Roll a workspace back to its stored provider checkpoint (rollback restart)",
		Long: "Roll workspace WORKSPACE back to the native checkpoint its provider took last (a park or capture takes one before the " +
			"portable capture, on its own interval): the workspace id stays, " +
			"the instance id the provider returns is recorded and the generation moves on. Without a stored native checkpoint it " +
			"fails (exit code 15) and changes nothing. A stopped (paused) instance is rolled back directly. Goes through a running " +
			"server (--server, or --config), else needs --state-dir.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			emit := func(r recovery.RestartReceipt) {
				g.out.emit(restartMessage{"restart", r}, func(w io.Writer) {
					fmt.Fprintf(w, "workspace %s rolled back to native checkpoint %s: instance %s -> %s, generation %d\n",
						r.Workspace, r.Checkpoint, r.From, r.To, r.Generation)
				})
			}
			if c, err := g.client(); err != nil || c != nil {
				if err != nil {
					return err
				}
				r, err := c.Restart(cmd.Context(), args[0])
				if err == nil {
					emit(r)
				}
				return err
			}
			return g.withLifecycle(cmd.Context(), "restart", func(l *recovery.Lifecycle) error {
				r, err := l.Restart(cmd.Context(), args[0])
				if err == nil {
					emit(r)
				}
				return err
			})
		},
	}
}
