package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"lifeboat/repo"

	"lifeboat/blob"
)

type keyAddOptions struct {
	newPasswordFile string
	tiers           []string
	kdf             kdfFlags
}

type keyAddedMessage struct {
	MessageType string      `json:"message_type"` // "key_added"
	ID          string      `json:"id"`
	Tiers       []blob.Tier `json:"tiers"`
}

func newKeyAddCommand(g *globalOptions) *cobra.Command {
	var o keyAddOptions
	cmd := &cobra.Command{
		Use:   "add",
		Short: "Add a key file with a new password",
		Long: "Add a key file that wraps the master keys under a new password (from --new-password-file or a prompt). " +
			"--tiers workspace makes a key that cannot read the sensitive tier; the key in use must unlock every tier it hands on.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tiers, err := parseTiers(o.tiers)
			if err != nil {
				return err
			}
			kdf, err := o.kdf.checked()
			if err != nil {
				return err
			}
			return g.withRepo(cmd.Context(), false, func(r *repo.Repository) (err error) {
				if len(tiers) == 0 {
					tiers = r.Tiers()
				}
				pw, err := g.newPassword(o.newPasswordFile)
				if err != nil {
					return err
				}
				defer clear(pw)
				id, err := r.AddKey(cmd.Context(), pw, tiers, kdf)
				if err != nil {
					return err
				}
				g.out.emit(keyAddedMessage{"key_added", id.String(), tiers}, func(w io.Writer) {
					fmt.Fprintf(w, "added key %s (tiers: %s)\n", id.Short(), tierList(tiers))
				})
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&o.newPasswordFile, "new-password-file", "", "read the new key's password from this file")
	cmd.Flags().StringSliceVar(&o.tiers, "tiers", nil, "tiers the new key unlocks: workspace, or workspace,sensitive (default: those of the key in use)")
	o.kdf.add(cmd.Flags())
	return cmd
}

func parseTiers(names []string) ([]blob.Tier, error) {
	var ts []blob.Tier
	for _, n := range names {
		t, err := blob.ParseTier(strings.TrimSpace(n))
		if err != nil {
			return nil, usageError{err.Error()}
		}
		ts = append(ts, t)
	}
	if len(ts) > 0 && !hasWorkspace(ts) {
		return nil, usageError{"--tiers must include workspace: it encrypts the repository's metadata"}
	}
	return ts, nil
}

func hasWorkspace(ts []blob.Tier) bool {
	for _, t := range ts {
		if t == blob.Workspace {
			return true
		}
	}
	return false
}

func tierList(ts []blob.Tier) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}
