package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"lifeboat/repo"
)

func newRepairCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{Use: "repair", Short: "Repair parts of a repository"}
	cmd.AddCommand(newRepairIndexCommand(g))
	return cmd
}

type repairIndexMessage struct {
	MessageType string `json:"message_type"` // "repair_index"
	repo.RepairStats
}

func newRepairIndexCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "index",
		Short: "Rebuild the index objects from the pack headers",
		Long: "Read the header of every pack, write new index objects for every tier the key unlocks, then remove the old ones " +
			"of those tiers and rebuild the local index cache. Packs whose header cannot be read are reported and left alone, never deleted. " +
			"With a workspace-only key the sensitive tier's index objects are kept as they are.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withLockedRepo(cmd.Context(), repo.LockExclusive, "repair index", func(r *repo.Repository, _ *repo.Lock) (err error) {
				st, err := r.RepairIndex(cmd.Context())
				if err != nil {
					return err
				}
				g.out.emit(repairIndexMessage{"repair_index", st}, func(w io.Writer) {
					fmt.Fprintf(w, "indexed %s in %s; wrote %s, removed %d\n", count(st.Blobs, "blob"), count(st.Packs, "pack"), count(st.ObjectsWritten, "index object"), st.ObjectsRemoved)
					if st.LockedPacks > 0 {
						fmt.Fprintf(w, "index left as it was: %s of a tier this key cannot open\n", count(st.LockedPacks, "pack"))
					}
					for _, d := range st.Damaged {
						fmt.Fprintf(w, "damaged pack %s left out of the index: %s\n", d.Pack, d.Error)
					}
				})
				if len(st.Damaged) > 0 {
					return fmt.Errorf("%w: %d packs could not be read; their blobs are no longer indexed", repo.ErrCorrupt, len(st.Damaged))
				}
				return nil
			})
		},
	}
}
