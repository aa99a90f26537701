package main

import (
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/prune"
	"lifeboat/repo"
)

type policyMessage struct {
	MessageType string    `json:"message_type"` // "policy"
	Workspace   string    `json:"workspace"`
	ID          string    `json:"id"`
	Set         time.Time `json:"set"`
	KeepLast    int       `json:"keep_last"`
	KeepWithin  float64   `json:"keep_within"` // seconds
	KeepHourly  int       `json:"keep_hourly"`
	KeepDaily   int       `json:"keep_daily"`
	KeepWeekly  int       `json:"keep_weekly"`
	KeepMonthly int       `json:"keep_monthly"`
	KeepTags    []string  `json:"keep_tags"`
}

func policyMsg(sp prune.StoredPolicy) policyMessage {
	p := sp.Policy
	m := policyMessage{MessageType: "policy", Workspace: sp.Workspace, ID: sp.ID.String(), Set: sp.Set, KeepLast: p.Last,
		KeepWithin: p.Within.Seconds(), KeepHourly: p.Hourly, KeepDaily: p.Daily, KeepWeekly: p.Weekly, KeepMonthly: p.Monthly, KeepTags: p.Tags}
	if m.KeepTags == nil {
		m.KeepTags = []string{}
	}
	return m
}

func newPolicyCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Store, show and remove per-workspace retention policies",
		Long: "A workspace's retention policy is stored in the repository, so `lifeboat forget` without --keep-* flags (and the " +
			"server) can apply it. The last good root is kept whatever the policy says.",
	}
	var pf policyFlags
	var ws string
	set := &cobra.Command{
		Use:   "set --workspace ID --keep-... ",
		Short: "Store the retention policy of a workspace (replacing its old one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ws == "" {
				return usageError{"--workspace is required"}
			}
			p, err := pf.policy()
			if err != nil {
				return err
			}
			return g.withRepo(cmd.Context(), false, func(r *repo.Repository) error {
				sp, err := prune.SetPolicy(cmd.Context(), r, ws, p, time.Now())
				if err != nil {
					return err
				}
				if p.Empty() {
					g.out.note("warning: this policy keeps nothing; forget will keep only the last good root of %q", ws)
				}
				g.out.emit(policyMsg(sp), func(w io.Writer) { fmt.Fprintf(w, "policy of %s: %s\n", ws, p) })
				return nil
			})
		},
	}
	pf.add(set)
	set.Flags().StringVar(&ws, "workspace", "", "workspace id (required)")
	var showWS string
	show := &cobra.Command{
		Use:   "show [--workspace ID]",
		Short: "Show the stored retention policies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withRepo(cmd.Context(), false, func(r *repo.Repository) error {
				all, err := prune.Policies(cmd.Context(), r)
				if err != nil {
					return err
				}
				for _, w := range sortedKeys(all) {
					if showWS != "" && w != showWS {
						continue
					}
					sp := all[w]
					g.out.emit(policyMsg(sp), func(o io.Writer) {
						fmt.Fprintf(o, "%s: %s (set %s)\n", w, sp.Policy, sp.Set.Local().Format(time.DateTime))
					})
				}
				if _, ok := all[showWS]; showWS != "" && !ok {
					g.out.note("workspace %q has no stored policy", showWS)
				}
				return nil
			})
		},
	}
	show.Flags().StringVar(&showWS, "workspace", "", "only this workspace")
	var rmWS string
	remove := &cobra.Command{
		Use:   "remove --workspace ID",
		Short: "Remove a workspace's stored policy (its snapshots are then left alone by forget)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if rmWS == "" {
				return usageError{"--workspace is required"}
			}
			return g.withRepo(cmd.Context(), false, func(r *repo.Repository) error {
				n, err := prune.RemovePolicy(cmd.Context(), r, rmWS)
				if err != nil {
					return err
				}
				g.out.emit(struct {
					MessageType string `json:"message_type"`
					Workspace   string `json:"workspace"`
					Removed     int    `json:"removed"`
				}{"policy_removed", rmWS, n}, func(w io.Writer) { fmt.Fprintf(w, "removed %d stored policy objects of %s\n", n, rmWS) })
				return nil
			})
		},
	}
	remove.Flags().StringVar(&rmWS, "workspace", "", "workspace id (required)")
	cmd.AddCommand(set, show, remove)
	return cmd
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
