package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"lifeboat/bench"
)

type demoMessage struct {
	MessageType string `json:"message_type"` // "demo_step"
	bench.Step
}

func newDemoCommand(g *globalOptions) *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Show the whole job on a sample workspace, in a temporary directory",
		Long: "Make a repository and a sample workspace in a temporary directory, capture it, change it, capture again, delete it, " +
			"restore the latest snapshot through staging and verify it file by file, printing each step and how fast it ran. " +
			"Needs no repository, password or setup.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := os.MkdirTemp("", "lifeboat-demo-")
			if err != nil {
				return err
			}
			if !keep {
				defer os.RemoveAll(dir)
			}
			err = bench.Demo(cmd.Context(), dir, func(s bench.Step) {
				g.out.emit(demoMessage{"demo_step", s}, func(w io.Writer) {
					rate := ""
					if s.MBps > 0 {
						rate = fmt.Sprintf(", %.0f MB/s", s.MBps)
					}
					fmt.Fprintf(w, "%-14s %7.3fs%s  %s\n", s.Name, s.Seconds, rate, s.Detail)
				})
			})
			if err == nil && keep {
				g.out.note("kept %s", dir)
			}
			return err
		},
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the temporary directory")
	return cmd
}
