package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"lifeboat/demo"
)

type demoMessage struct {
	MessageType string `json:"message_type"` // "demo_step"
	demo.Step
}

func newDemoCommand(g *globalOptions) *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Show the whole job, from a sandbox to its recovery, in a temporary directory",
		Long: "In a temporary directory, with built-in defaults and the local provider: make a repository, a state store and a sandbox " +
			"holding a sample workspace and a signed-in browser profile, checkpoint it, change it, checkpoint again, destroy the sandbox, " +
			"detect the loss, show the recovery offer, approve it with an idempotency key, restore into a replacement sandbox through " +
			"staging, and confirm the files, the browser session and the unchanged workspace id on a new instance and generation, " +
			"printing each step and how fast it ran. Needs no repository, password or setup.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := os.MkdirTemp("", "lifeboat-demo-")
			if err != nil {
				return err
			}
			if !keep {
				defer os.RemoveAll(dir)
			}
			err = demo.Run(cmd.Context(), dir, func(s demo.Step) {
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
