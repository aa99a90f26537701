package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/providers"
	"lifeboat/providers/local"
	"lifeboat/recovery"
	"lifeboat/server"
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
	cmd.AddCommand(newWorkspaceAddCommand(g), newWorkspaceListCommand(g), newWorkspaceShowCommand(g),
		newWorkspaceSetCommand(g), newWorkspaceRemoveCommand(g), newWorkspaceCheckCommand(g))
	return cmd
}

func newWorkspaceAddCommand(g *globalOptions) *cobra.Command {
	var provider, instance, park, periodic string
	cmd := &cobra.Command{
		Use:   "add ID",
		Short: "Register a workspace: its stable id, provider and instance",
		Long: "Register workspace ID, whose files live in instance --instance (default: ID) of provider instance --provider. The " +
			"instance must exist: for the local provider, a directory under its root. Against a running server (--server, or " +
			"--config) the server registers it while it runs, with any provider instance of its config; without one, the state " +
			"store in --state-dir is changed directly (local provider only, and not while a server holds the store).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := recovery.ValidWorkspaceID(args[0]); err != nil {
				return err
			}
			if c, err := g.client(); err != nil || c != nil {
				if err != nil {
					return err
				}
				v, err := c.AddWorkspace(cmd.Context(), server.AddWorkspace{ID: args[0], Provider: provider, Instance: instance,
					ParkInterval: park, PeriodicInterval: periodic})
				if err != nil {
					return err
				}
				g.emitWorkspaceView(v)
				return nil
			}
			if park != "" || periodic != "" {
				return usageError{"--park-interval and --periodic-interval are set through a running server (--server or --config)"}
			}
			if instance == "" {
				instance = args[0]
			}
			p, err := g.provider(provider)
			if err != nil {
				return err
			}
			return g.withState(func(s *recovery.Store) error {
				if err := s.CheckNewID(args[0]); err != nil {
					return err
				}
				st, err := p.Inspect(cmd.Context(), providers.InstanceID(instance))
				if err != nil {
					return err
				}
				if st.State == providers.Missing {
					return usageError{fmt.Sprintf("instance %q of provider %s does not exist (%s)", instance, provider, st.Detail)}
				}
				w := recovery.Workspace{ID: args[0], Provider: provider, Instance: providers.InstanceID(instance), Created: time.Now().UTC()}
				if err := s.AddWorkspace(w); err != nil {
					return err
				}
				g.out.emit(workspaceMessage{MessageType: "workspace", Workspace: w}, func(out io.Writer) {
					fmt.Fprintf(out, "workspace %s added (provider %s, instance %s)\n", w.ID, w.Provider, w.Instance)
				})
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&provider, "provider", local.Name, "provider instance holding the instance (a name of the server's config)")
	cmd.Flags().StringVar(&instance, "instance", "", "the provider's instance id (default: the workspace id)")
	cmd.Flags().StringVar(&park, "park-interval", "", "this workspace's park interval (default: the server's)")
	cmd.Flags().StringVar(&periodic, "periodic-interval", "", "this workspace's periodic interval (default: the server's)")
	return cmd
}

func newWorkspaceListCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the registered workspaces",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if c, err := g.client(); err != nil || c != nil {
				if err != nil {
					return err
				}
				vs, err := c.Workspaces(cmd.Context())
				for _, v := range vs {
					g.emitWorkspaceView(v)
				}
				return err
			}
			return g.withState(func(s *recovery.Store) error {
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
			})
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
			if c, err := g.client(); err != nil || c != nil {
				if err != nil {
					return err
				}
				v, err := c.Workspace(cmd.Context(), args[0])
				if err == nil {
					g.emitWorkspaceView(v)
				}
				return err
			}
			return g.withState(func(s *recovery.Store) error {
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
			})
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
	printCaptureState(out, w.Native, w.InFlight, w.Failures, w.Recovery)
	for _, p := range pending {
		fmt.Fprintf(out, "pending     delete native checkpoint %s (%s; last error: %s)\n", p.Checkpoint, count(p.Attempts, "attempt"), p.LastError)
	}
}

type workspaceViewMessage struct {
	MessageType string `json:"message_type"` // "workspace"
	server.WorkspaceView
}

