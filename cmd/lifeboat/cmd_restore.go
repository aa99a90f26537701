package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/restore"
)

type restoreOptions struct {
	target    string
	workspace string
	includes  []string
	replace   bool
	workers   int
	profiles  bool
	// skipDamaged lets `latest` fall back past snapshots that cannot be
	// read; maxEntries and maxPlanMiB raise restore's plan limits.
	skipDamaged bool
	maxEntries  uint64
	maxPlanMiB  uint64
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
	// SkippedSnapshots are the snapshots `latest --skip-damaged` passed
	// over because they cannot be read; omitted when none.
	SkippedSnapshots []skippedSnapshot `json:"skipped_snapshots,omitempty"`
}

func newRestoreCommand(g *globalOptions) *cobra.Command {
	var o restoreOptions
	cmd := &cobra.Command{
		Use:   "restore --target DIR SNAPSHOT",
		Short: "Restore a snapshot into a directory, through staging",
		Long: "Rebuild SNAPSHOT (an id, a unique id prefix, or `latest` with --workspace) in a staging directory next to DIR, verify every " +
			"file, then put it in place: a new DIR by rename, an existing DIR only with --replace, by an atomic exchange. A failed or " +
			"interrupted restore leaves DIR exactly as it was. `latest` is the newest complete snapshot: if a snapshot that may be newer cannot " +
			"be read, restore fails (exit 13) and names it, unless --skip-damaged. A snapshot whose trees expand past --max-entries or " +
			"--max-plan-mib is refused before anything is written (exit 13).",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.target == "" {
				return usageError{"--target is required"}
			}
			if o.profiles && len(o.includes) > 0 {
				return usageError{"--profiles restores whole browser profiles and cannot be combined with --include"}
			}
			return g.withLockedRepo(cmd.Context(), repo.LockShared, "restore", func(r *repo.Repository, _ *repo.Lock) error {
				if err := restore.CheckTarget(r, o.target, g.ownDirs()); err != nil {
					return usageError{err.Error()}
				}
				m, skippedRefs, err := g.resolveSnapshot(cmd.Context(), r, args[0], o.workspace, o.skipDamaged, "restoring")
				if err != nil {
					return err
				}
				ro := restore.Options{Target: o.target, Replace: o.replace, Includes: o.includes, Workers: o.workers,
					Protect: g.ownDirs(), Records: g.restoreRecords()}
				sens, profs, err := restoreProfiles(cmd.Context(), r, m, o.profiles, &ro)
				if err != nil {
					return err
				}
				prog := newProgress(g.out, "restoring")
				ro.Progress = prog
				start := time.Now()
				res, err := restore.Run(o.limits(cmd.Context()), r, m, ro)
				prog.finish()
				if errors.Is(err, restore.ErrTargetOverlaps) {
					return usageError{err.Error()}
				}
				if errors.Is(err, restore.ErrTargetExists) {
					return fmt.Errorf("%w; to replace it, run the restore again with --replace", err)
				}
				if err != nil {
					return err
				}
				for _, c := range res.Cleaned {
					if c.Removed {
						g.out.note("removed %s, left beside the target by a restore that did not finish", c.Path)
					}
				}
				g.profileProblems(*profs.problems)
				msg := restoreMessage{"restored", m.ID.String(), o.target, res.Files, res.Dirs, res.Bytes, res.Skipped, res.Leftover, time.Since(start).Seconds(),
					sens, profs.refs, skippedRefs}
				if msg.Skipped == nil {
					msg.Skipped = []string{}
				}
				g.out.emit(msg, func(w io.Writer) {
					fmt.Fprintf(w, "restored snapshot %s into %s: %s, %s, %s in %.2fs\n", m.ID.Short(), o.target, count(res.Files, "file"), count(res.Dirs, "dir"),
						snapshot.HumanBytes(res.Bytes), msg.Seconds)
					for _, s := range res.Skipped {
						fmt.Fprintf(w, "skipped %s (sockets and devices are not restored)\n", quoteName(s))
					}
					if res.Leftover != "" {
						fmt.Fprintf(w, "the replaced tree could not be removed entirely; what stayed of it is at %s:\n", res.Leftover)
						for _, k := range res.LeftoverKept {
							fmt.Fprintf(w, "  %s: %s\n", k.Path, k.Why)
						}
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
	f.StringVar(&o.workspace, "workspace", "", "the `WORKSPACE` whose newest complete snapshot latest means")
	f.StringArrayVar(&o.includes, "include", nil, "restore only this `PATH` of the snapshot (repeatable)")
	f.BoolVar(&o.replace, "replace", false, "replace an existing target, atomically")
	f.IntVar(&o.workers, "workers", 0, "files written in parallel (default: twice the CPUs)")
	f.BoolVar(&o.profiles, "profiles", false, "also restore the snapshot's browser profiles, each at its path (needs a key with the sensitive tier)")
	addSkipDamaged(f, &o.skipDamaged)
	f.Uint64Var(&o.maxEntries, "max-entries", 0, fmt.Sprintf("most entries restore's plan expands (default %d)", restore.DefaultLimits.Entries))
	f.Uint64Var(&o.maxPlanMiB, "max-plan-mib", 0, fmt.Sprintf("most memory in MiB restore's plan is counted to hold (default %d)", restore.DefaultLimits.Bytes>>20))
	return cmd
}

// limits returns ctx carrying the plan limits the flags raise, if any.
func (o *restoreOptions) limits(ctx context.Context) context.Context {
	if o.maxEntries == 0 && o.maxPlanMiB == 0 {
		return ctx
	}
	return restore.WithLimits(ctx, restore.Limits{Entries: o.maxEntries, Bytes: min(o.maxPlanMiB, 1<<43) << 20})
}

// ownDirs are the directories of this command's own data that a restore
// target must neither be inside nor contain, besides the repository and
// its index cache (which restore.Run always protects): the cache
// directory and the lifecycle state directory (--state-dir,
// LIFEBOAT_STATE_DIR or the config's).
func (g *globalOptions) ownDirs() []restore.ProtectedDir {
	own := []restore.ProtectedDir{{Path: g.cacheRoot(), What: "the cache directory"}}
	if g.stateDir != "" {
		own = append(own, restore.ProtectedDir{Path: g.stateDir, What: "the state directory"})
	}
	return own
}

// cacheRoot is the local cache directory in use.
func (g *globalOptions) cacheRoot() string {
	if g.cacheDir != "" {
		return g.cacheDir
	}
	return repo.DefaultCacheDir()
}

// restoreRecords is where restores note their staging directories while
// they run, for `unlock` to find what a killed one left.
func (g *globalOptions) restoreRecords() string {
	return filepath.Join(g.cacheRoot(), "restores")
}
