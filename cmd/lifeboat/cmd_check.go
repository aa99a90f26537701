package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

type checkMessage struct {
	MessageType string `json:"message_type"` // "check"
	Snapshots   int    `json:"snapshots"`
	repo.CheckResult
}

type checkOptions struct {
	readData bool
	subset   string
}

func newCheckCommand(g *globalOptions) *cobra.Command {
	var o checkOptions
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Verify the repository and its snapshots",
		Long: "Check that every indexed pack exists with the right size, every stored pack is indexed, and every snapshot's trees load " +
			"and its chunks are indexed. With --read-data, also read every pack of the tiers the key unlocks and verify its hash, " +
			"header and every blob; --read-data-subset N% reads a random N% of the packs. Problems name the packs, snapshots and " +
			"file paths affected. Check never changes the repository; it exits with code 13 when it finds a problem.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := repo.CheckOptions{ReadData: o.readData}
			if o.subset != "" {
				pct, err := strconv.ParseFloat(strings.TrimSuffix(o.subset, "%"), 64)
				if err != nil || !(pct > 0 && pct <= 100) { // NaN too
					return usageError{fmt.Sprintf("--read-data-subset %q: want a percentage above 0%% and at most 100%%, such as 10%% or 0.5%%", o.subset)}
				}
				opts.ReadDataSubset = pct
			}
			// A shared lock, like a capture's: a prune cannot delete packs
			// under a running check and make it report them missing.
			return g.withLockedRepo(cmd.Context(), repo.LockShared, "check", func(r *repo.Repository, _ *repo.Lock) error {
				return runCheck(cmd, g, r, opts)
			})
		},
	}
	cmd.Flags().BoolVar(&o.readData, "read-data", false, "read and verify every pack")
	cmd.Flags().StringVar(&o.subset, "read-data-subset", "", "read and verify a random `N%` of the packs")
	return cmd
}

func runCheck(cmd *cobra.Command, g *globalOptions, r *repo.Repository, opts repo.CheckOptions) error {
	res, err := r.Check(cmd.Context(), opts)
	if err != nil {
		return err
	}
	damaged := map[blob.ID]bool{}
	for _, p := range res.Problems {
		if id, err := blob.ParseID(strings.TrimPrefix(p.Object, "data/")); err == nil {
			damaged[id] = true
		}
	}
	n, probs, err := snapshot.CheckSnapshots(cmd.Context(), r, damaged)
	if err != nil {
		return err
	}
	res.Problems = append(res.Problems, probs...)
	g.out.emit(checkMessage{"check", n, res}, func(w io.Writer) {
		fmt.Fprintf(w, "checked %s, %s holding %s", count(n, "snapshot"), count(res.Packs, "pack"), count(res.Blobs, "blob"))
		if res.ReadBytes > 0 {
			fmt.Fprintf(w, "; read and verified %d MiB", res.ReadBytes>>20)
		}
		fmt.Fprintln(w)
		if res.LockedPacks > 0 {
			fmt.Fprintf(w, "not checked: %s of a tier this key cannot open\n", count(res.LockedPacks, "pack"))
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
}
