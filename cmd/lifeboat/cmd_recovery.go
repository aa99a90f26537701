package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/server"
)

type recoveryStateMessage struct {
	MessageType string `json:"message_type"` // "recovery_state"
	server.RecoveryState
}

type offerMessage struct {
	MessageType string `json:"message_type"` // "offer"
	server.Offer
}

type operationMessage struct {
	MessageType string `json:"message_type"` // "operation"
	server.Operation
}

type holdMessage struct {
	MessageType string `json:"message_type"` // "repair_hold"
	server.RepairHold
	Allocation any `json:"allocation,omitempty"`
}

func newRecoveryCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "recovery",
		Short: "See and drive the recovery of lost workspaces through a running server",
		Long: "The recovery commands talk to a running `lifeboat serve` (--server URL and --token-file, or --config): a workspace's " +
			"recovery state, the offer of a lost one, approval (once per idempotency key), operations and repair holds.",
	}
	cmd.AddCommand(newRecoveryStateCommand(g), newRecoveryOfferCommand(g), newRecoveryApproveCommand(g),
		newRecoveryOperationsCommand(g), newRecoveryOperationCommand(g), newRecoveryHoldsCommand(g), newRecoveryHoldCommand(g), newRecoveryResolveCommand(g))
	return cmd
}

// emitRecoveryState prints a workspace's recovery state.
func (g *globalOptions) emitRecoveryState(st server.RecoveryState) {
	g.out.emit(recoveryStateMessage{"recovery_state", st}, func(w io.Writer) {
		fmt.Fprintf(w, "workspace %s: %s (instance %s, generation %d)\n", st.Workspace, st.State, st.Instance, st.Generation)
		if st.Detail != "" && st.State != server.StateHealthy {
			fmt.Fprintf(w, "  found: %s\n", st.Detail)
		}
		if st.Action != "" {
			fmt.Fprintf(w, "  %s\n", st.Action)
		}
		if st.Operation != "" {
			fmt.Fprintf(w, "  operation %s\n", st.Operation)
		}
		for _, h := range st.Holds {
			fmt.Fprintf(w, "  repair hold %s keeps %s\n", h.ID, h.TargetInstance)
		}
		if st.Offer != nil {
			fmt.Fprintf(w, "  offer: checkpoint %s (see `lifeboat recovery offer %s`)\n", st.Offer.Checkpoint, st.Workspace)
		}
	})
}

func newRecoveryStateCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "state WORKSPACE",
		Short: "Show a workspace's recovery state",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.needClient("recovery state")
			if err != nil {
				return err
			}
			st, err := c.RecoveryState(cmd.Context(), args[0])
			if err == nil {
				g.emitRecoveryState(st)
			}
			return err
		},
	}
}

func newRecoveryOfferCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "offer WORKSPACE",
		Short: "Show the recovery offer of a lost workspace: the checkpoint, what cannot come back, the candidates",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.needClient("recovery offer")
			if err != nil {
				return err
			}
			o, err := c.Offer(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			g.out.emit(offerMessage{"offer", o}, func(w io.Writer) {
				fmt.Fprintf(w, "workspace %s can be recovered from checkpoint %s (taken %s, %s ago)\n", o.Workspace, o.Checkpoint,
					o.CheckpointTime.Local().Format(time.DateTime), time.Duration(o.AgeSeconds*float64(time.Second)).Round(time.Second))
				if o.Warning != "" {
					fmt.Fprintf(w, "warning: %s\n", o.Warning)
				}
				fmt.Fprintf(w, "browser profile: %t\nwill not come back:\n", o.Profile)
				for _, n := range o.NotRecoverable {
					fmt.Fprintf(w, "  - %s\n", n)
				}
				for _, p := range o.LostProcesses {
					fmt.Fprintf(w, "process reported lost: %s\n", strings.Join(p.Command, " "))
				}
				fmt.Fprintln(w, "candidates:")
				for _, cd := range o.Candidates {
					state := "readable"
					if !cd.Readable {
						state = "cannot be read: " + cd.Problem
					}
					lg := ""
					if cd.LastGood {
						lg = " (last good)"
					}
					fmt.Fprintf(w, "  %s  %s  %s%s  %s\n", cd.Checkpoint, cd.Time.Local().Format(time.DateTime), cd.Reason, lg, state)
				}
				fmt.Fprintf(w, "approve with: lifeboat recovery approve %s --checkpoint %s\n", o.Workspace, o.Checkpoint)
			})
			return nil
		},
	}
}

func newRecoveryApproveCommand(g *globalOptions) *cobra.Command {
	var checkpoint, key string
	var wait bool
	cmd := &cobra.Command{
		Use:   "approve WORKSPACE --checkpoint ID [--idempotency-key KEY] [--wait]",
		Short: "Approve the recovery of a lost workspace into a replacement (once per idempotency key)",
		Long: "Approve the recovery of WORKSPACE from checkpoint --checkpoint (the offer's, or one of its earlier candidates). The " +
			"same --idempotency-key, repeated, returns the same operation and starts nothing new; without one a new key is made and " +
			"printed, so a retry can reuse it. --wait follows the operation until it ends (exit 0 when recovered, 1 when failed).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if checkpoint == "" {
				return usageError{"approve needs --checkpoint ID: the checkpoint the offer names (`lifeboat recovery offer " + args[0] + "`)"}
			}
			c, err := g.needClient("recovery approve")
			if err != nil {
				return err
			}
			if key == "" {
				key = server.NewIdempotencyKey()
				g.out.note("idempotency key %s (pass it again with --idempotency-key to retry this approval)", key)
			}
			op, err := c.Approve(cmd.Context(), args[0], checkpoint, key)
			if err != nil {
				return err
			}
			if wait {
				if op, err = c.WaitOperation(cmd.Context(), op.ID, 500*time.Millisecond); err != nil {
					return err
				}
			}
			g.emitOperation(op)
			if wait && op.Step == "failed" {
				return fmt.Errorf("recovery %s failed: %s; %s", op.ID, op.Error, op.Action)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&checkpoint, "checkpoint", "", "the checkpoint to recover (required)")
	cmd.Flags().StringVar(&key, "idempotency-key", "", "the approval's idempotency key (default: a new one, printed)")
	cmd.Flags().BoolVar(&wait, "wait", false, "wait until the operation has ended")
	return cmd
}

