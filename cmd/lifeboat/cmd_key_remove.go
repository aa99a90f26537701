package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"lifeboat/repo"
)

type keyRemovedMessage struct {
	MessageType string `json:"message_type"` // "key_removed"
	ID          string `json:"id"`
}

func newKeyRemoveCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a key file",
		Long: "Remove the key file whose id starts with ID (at least 4 hex characters). Refused for the key in use, " +
			"the last key, and the last key that unlocks the sensitive tier.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withRepo(cmd.Context(), false, func(r *repo.Repository) (err error) {
				k, err := r.FindKey(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if err := r.RemoveKey(cmd.Context(), k.ID); err != nil {
					return err
				}
				g.out.emit(keyRemovedMessage{"key_removed", k.ID.String()}, func(w io.Writer) {
					fmt.Fprintf(w, "removed key %s\n", k.ID.Short())
				})
				return nil
			})
		},
	}
}
