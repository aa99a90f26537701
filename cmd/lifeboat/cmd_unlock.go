package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/repo"
	"lifeboat/snapshot/restore"
)

type lockMessage struct {
	MessageType string    `json:"message_type"` // "lock"
	ID          string    `json:"id"`
	Mode        string    `json:"mode,omitempty"`
	Host        string    `json:"host,omitempty"`
	PID         int       `json:"pid,omitempty"`
	Command     string    `json:"command,omitempty"`
	Time        time.Time `json:"time,omitzero"`
	Refreshed   time.Time `json:"refreshed,omitzero"`
	Stale       string    `json:"stale,omitempty"` // why it is stale; empty when live
	Removed     bool      `json:"removed"`
}

func newUnlockCommand(g *globalOptions) *cobra.Command {
	var force, list bool
	cmd := &cobra.Command{
		Use:   "unlock",
		Short: "Remove stale repository locks",
		Long: "Remove locks whose holder is gone: not refreshed for " + repo.DefaultLockStale.String() + ", held by a PID that is not " +
			"running on this host, or unreadable. Live locks stay unless --force (only when you know their process is gone: " +
			"removing a live prune's lock lets others in while it deletes). --list only shows them. " +
			"Also removes the staging directories (.lifeboat-restore-*, .lifeboat-old-*) that restores run with this cache directory " +
			"left beside their targets when they were killed; a running restore's, and the pair a restore killed inside its switch leaves, stay and are named.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !list {
				g.cleanStaging()
			}
			return g.withRepo(cmd.Context(), false, func(r *repo.Repository) error {
				locks, err := r.ListLocks(cmd.Context())
				if err != nil {
					return err
				}
				removed := map[string]bool{}
				if !list {
					gone, err := r.RemoveLocks(cmd.Context(), force)
					for _, l := range gone {
						removed[l.ID.String()] = true
					}
					if err != nil {
						return err
					}
				}
				for _, l := range locks {
					msg := lockMessage{MessageType: "lock", ID: l.ID.String(), Mode: string(l.Mode), Host: l.Host, PID: l.PID, Command: l.Command,
						Time: l.Time, Refreshed: l.Refreshed, Stale: l.StaleReason, Removed: removed[l.ID.String()]}
					g.out.emit(msg, func(w io.Writer) {
						state := "live"
						if l.Stale() {
							state = "stale: " + l.StaleReason
						}
						verb := "kept"
						if msg.Removed {
							verb = "removed"
						}
						if list {
							verb = "lock"
						}
						fmt.Fprintf(w, "%s %s (%s)\n", verb, l, state)
					})
				}
				if len(locks) == 0 {
					g.out.note("no locks")
				}
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "remove live locks too")
	cmd.Flags().BoolVar(&list, "list", false, "only list the locks")
	return cmd
}

// cleanStaging removes what killed restores recorded in the cache
// directory left beside their targets, and says what it found. It never
// fails the command: a directory it cannot clean is named.
func (g *globalOptions) cleanStaging() {
	found, err := restore.CleanRecordedStaging(g.restoreRecords())
	for _, f := range found {
		if f.Removed {
			g.out.note("removed %s, left by a restore that did not finish", f.Path)
		} else {
			g.out.note("kept %s: %s", f.Path, f.Why)
		}
	}
	if err != nil {
		g.out.note("warning: %v", err)
	}
}
