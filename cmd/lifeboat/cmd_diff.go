package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"lifeboat/repo"
	"lifeboat/snapshot"
)

type changeMessage struct {
	MessageType string `json:"message_type"` // "change"
	snapshot.Change
}

func newDiffCommand(g *globalOptions) *cobra.Command {
	var ws string
	var skipDamaged bool
	cmd := &cobra.Command{
		Use:   "diff SNAPSHOT1 SNAPSHOT2",
		Short: "Show what changed between two snapshots",
		Long: "List the paths added (+), removed (-), modified (M: content or type) or changed in metadata only (U) from SNAPSHOT1 to SNAPSHOT2. " +
			"Unchanged directories are skipped without reading them. Under --json, one \"change\" message each.",
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.withRepo(cmd.Context(), true, func(r *repo.Repository) error {
				a, skippedA, err := g.resolveSnapshot(cmd.Context(), r, args[0], ws, skipDamaged, "comparing")
				if err != nil {
					return err
				}
				b, skippedB, err := g.resolveSnapshot(cmd.Context(), r, args[1], ws, skipDamaged, "comparing")
				if err != nil {
					return err
				}
				g.emitSkipped(skippedA, a)
				g.emitSkipped(skippedB, b)
				marks := map[string]string{"added": "+", "removed": "-", "modified": "M", "metadata": "U"}
				return snapshot.Diff(cmd.Context(), r, a.Root.Subtree, b.Root.Subtree, func(c snapshot.Change) error {
					g.out.emit(changeMessage{"change", c}, func(w io.Writer) { fmt.Fprintf(w, "%s %s\n", marks[c.Kind], quoteName(c.Path)) })
					return nil
				})
			})
		},
	}
	cmd.Flags().StringVar(&ws, "workspace", "", "the `WORKSPACE` whose newest complete snapshot latest means")
	addSkipDamaged(cmd.Flags(), &skipDamaged)
	return cmd
}
