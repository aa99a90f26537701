package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/providers"
	"lifeboat/providers/local"
	"lifeboat/recovery"
)

type workspaceMessage struct {
	MessageType string `json:"message_type"` // "workspace"
	recovery.Workspace
	Pending     []recovery.PendingDelete `json:"pending,omitempty"`
	Checkpoints *int                     `json:"checkpoints,omitempty"` // show only: checkpoints recorded
}

func newWorkspaceCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "workspace",
		Short: "Register and inspect the workspaces the lifecycle checkpoints (needs --state-dir)",
	}
	cmd.AddCommand(newWorkspaceAddCommand(g), newWorkspaceListCommand(g), newWorkspaceShowCommand(g))
	return cmd
}

func newWorkspaceAddCommand(g *globalOptions) *cobra.Command {
	var provider, instance string
	cmd := &cobra.Command{
		Use:   "add ID",
		Short: "Register a workspace: its stable id, provider and instance",
		Long: "Register workspace ID, whose files live in instance --instance (default: ID) of provider --provider. The instance must " +
			"exist: for the local provider, a directory under --local-root.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := recovery.ValidWorkspaceID(args[0]); err != nil {
				return err
			}
			if instance == "" {
				instance = args[0]
			}
			p, err := g.provider(provider)
			if err != nil {
				return err
			}
			st, err := p.Inspect(cmd.Context(), providers.InstanceID(instance))
			if err != nil {
				return err
			}
			if st.State == providers.Missing {
				return usageError{fmt.Sprintf("instance %q of provider %s does not exist (%s)", instance, provider, st.Detail)}
			}
			s, err := g.openState()
			if err != nil {
				return err
			}
			defer s.Close()
			w := recovery.Workspace{ID: args[0], Provider: provider, Instance: providers.InstanceID(instance), Created: time.Now().UTC()}
			if err := s.AddWorkspace(w); err != nil {
				return err
			}
			g.out.emit(workspaceMessage{MessageType: "workspace", Workspace: w}, func(out io.Writer) {
				fmt.Fprintf(out, "workspace %s added (provider %s, instance %s)\n", w.ID, w.Provider, w.Instance)
			})
			return nil
		},
	}
	cmd.Flags().StringVar(&provider, "provider", local.Name, "provider holding the instance")
	cmd.Flags().StringVar(&instance, "instance", "", "the provider's instance id (default: the workspace id)")
	return cmd
}

func newWorkspaceListCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the registered workspaces",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := g.openState()
			if err != nil {
				return err
			}
			defer s.Close()
			wss, err := s.Workspaces()
			if err != nil {
				return err
			}
			for _, w := range wss {
				g.out.emit(workspaceMessage{MessageType: "workspace", Workspace: w}, func(out io.Writer) {
					fmt.Fprintf(out, "%-24s %-8s %-24s last good %s  failures %d\n", w.ID, w.Provider, w.Instance, lastGood(w), w.Failures)
				})
			}
			return nil
		},
	}
}

func lastGood(w recovery.Workspace) string {
	if w.LastGood == nil {
		return "none"
	}
	return short(w.LastGood.Snapshot) + " " + w.LastGood.Time.Local().Format(time.DateTime)
}

func newWorkspaceShowCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show a workspace: last good and native checkpoints, recovery records, pending work",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := g.openState()
			if err != nil {
				return err
			}
			defer s.Close()
			w, err := s.Workspace(args[0])
			if err != nil {
				return err
			}
			pending, err := s.Pending(w.ID)
			if err != nil {
				return err
			}
			cps, err := s.Checkpoints(w.ID)
			if err != nil {
				return err
			}
			n := len(cps)
			g.out.emit(workspaceMessage{"workspace", w, pending, &n}, func(out io.Writer) { printWorkspace(out, w, pending, n) })
			return nil
		},
	}
}

func printWorkspace(out io.Writer, w recovery.Workspace, pending []recovery.PendingDelete, checkpoints int) {
	fmt.Fprintf(out, "workspace   %s\nprovider    %s\ninstance    %s (generation %d)\n", w.ID, w.Provider, w.Instance, w.Generation)
	fmt.Fprintf(out, "last good   %s\n", lastGood(w))
	if w.LastGood != nil {
		for _, p := range w.LastGood.Processes {
			fmt.Fprintf(out, "  process   %q in %s since %s\n", p.Command, p.Dir, p.Started.Local().Format(time.DateTime))
		}
	}
	fmt.Fprintf(out, "checkpoints %d recorded\n", checkpoints)
	if w.Native != nil {
		fmt.Fprintf(out, "native      %s (%s)\n", w.Native.ID, w.Native.Time.Local().Format(time.DateTime))
	}
	if w.InFlight != nil {
		fmt.Fprintf(out, "in flight   %s capture started %s by process %d\n", w.InFlight.Reason, w.InFlight.Started.Local().Format(time.DateTime), w.InFlight.PID)
	}
	fmt.Fprintf(out, "failures    %d since the last good checkpoint\n", w.Failures)
	for _, r := range w.Recovery {
		fmt.Fprintf(out, "  %s  %-8s attempt %d  %s: %s\n", r.Time.Local().Format(time.DateTime), r.Reason, r.Attempt, r.Outcome, r.Error)
	}
	for _, p := range pending {
		fmt.Fprintf(out, "pending     delete native checkpoint %s (%d attempts; last error: %s)\n", p.Checkpoint, p.Attempts, p.LastError)
	}
}
