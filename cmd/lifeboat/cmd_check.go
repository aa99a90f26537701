package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"lifeboat/repo"
)

type checkMessage struct {
	MessageType string `json:"message_type"` // "check"
	repo.CheckResult
}

func newCheckCommand(g *globalOptions) *cobra.Command {
	var o repo.CheckOptions
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Verify the repository",
		Long: "Check that every indexed pack exists with the right size and every stored pack is indexed. With --read-data, " +
			"also read every pack of the tiers the key unlocks and verify its hash, header and every blob. Check never changes the repository; " +
			"it exits with code 13 when it finds a problem.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withRepo(cmd.Context(), true, func(r *repo.Repository) (err error) {
				res, err := r.Check(cmd.Context(), o)
				if err != nil {
					return err
				}
				g.out.emit(checkMessage{"check", res}, func(w io.Writer) {
					fmt.Fprintf(w, "checked %d packs holding %d blobs", res.Packs, res.Blobs)
					if o.ReadData {
						fmt.Fprintf(w, ", read and verified %d MiB", res.ReadBytes>>20)
					}
					fmt.Fprintln(w)
					if res.LockedPacks > 0 {
						fmt.Fprintf(w, "%d packs belong to a tier this key cannot open and were not checked\n", res.LockedPacks)
					}
					for _, p := range append(res.Notices, res.Problems...) {
						fmt.Fprintf(w, "%s %s: %s\n", p.Kind, p.Object, p.Detail)
					}
					if len(res.Problems) == 0 {
						fmt.Fprintln(w, "no problems found")
					}
				})
				if len(res.Problems) > 0 {
					return fmt.Errorf("%w: check found %d problems", repo.ErrCorrupt, len(res.Problems))
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&o.ReadData, "read-data", false, "read and verify every pack")
	return cmd
}
