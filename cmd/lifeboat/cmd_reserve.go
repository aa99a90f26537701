package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"lifeboat/repo"
)

type reserveMessage struct {
	MessageType string `json:"message_type"` // "reserve"
	repo.Reserved
}

func newReserveCommand(g *globalOptions) *cobra.Command {
	var mib int64
	var free bool
	cmd := &cobra.Command{
		Use:   "reserve [--mib N | --free]",
		Short: "Hold disk space in reserve for when the repository's disk is full",
		Long: fmt.Sprintf("Show, set or release the repository's reserve: blocks of %d MiB of random bytes that only take space. "+
			"Commands write a lock first (check too), so when the repository's disk is full forget and prune cannot run. "+
			"Set a reserve while there is room (--mib N: the fewest whole blocks holding N MiB); when the disk is full, "+
			"--free releases it (it writes nothing and takes no lock), then forget and prune free more, and --mib sets it again. "+
			"Without a flag, shows the reserve.", repo.ReserveBlockSize>>20),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			set := cmd.Flags().Changed("mib")
			switch {
			case set && free:
				return usageError{"--mib and --free: give one of them"}
			case set && (mib < 0 || mib > repo.MaxReserve>>20):
				return usageError{fmt.Sprintf("--mib %d: want 0 to %d", mib, int64(repo.MaxReserve>>20))}
			}
			return g.withRepo(cmd.Context(), false, func(r *repo.Repository) error {
				var res repo.Reserved
				var err error
				switch {
				case free:
					res, err = r.SetReserve(cmd.Context(), 0)
				case set:
					res, err = r.SetReserve(cmd.Context(), mib<<20)
				default:
					res, err = r.Reserved(cmd.Context())
				}
				if err != nil && (free || set) {
					// Say what the blocks saved or removed before the failure left.
					if now, lerr := r.Reserved(context.WithoutCancel(cmd.Context())); lerr == nil {
						err = fmt.Errorf("%w; the reserve now holds %s, %d MiB", err, count(now.Blocks, "block"), now.Bytes>>20)
					}
				}
				if err != nil {
					return err
				}
				g.out.emit(reserveMessage{"reserve", res}, func(w io.Writer) {
					fmt.Fprintf(w, "reserve: %s, %d MiB\n", count(res.Blocks, "block"), res.Bytes>>20)
				})
				return nil
			})
		},
	}
	cmd.Flags().Int64Var(&mib, "mib", 0, "hold this many MiB in reserve (rounded up to whole blocks; 0 releases it)")
	cmd.Flags().BoolVar(&free, "free", false, "release the whole reserve (on a full disk, before forget and prune)")
	return cmd
}
