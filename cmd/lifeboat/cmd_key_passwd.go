package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"lifeboat/repo"
)

type keyPasswdMessage struct {
	MessageType string `json:"message_type"` // "key_changed"
	OldID       string `json:"old_id"`
	ID          string `json:"id"`
}

func newKeyPasswdCommand(g *globalOptions) *cobra.Command {
	var newPasswordFile string
	var kdf kdfFlags
	cmd := &cobra.Command{
		Use:   "passwd",
		Short: "Change the password of the key in use",
		Long:  "Replace the key in use with a new key file of the same tiers under a new password. The new key is saved before the old one is removed.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			params, err := kdf.checked()
			if err != nil {
				return err
			}
			return g.withRepo(cmd.Context(), false, func(r *repo.Repository) (err error) {
				pw, err := g.newPassword(newPasswordFile)
				if err != nil {
					return err
				}
				defer clear(pw)
				old := r.KeyID()
				id, err := r.ChangePassword(cmd.Context(), pw, params)
				if err != nil {
					return err
				}
				g.out.emit(keyPasswdMessage{"key_changed", old.String(), id.String()}, func(w io.Writer) {
					fmt.Fprintf(w, "replaced key %s with %s\n", old.Short(), id.Short())
				})
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&newPasswordFile, "new-password-file", "", "read the new password from this file")
	kdf.add(cmd.Flags())
	return cmd
}
