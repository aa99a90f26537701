package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/checkpoint"
	"lifeboat/prune"
	"lifeboat/repo"
)

type forgetSnapshotMessage struct {
	MessageType string    `json:"message_type"` // "forget_snapshot"
	ID          string    `json:"id"`
	Workspace   string    `json:"workspace"`
	Time        time.Time `json:"time"`
	Complete    bool      `json:"complete"`
	Keep        bool      `json:"keep"`
	Reasons     []string  `json:"reasons"`
}

type forgetMessage struct {
	MessageType string   `json:"message_type"` // "forget"
	DryRun      bool     `json:"dry_run"`
	Kept        int      `json:"kept"`
	Removed     int      `json:"removed"`
	Warnings    []string `json:"warnings"`
	// Gone are snapshots another forget or a lifecycle's retention removed
	// while this one ran: no error, and counted in Removed when planned.
	Gone []string `json:"gone"`
}

func newForgetCommand(g *globalOptions) *cobra.Command {
	var (
		pf     policyFlags
		ws     string
		dryRun bool
	)
	cmd := &cobra.Command{
		Use:   "forget [--workspace ID] [--keep-* ...]",
		Short: "Remove snapshots a retention policy does not keep",
		Long: "Apply a retention policy to the snapshots of each workspace (or of --workspace) and remove the snapshots it does not keep. " +
			"Without --keep-* flags, each workspace's stored policy (`lifeboat policy set`) is applied, and workspaces without one are " +
			"left alone. The newest complete snapshot of every workspace, its last good root, is always kept, and so is every snapshot " +
			"`lifeboat serve` holds (a workspace's last good checkpoint, those an open recovery names). Only snapshot objects are " +
			"removed; `lifeboat prune` frees the data. --dry-run shows what would be kept and why.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			flagPolicy, err := pf.policy()
			if err != nil {
				return err
			}
			o := checkpoint.ForgetOptions{Workspace: ws, DryRun: dryRun, Now: time.Now()}
			if pf.given(cmd) {
				o.Policy = &flagPolicy
			}
			return g.withLockedRepo(cmd.Context(), repo.LockShared, "forget", func(r *repo.Repository, l *repo.Lock) error {
				res, err := checkpoint.PlanForget(cmd.Context(), r, o)
				if errors.Is(err, checkpoint.ErrNoPolicy) {
					return usageError{"no retention policy: give --keep-* flags, or store one with `lifeboat policy set --workspace ID --keep-...`"}
				}
				if err != nil {
					return err
				}
				for id, e := range res.Unreadable {
					g.out.note("snapshot %s does not load and is left alone: %v", id.Short(), e)
				}
				for _, w := range res.Unmanaged {
					g.out.note("workspace %q has no stored policy; its snapshots (%d) are left alone", w, res.Left[w])
				}
				for _, warn := range res.Warnings {
					g.out.note("warning: %s", warn)
				}
				if !dryRun {
					// Under an exclusive lock, with the pins read again: a
					// checkpoint `serve` promoted meanwhile stays.
					if err := checkpoint.RemovePlanned(cmd.Context(), r, l, g.lockOptions("forget"), &res); err != nil {
						return err
					}
				}
				for _, d := range res.Decisions {
					g.printDecision(d)
				}
				if ws != "" && res.Kept+res.Removed == 0 && len(res.Unreadable) == 0 {
					g.out.note("workspace %q has no snapshots in this repository (`lifeboat snapshots` lists them all)", ws)
				}
				sum := forgetMessage{MessageType: "forget", DryRun: dryRun, Kept: res.Kept, Removed: res.Removed, Warnings: res.Warnings, Gone: []string{}}
				for _, id := range res.Gone {
					sum.Gone = append(sum.Gone, id.String())
					g.out.note("snapshot %s was already removed (by another forget or a retention beside this one)", id.Short())
				}
				g.out.emit(sum, func(w io.Writer) {
					verb := "removed"
					if dryRun {
						verb = "would remove"
					}
					fmt.Fprintf(w, "kept %s, %s %d; run `lifeboat prune` to free their data\n", count(sum.Kept, "snapshot"), verb, sum.Removed)
				})
				return nil
			})
		},
	}
	pf.add(cmd)
	cmd.Flags().StringVar(&ws, "workspace", "", "only this workspace")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "only show what would be kept and removed, and why")
	return cmd
}

// printDecision prints one decision of checkpoint.PlanForget, as carried
// out.
func (g *globalOptions) printDecision(d prune.Decision) {
	s := d.Snapshot
	msg := forgetSnapshotMessage{MessageType: "forget_snapshot", ID: s.ID.String(), Workspace: s.Workspace, Time: s.Time,
		Complete: s.Complete, Keep: d.Keep, Reasons: d.Reasons}
	if msg.Reasons == nil {
		msg.Reasons = []string{}
	}
	g.out.emit(msg, func(w io.Writer) {
		state := ""
		if !s.Complete {
			state = " (partial)"
		}
		if d.Keep {
			fmt.Fprintf(w, "keep    %s  %s  %s%s  %v\n", s.ID.Short(), s.Time.Local().Format(time.DateTime), s.Workspace, state, d.Reasons)
		} else {
			fmt.Fprintf(w, "remove  %s  %s  %s%s\n", s.ID.Short(), s.Time.Local().Format(time.DateTime), s.Workspace, state)
		}
	})
}
