package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/checkpoint"
	"lifeboat/prune"
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
		dryRun, forgetDamaged, instant bool
		maxUnused                      string
		deleteAfter                    time.Duration
	)
	cmd := &cobra.Command{
		Use:   "prune [--dry-run] [--max-unused 5%]",
		Short: "Delete data that no snapshot uses",
		Long: "Mark every blob the snapshots reach, then condemn packs with nothing live and repack packs whose unused share is largest " +
			"until at most --max-unused of the repository is unused. Condemned packs are no longer reused by captures; a later prune " +
			"deletes them once --delete-after has passed (default 24h), unless a snapshot stored meanwhile needs them. Prune takes no lock " +
			"that captures wait for. --instant-delete deletes at once under an exclusive lock instead: only when nothing captures. " +
			"--dry-run prints the plan. A damaged snapshot stops prune before it deletes anything, unless --forget-damaged. " +
			"With --config, its [prune] max_unused and delete_after stand where the flags are not given.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			mu, err := parseMaxUnused(maxUnused)
			if err != nil {
				return err
			}
			// --config's [prune] keys stand where the flags are not given.
			afterFrom := "--delete-after"
			if c := g.cfg; c != nil {
				if !cmd.Flags().Changed("max-unused") {
					mu = c.Prune.MaxUnused
				}
				if !cmd.Flags().Changed("delete-after") {
					deleteAfter, afterFrom = c.Prune.DeleteAfter, "[prune] delete_after"
				}
			}
			if !instant && deleteAfter < prune.MinDeleteAfter {
				return usageError{fmt.Sprintf("%s %s: want at least %s (a capture's session limit, the condemn slack and an hour of clock difference), or --instant-delete when nothing captures", afterFrom, deleteAfter, prune.MinDeleteAfter)}
			}
			if instant {
				deleteAfter = 0
			}
			mode := repo.LockPrune
			if dryRun {
				mode = repo.LockShared
			}
			return g.withLockedRepo(cmd.Context(), mode, "prune", func(r *repo.Repository, l *repo.Lock) error {
				return runPrune(cmd.Context(), g, r, l, dryRun, prune.Options{MaxUnused: mu, ForgetDamaged: forgetDamaged, Tiers: r.Tiers(),
					DeleteAfter: deleteAfter, Now: pruneClock()})
			})
		},
	}
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only print the plan")
	cmd.Flags().StringVar(&maxUnused, "max-unused", "5%", "unused share of the repository to tolerate (percent, or unlimited)")
	cmd.Flags().DurationVar(&deleteAfter, "delete-after", prune.DefaultDeleteAfter, "delete condemned packs only this long after a prune condemned them")
	cmd.Flags().BoolVar(&instant, "instant-delete", false, "delete unused packs at once, under an exclusive lock (only when nothing captures)")
	cmd.Flags().BoolVar(&forgetDamaged, "forget-damaged", false, "forget snapshots whose manifest or trees are missing or damaged instead of refusing")
	return cmd
}

func runPrune(ctx context.Context, g *globalOptions, r *repo.Repository, l *repo.Lock, dryRun bool, o prune.Options) error {
	start := time.Now()
	nothing := false
	st, err := checkpoint.RunPrune(ctx, r, l, checkpoint.PruneOptions{MaxUnused: o.MaxUnused, ForgetDamaged: o.ForgetDamaged, DryRun: dryRun,
		DeleteAfter: o.DeleteAfter, Now: o.Now,
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
		if o.DeleteAfter > 0 {
			fmt.Fprintf(w, "; condemned %s (deleted by a prune %s from now or later)", count(st.PacksCondemned, "pack"), o.DeleteAfter)
		}
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
	if p.TwoPhase {
		fmt.Fprintf(w, "two-phase: condemn %s now, delete %d condemned long enough ago (%s), %d still wait, %d rescued\n",
			count(len(p.Condemn), "pack"), len(p.DeleteNow), snapshot.HumanBytes(sum(p.DeleteNow)), p.Waiting, p.Rescue)
	}
	fmt.Fprintf(w, "delete  %d packs with nothing live (%s)\n", len(p.Delete), snapshot.HumanBytes(sum(p.Delete)))
	fmt.Fprintf(w, "repack  %d packs (%s), copying %s of live blobs\n", len(p.Repack), snapshot.HumanBytes(sum(p.Repack)), snapshot.HumanBytes(p.BytesRewritten))
	fmt.Fprintf(w, "delete  %d unindexed packs (%s) left by interrupted saves\n", len(p.Unindexed), snapshot.HumanBytes(sum(p.Unindexed)))
	fmt.Fprintf(w, "frees %s; %s stays unused\n", snapshot.HumanBytes(p.BytesFreed), snapshot.HumanBytes(p.UnusedAfter))
}
