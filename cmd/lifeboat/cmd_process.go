package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"lifeboat/recovery"
	"lifeboat/server"
)

type processMessage struct {
	MessageType string `json:"message_type"` // "process"
	recovery.RegisteredProcess
}

type lostProcessMessage struct {
	MessageType string `json:"message_type"` // "lost_process"
	server.LostProcess
}

type processRestartMessage struct {
	MessageType string `json:"message_type"` // "process_restart"
	server.ProcessRestart
}

func newProcessCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "process",
		Short: "Register the commands a workspace runs, and restart those a recovery lost (through a running server)",
		Long: "Checkpoints record the commands registered in a workspace (command, directory, the tail of their output). None " +
			"survives a recovery: each is reported lost and can be restarted explicitly, once per idempotency key.",
	}
	cmd.AddCommand(newProcessRegisterCommand(g), newProcessOutputCommand(g), newProcessExitCommand(g),
		newProcessListCommand(g), newProcessRestartCommand(g))
	return cmd
}

func (g *globalOptions) emitProcess(p recovery.RegisteredProcess) {
	g.out.emit(processMessage{"process", p}, func(w io.Writer) {
		state := "running"
		if !p.Running && p.ExitCode != nil {
			state = "exited " + strconv.Itoa(*p.ExitCode)
		}
		fmt.Fprintf(w, "%s  %s  %s  in %s\n", p.ID, state, strings.Join(p.Command, " "), p.Dir)
	})
}

func newProcessRegisterCommand(g *globalOptions) *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "register WORKSPACE [--dir DIR] -- COMMAND [ARG...]",
		Short: "Register a command the workspace runs; prints its id",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.needClient("process register")
			if err != nil {
				return err
			}
			p, err := c.RegisterProcess(cmd.Context(), args[0], args[1:], dir)
			if err == nil {
				g.emitProcess(p)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "its working directory")
	return cmd
}

func newProcessOutputCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "output WORKSPACE ID",
		Short: "Append standard input to a registered process's output as it arrives (only the tail is kept)",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.needClient("process output")
			if err != nil {
				return err
			}
			buf := make([]byte, 64<<10)
			for {
				n, rerr := g.stdin.Read(buf)
				if n > 0 {
					if err := c.ProcessOutput(cmd.Context(), args[0], args[1], buf[:n]); err != nil {
						return err
					}
				}
				if rerr == io.EOF {
					return nil
				}
				if rerr != nil {
					return fmt.Errorf("reading standard input: %w", rerr)
				}
			}
		},
	}
}

func newProcessExitCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "exit WORKSPACE ID CODE",
		Short: "Record a registered process's exit",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			code, err := strconv.Atoi(args[2])
			if err != nil {
				return usageError{fmt.Sprintf("exit code %q is not a number", args[2])}
			}
			c, err := g.needClient("process exit")
			if err != nil {
				return err
			}
			p, err := c.ProcessExit(cmd.Context(), args[0], args[1], code)
			if err == nil {
				g.emitProcess(p)
			}
			return err
		},
	}
}

func newProcessListCommand(g *globalOptions) *cobra.Command {
	var lost bool
	cmd := &cobra.Command{
		Use:   "list WORKSPACE [--lost]",
		Short: "List the registered processes, or (--lost) those the last recovery lost with their last output",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.needClient("process list")
			if err != nil {
				return err
			}
			if !lost {
				ps, err := c.RegisteredProcesses(cmd.Context(), args[0])
				for _, p := range ps {
					g.emitProcess(p)
				}
				return err
			}
			ps, err := c.LostProcesses(cmd.Context(), args[0])
			for _, p := range ps {
				g.out.emit(lostProcessMessage{"lost_process", p}, func(w io.Writer) {
					fmt.Fprintf(w, "%s  %s  %s  in %s\n", p.ID, p.State, strings.Join(p.Command, " "), p.Dir)
					if p.LastOutput != "" {
						fmt.Fprintf(w, "    last output: %s\n", strings.ReplaceAll(strings.TrimSpace(p.LastOutput), "\n", "\n    "))
					}
					if r := p.Restart; r != nil {
						fmt.Fprint(w, "    restart: ")
						printRestart(w, *r)
					}
				})
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&lost, "lost", false, "list the processes the last recovery lost")
	return cmd
}

func newProcessRestartCommand(g *globalOptions) *cobra.Command {
	var key string
	cmd := &cobra.Command{
		Use:   "restart WORKSPACE ID [--idempotency-key KEY]",
		Short: "Restart a lost process in the workspace's current instance, once per idempotency key",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := g.needClient("process restart")
			if err != nil {
				return err
			}
			if key == "" {
				key = server.NewIdempotencyKey()
				g.out.note("idempotency key %s (pass it again with --idempotency-key to retry this restart)", key)
			}
			r, err := c.RestartProcess(cmd.Context(), args[0], args[1], key)
			if err != nil {
				return err
			}
			g.out.emit(processRestartMessage{"process_restart", r}, func(w io.Writer) {
				fmt.Fprintf(w, "process %s of %s: ", r.Process, r.Workspace)
				printRestart(w, r)
			})
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "idempotency-key", "", "the restart's idempotency key (default: a new one, printed)")
	return cmd
}

// printRestart prints a restart's state, exit code and error on one line,
// then its output.
func printRestart(w io.Writer, r server.ProcessRestart) {
	fmt.Fprint(w, r.State)
	if r.ExitCode != nil {
		fmt.Fprintf(w, " (exit code %d)", *r.ExitCode)
	}
	if r.Error != "" {
		fmt.Fprintf(w, ": %s", r.Error)
	}
	fmt.Fprintln(w)
	if out := strings.TrimSpace(r.Output); out != "" {
		fmt.Fprintf(w, "    output: %s\n", strings.ReplaceAll(out, "\n", "\n    "))
	}
}
