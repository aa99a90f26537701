package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/repo"
	"lifeboat/snapshot"
)

type restoreOptions struct {
	target    string
	workspace string
	includes  []string
	replace   bool
	workers   int
	profiles  bool
}

type restoreMessage struct {
	MessageType string   `json:"message_type"` // "restored"
	Snapshot    string   `json:"snapshot"`
	Target      string   `json:"target"`
	Files       uint64   `json:"files"`
	Dirs        uint64   `json:"dirs"`
	Bytes       uint64   `json:"bytes"`
	Skipped     []string `json:"skipped"`
	Leftover    string   `json:"leftover,omitempty"`
	Seconds     float64  `json:"seconds"`
	// Sensitive says what became of the snapshot's browser profiles:
	// "none" (it has none), "restored", "not_requested" (no --profiles),
	// or "locked" (the key in use cannot open them).
	Sensitive string       `json:"sensitive"`
	Profiles  []profileRef `json:"profiles"` // restored profiles
}

func newRestoreCommand(g *globalOptions) *cobra.Command {
	var o restoreOptions
	cmd := &cobra.Command{
		Use:   "restore --target DIR SNAPSHOT",
		Short: "Restore a snapshot into a directory, through staging",
		Long: "Rebuild SNAPSHOT (an id, a unique id prefix, or `latest` with --workspace) in a staging directory next to DIR, verify every " +
			"file, then put it in place: a new DIR by rename, an existing DIR only with --replace, by an atomic exchange. A failed or " +
			"interrupted restore leaves DIR exactly as it was.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.target == "" {
				return usageError{"--target is required"}
			}
			if o.profiles && len(o.includes) > 0 {
				return usageError{"--profiles restores whole browser profiles and cannot be combined with --include"}
			}
			return g.withLockedRepo(cmd.Context(), repo.LockShared, "restore", func(r *repo.Repository, _ *repo.Lock) error {
				m, err := snapshot.Find(cmd.Context(), r, args[0], o.workspace)
				if err != nil {
					return err
				}
				ro := snapshot.RestoreOptions{Target: o.target, Replace: o.replace, Includes: o.includes, Workers: o.workers}
				sens, profs, err := restoreProfiles(cmd.Context(), r, m, o.profiles, &ro)
				if err != nil {
					return err
				}
				prog := newProgress(g.out, "restoring")
				ro.Progress = prog
				start := time.Now()
				res, err := snapshot.Restore(cmd.Context(), r, m, ro)
				prog.finish()
				if err != nil {
					return err
				}
				g.profileProblems(*profs.problems)
				msg := restoreMessage{"restored", m.ID.String(), o.target, res.Files, res.Dirs, res.Bytes, res.Skipped, res.Leftover, time.Since(start).Seconds(),
					sens, profs.refs}
				if msg.Skipped == nil {
					msg.Skipped = []string{}
				}
				g.out.emit(msg, func(w io.Writer) {
					fmt.Fprintf(w, "restored snapshot %s into %s: %d files, %d dirs, %s in %.2fs\n", m.ID.Short(), o.target, res.Files, res.Dirs,
						snapshot.HumanBytes(res.Bytes), msg.Seconds)
					for _, s := range res.Skipped {
						fmt.Fprintf(w, "skipped %s (sockets and devices are not restored)\n", quoteName(s))
					}
					if res.Leftover != "" {
						fmt.Fprintf(w, "the replaced tree could not be deleted; remove %s by hand\n", res.Leftover)
					}
					restoreSensitiveText(w, sens, profs.refs)
				})
				if len(*profs.problems) > 0 {
					return profileFlaggedError{len(*profs.problems)}
				}
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.target, "target", "", "directory to restore into (required)")
	f.StringVar(&o.workspace, "workspace", "", "workspace whose latest snapshot `latest` means")
	f.StringArrayVar(&o.includes, "include", nil, "restore only this `PATH` of the snapshot (repeatable)")
	f.BoolVar(&o.replace, "replace", false, "replace an existing target, atomically")
	f.IntVar(&o.workers, "workers", 0, "files written in parallel (default: twice the CPUs)")
	f.BoolVar(&o.profiles, "profiles", false, "also restore the snapshot's browser profiles, each at its path (needs a key with the sensitive tier)")
	return cmd
}