func (g *globalOptions) emitOperation(op server.Operation) {
	g.out.emit(operationMessage{"operation", op}, func(w io.Writer) {
		fmt.Fprintf(w, "operation %s of %s: %s (checkpoint %s, key %s)\n", op.ID, op.Workspace, op.Step, op.Checkpoint, op.IdempotencyKey)
		if op.NewInstance != "" {
			fmt.Fprintf(w, "  replacement %s\n", op.NewInstance)
		}
		if op.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", op.Error)
		}
		if op.Action != "" {
			fmt.Fprintf(w, "  what to do: %s\n", op.Action)
		}
	})
}

func newRecoveryOperationCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "operation ID",
		Short: "Show one recovery operation",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.needClient("recovery operation")
			if err != nil {
				return err
			}
			op, err := c.Operation(cmd.Context(), args[0])
			if err == nil {
				g.emitOperation(op)
			}
			return err
		},
	}
}

func newRecoveryOperationsCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "operations [WORKSPACE]",
		Short: "List recovery operations, of every workspace or of one",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.needClient("recovery operations")
			if err != nil {
				return err
			}
			ws := ""
			if len(args) == 1 {
				ws = args[0]
			}
			ops, err := c.Operations(cmd.Context(), ws)
			for _, op := range ops {
				g.emitOperation(op)
			}
			return err
		},
	}
}

func (g *globalOptions) emitHold(h server.RepairHold, alloc any) {
	g.out.emit(holdMessage{"repair_hold", h, alloc}, func(w io.Writer) {
		state := "open"
		if h.Resolution != nil {
			state = "resolved as " + h.Resolution.Outcome + " by " + h.Resolution.Operator
		}
		fmt.Fprintf(w, "repair hold %s of %s (%s): keeps %s of provider %s; %s\n", h.ID, h.Workspace, state, h.TargetInstance, h.Provider, h.Error)
		if h.Stop != nil {
			fmt.Fprintf(w, "  stop: %s (%s)\n", h.Stop.Detail, h.Stop.Time.Local().Format(time.DateTime))
		}
	})
}

func newRecoveryHoldsCommand(g *globalOptions) *cobra.Command {
	var state string
	cmd := &cobra.Command{
		Use:   "holds [--state open|resolved|all]",
		Short: "List repair holds (operator token)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := g.needClient("recovery holds")
			if err != nil {
				return err
			}
			hs, err := c.RepairHolds(cmd.Context(), state)
			for _, h := range hs {
				g.emitHold(h, nil)
			}
			if err == nil && len(hs) == 0 {
				g.out.note("%s", strings.Replace("no "+state+" repair holds", "no all ", "no ", 1))
			}
			return err
		},
	}
	cmd.Flags().StringVar(&state, "state", "open", "open, resolved or all")
	return cmd
}

func newRecoveryHoldCommand(g *globalOptions) *cobra.Command {
	var stop bool
	cmd := &cobra.Command{
		Use:   "hold ID [--stop]",
		Short: "Show a repair hold and its kept allocation as the provider reports it now; --stop stops it again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.needClient("recovery hold")
			if err != nil {
				return err
			}
			if stop {
				if _, err := c.StopRepairHold(cmd.Context(), args[0]); err != nil {
					return err
				}
			}
			d, err := c.RepairHold(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			g.emitHold(d.RepairHold, d.Allocation)
			if !g.out.json {
				a := d.Allocation
				fmt.Fprintf(g.out.w, "  allocation %s of %s: %s %s %s\n", a.Instance, a.Provider, a.State, a.Detail, a.Error)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&stop, "stop", false, "stop the kept allocation (again) first")
	return cmd
}

func newRecoveryResolveCommand(g *globalOptions) *cobra.Command {
	var outcome, evidence string
	cmd := &cobra.Command{
		Use:   "resolve ID --outcome destroyed|repaired|kept --evidence TEXT",
		Short: "Resolve a repair hold (operator token)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if outcome == "" || evidence == "" {
				return usageError{"resolve needs --outcome (destroyed, repaired or kept) and --evidence (what was done, and how it was checked)"}
			}
			c, err := g.needClient("recovery resolve")
			if err != nil {
				return err
			}
			h, err := c.ResolveHold(cmd.Context(), args[0], outcome, evidence)
			if err == nil {
				g.emitHold(h, nil)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&outcome, "outcome", "", "destroyed, repaired or kept")
	cmd.Flags().StringVar(&evidence, "evidence", "", "what was done, and how it was checked")
	return cmd
}