// emitWorkspaceView prints a workspace as a server shows it.
func (g *globalOptions) emitWorkspaceView(v server.WorkspaceView) {
	g.out.emit(workspaceViewMessage{"workspace", v}, func(out io.Writer) {
		fmt.Fprintf(out, "workspace   %s\nprovider    %s\ninstance    %s (generation %d)\n", v.ID, v.Provider, v.Instance, v.Generation)
		lg := "none"
		if v.LastGood != nil {
			lg = short(v.LastGood.Snapshot) + " " + v.LastGood.Time.Local().Format(time.DateTime)
		}
		fmt.Fprintf(out, "last good   %s\nintervals   park %s, periodic %s\nstate       %s", lg, v.Settings.ParkInterval, v.Settings.PeriodicInterval, v.Recovery.State)
		if v.Recovery.Action != "" {
			fmt.Fprintf(out, ": %s", v.Recovery.Action)
		}
		fmt.Fprintln(out)
		for _, h := range v.Recovery.Holds {
			fmt.Fprintf(out, "repair hold %s: keeps %s (%s)\n", h.ID, h.TargetInstance, h.Error)
		}
		if r := v.LastRestart; r != nil {
			fmt.Fprintf(out, "restarted   %s to native checkpoint %s (%s to %s)\n", r.Time.Local().Format(time.DateTime), r.Checkpoint, r.From, r.To)
		}
		printCaptureState(out, v.Native, v.InFlight, v.Failures, v.Records)
		fmt.Fprintln(out)
	})
}

// printCaptureState prints a workspace's native checkpoint, its capture in
// flight, and its failures since the last good checkpoint with their
// records, the same with a server and without.
func printCaptureState(out io.Writer, native *recovery.NativeCheckpoint, inFlight *recovery.InFlight, failures int, records []recovery.RecoveryRecord) {
	if native != nil {
		fmt.Fprintf(out, "native      %s (%s)\n", native.ID, native.Time.Local().Format(time.DateTime))
	}
	if inFlight != nil {
		fmt.Fprintf(out, "in flight   %s capture started %s by process %d\n", inFlight.Reason, inFlight.Started.Local().Format(time.DateTime), inFlight.PID)
	}
	fmt.Fprintf(out, "failures    %d since the last good checkpoint\n", failures)
	for _, r := range records {
		fmt.Fprintf(out, "  %s  %-8s attempt %d  %s: %s\n", r.Time.Local().Format(time.DateTime), r.Reason, r.Attempt, r.Outcome, r.Error)
	}
}

func newWorkspaceSetCommand(g *globalOptions) *cobra.Command {
	var instance, park, periodic string
	cmd := &cobra.Command{
		Use:   "set ID [--instance NATIVE-ID] [--park-interval D] [--periodic-interval D]",
		Short: "Change a workspace: its new instance after a normal wake, its intervals",
		Long: "Change workspace ID while the server runs: --instance records the sandbox's new native id after a normal wake (the " +
			"generation moves on, so requests for the old instance are refused); the intervals take a duration, or `default`.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := server.ChangeWorkspace{}
			f := cmd.Flags()
			if f.Changed("instance") {
				req.Instance = &instance
			}
			if f.Changed("park-interval") {
				req.ParkInterval = &park
			}
			if f.Changed("periodic-interval") {
				req.PeriodicInterval = &periodic
			}
			c, err := g.needClient("workspace set")
			if err != nil {
				return err
			}
			v, err := c.ChangeWorkspace(cmd.Context(), args[0], req)
			if err == nil {
				g.emitWorkspaceView(v)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&instance, "instance", "", "the sandbox's new native instance id")
	cmd.Flags().StringVar(&park, "park-interval", "", "park interval (a duration, or default)")
	cmd.Flags().StringVar(&periodic, "periodic-interval", "", "periodic interval (a duration, or default)")
	return cmd
}

type removedMessage struct {
	MessageType string `json:"message_type"` // "workspace_removed"
	recovery.Removed
}

func newWorkspaceRemoveCommand(g *globalOptions) *cobra.Command {
	var forget bool
	cmd := &cobra.Command{
		Use:   "remove ID [--forget-checkpoints]",
		Short: "Stop managing a workspace (its checkpoints stay unless --forget-checkpoints)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.needClient("workspace remove")
			if err != nil {
				return err
			}
			res, err := c.RemoveWorkspace(cmd.Context(), args[0], forget)
			if err != nil {
				return err
			}
			g.out.emit(removedMessage{"workspace_removed", res}, func(out io.Writer) {
				fmt.Fprintf(out, "workspace %s removed; kept: %s\n", res.Workspace, res.Kept)
				if res.Forgotten > 0 || len(res.NativeDeleted) > 0 {
					fmt.Fprintf(out, "forgot %s (the next prune frees their data), deleted native checkpoints %v\n", count(res.Forgotten, "snapshot"), res.NativeDeleted)
				}
			})
			return nil
		},
	}
	cmd.Flags().BoolVar(&forget, "forget-checkpoints", false, "also forget its snapshots and delete its native checkpoints")
	return cmd
}

func newWorkspaceCheckCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "check ID",
		Short: "Inspect a workspace's instance now (a lost sandbox is seen at once, not at the next scheduled check)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.needClient("workspace check")
			if err != nil {
				return err
			}
			st, err := c.Check(cmd.Context(), args[0])
			if err == nil {
				g.emitRecoveryState(st)
			}
			return err
		},
	}
}
