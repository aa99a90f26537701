package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"lifeboat/blob"
	"lifeboat/repo"
)

func newCatCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "cat", Short: "Print repository internals for debugging"}
	cmd.AddCommand(newCatConfigCommand(g))
	return cmd
}

type configMessage struct {
	MessageType string `json:"message_type"` // "config"
	repo.Params
	Location      string      `json:"location"`
	KeyID         string      `json:"key_id"`
	UnlockedTiers []blob.Tier `json:"unlocked_tiers"`
}

func newCatConfigCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "config",
		Short: "Show the repository config without its secrets",
		Long:  "Show the public config (format version, id, pack size, compression, chunk sizes) after checking it against its sealed copy, and which tiers the key in use unlocks. The chunker polynomials and keys are never shown.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withRepo(cmd.Context(), false, func(r *repo.Repository) (err error) {
				p := r.Config()
				m := configMessage{"config", p, r.Backend().Location(), r.KeyID().String(), r.Tiers()}
				g.out.emit(m, func(w io.Writer) {
					fmt.Fprintf(w, "repository     %s\nlocation       %s\nformat version %d\ncreated        %s\npack size      %d MiB\ncompression    %s\nchunk sizes    min %d KiB, mean ~%d KiB, max %d MiB\nkey in use     %s (tiers: %s)\n",
						p.ID, m.Location, p.Version, p.Created.Format("2006-01-02 15:04:05 MST"), p.PackSize>>20, p.Compression,
						p.Chunker.Min>>10, (p.Chunker.Min+1<<p.Chunker.AverageBits)>>10, p.Chunker.Max>>20, r.KeyID().Short(), tierList(r.Tiers()))
				})
				return nil
			})
		},
	}
}
