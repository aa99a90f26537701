package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/prune"
	"lifeboat/recovery"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

type prunePlanMessage struct {
	MessageType string `json:"message_type"` // "prune_plan"
	DryRun      bool   `json:"dry_run"`
	*prune.Plan
}

type pruneMessage struct {
	MessageType string `json:"message_type"` // "prune"
	prune.Stats
	Seconds float64 `json:"seconds"`
}

// parseMaxUnused reads "5%", "5" (percent) or "unlimited".
func parseMaxUnused(s string) (float64, error) {
	if s == "unlimited" {
		return 1, nil
	}
	v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
	if err != nil || v < 0 || v > 100 {
		return 0, usageError{fmt.Sprintf("--max-unused %q: want a percentage from 0%% to 100%%, or unlimited", s)}
	}
	if v == 0 {
		return 1e-9, nil // repack every pack with anything unused
	}
	return v / 100, nil
}

func newPruneCommand(g *globalOptions) *cobra.Command {
	var (
		dryRun, forgetDamaged bool
		maxUnused             string
	)
	cmd := &cobra.Command{
		Use:   "prune [--dry-run] [--max-unused 5%]",
		Short: "Delete data that no snapshot uses",
		Long: "Mark every blob the snapshots reach, then delete packs with nothing live and repack packs whose unused share is largest " +
			"until at most --max-unused of the repository is unused. New packs and index come first, deletions last, under an " +
			"exclusive lock taken only for the delete phase (captures go on while prune plans and repacks). --dry-run prints the plan. " +
			"A damaged snapshot stops prune before it deletes anything, unless --forget-damaged.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mu, err := parseMaxUnused(maxUnused)
			if err != nil {
				return err
			}
			mode := repo.LockPrune
			if dryRun {
				mode = repo.LockShared
			}
			return g.withLockedRepo(cmd.Context(), mode, "prune", func(r *repo.Repository, l *repo.Lock) error {
				return runPrune(cmd.Context(), g, r, l, dryRun, prune.Options{MaxUnused: mu, ForgetDamaged: forgetDamaged, Tiers: r.Tiers()})
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only print the plan")
	cmd.Flags().StringVar(&maxUnused, "max-unused", "5%", "unused share of the repository to tolerate (percent, or unlimited)")
	cmd.Flags().BoolVar(&forgetDamaged, "forget-damaged", false, "forget snapshots whose manifest or trees are missing or damaged instead of refusing")
	return cmd
}

func runPrune(ctx context.Context, g *globalOptions, r *repo.Repository, l *repo.Lock, dryRun bool, o prune.Options) error {
	start := time.Now()
	nothing := false
	st, err := recovery.RunPrune(ctx, r, l, recovery.PruneOptions{MaxUnused: o.MaxUnused, ForgetDamaged: o.ForgetDamaged, DryRun: dryRun,
		Lock: g.lockOptions("prune"), Plan: func(p *prune.Plan) {
			nothing = p.Nothing()
			g.out.emit(prunePlanMessage{"prune_plan", dryRun, p}, func(w io.Writer) { printPlan(w, p) })
		}})
	if err != nil || dryRun {
		return err
	}
	if nothing {
		g.out.note("nothing to prune")
	}
	g.out.emit(pruneMessage{"prune", st, time.Since(start).Seconds()}, func(w io.Writer) {
		fmt.Fprintf(w, "deleted %d packs (%s), wrote %d packs (%d blobs copied), replaced %d index objects with %d",
			st.PacksDeleted, snapshot.HumanBytes(st.BytesDeleted), st.PacksWritten, st.BlobsCopied, st.IndexRemoved, st.IndexWritten)
		if st.Rescued > 0 {
			fmt.Fprintf(w, "; kept %d packs that %d snapshots made while prune ran need", st.Rescued, st.NewSnapshots)
		}
		fmt.Fprintf(w, " in %.2fs\n", time.Since(start).Seconds())
	})
	return nil
}

func printPlan(w io.Writer, p *prune.Plan) {
	sum := func(l []prune.PackInfo) (n uint64) {
		for _, pi := range l {
			n += pi.Size
		}
		return n
	}
	fmt.Fprintf(w, "%d snapshots, %d packs (%s), %d of %d blobs live, %s unused\n", p.Snapshots, p.Packs,
		snapshot.HumanBytes(p.TotalBytes), p.LiveBlobs, p.Blobs, snapshot.HumanBytes(p.UnusedBytes))
	for _, d := range p.Damaged {
		fmt.Fprintf(w, "damaged snapshot %s: %s\n", d.ID, d.Error)
	}
	fmt.Fprintf(w, "delete  %d packs with nothing live (%s)\n", len(p.Delete), snapshot.HumanBytes(sum(p.Delete)))
	fmt.Fprintf(w, "repack  %d packs (%s), copying %s of live blobs\n", len(p.Repack), snapshot.HumanBytes(sum(p.Repack)), snapshot.HumanBytes(p.BytesRewritten))
	fmt.Fprintf(w, "delete  %d unindexed packs (%s) left by interrupted saves\n", len(p.Unindexed), snapshot.HumanBytes(sum(p.Unindexed)))
	fmt.Fprintf(w, "frees %s; %s stays unused\n", snapshot.HumanBytes(p.BytesFreed), snapshot.HumanBytes(p.UnusedAfter))
}
