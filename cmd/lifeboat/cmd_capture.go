package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/checkpoint"
	"lifeboat/profile"
	"lifeboat/recovery"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

type captureOptions struct {
	workspace  string
	instance   string
	host       string
	tags       []string
	excludes   []string
	readers    int
	noCache    bool
	profiles   []string
	noDiscover bool
	verify     bool
}

type summaryMessage struct {
	MessageType string          `json:"message_type"` // "summary"
	Snapshot    string          `json:"snapshot"`
	Workspace   string          `json:"workspace"`
	Complete    bool            `json:"complete"`
	Totals      snapshot.Totals `json:"totals"`
	Errors      int             `json:"errors"`
	Seconds     float64         `json:"seconds"`
	Profiles    []profileRef    `json:"profiles"` // browser profiles captured into the sensitive tier
	// Prefixes are the files that grew while read, captured as a verified
	// prefix (snapshot.CapturePrefix); PrefixesNotListed counts the others.
	Prefixes          []snapshot.CapturePrefix `json:"prefixes"`
	PrefixesNotListed uint64                   `json:"prefixes_not_listed"`
	// LeftOut are Lifeboat's own directories that lay inside the captured
	// directory and were left out (checkpoint.Result.LeftOut).
	LeftOut []snapshot.OwnDir `json:"left_out"`
	// Verified: --verify checked the snapshot after it was written.
	Verified bool `json:"verified"`
}

func newCaptureCommand(g *globalOptions) *cobra.Command {
	var o captureOptions
	cmd := &cobra.Command{
		Use:   "capture --workspace ID [PATH]",
		Short: "Capture a directory tree into a snapshot",
		Long: "Capture PATH into a new snapshot of workspace ID. Unchanged files (same device, inode, size, mtime and ctime as at the " +
			"last capture) are not read again. Files that cannot be read are recorded and the capture goes on; the snapshot is then " +
			"partial and the exit code is 3. A file that changes while it is read is read again; one that keeps growing (a log) " +
			"is captured as its first bytes, checked to be exactly the file's, and named in the summary; the snapshot is complete. The snapshot is written only after everything it references is stored. " +
			"Without PATH, the registered workspace ID (see `lifeboat workspace`, needs --state-dir) is captured through the lifecycle: " +
			"quiesced, verified, promoted to its last good checkpoint, failures recorded; --profile and --no-profile-discovery apply to it too. " +
			"With PATH, --verify checks the new snapshot the same way (the manifest and every tree load, every chunk is indexed; no content is read).",
		Args: cobra.RangeArgs(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.workspace == "" {
				return usageError{"--workspace is required: name the workspace this snapshot belongs to"}
			}
			if len(args) == 0 {
				if c, err := g.client(); err != nil || c != nil {
					if err != nil {
						return err
					}
					if len(o.profiles) > 0 || o.noDiscover {
						return usageError{"--profile and --no-profile-discovery capture a registered workspace only without a server (--state-dir); a server captures as its config says"}
					}
					r, err := c.Capture(cmd.Context(), o.workspace)
					if err != nil {
						return err
					}
					return g.emitReceipt(r)
				}
				// Named profiles are relative to the workspace's root, which
				// the provider knows; the lifecycle always verifies.
				c := &recovery.RepoCapturer{NoProfileDiscovery: o.noDiscover}
				if len(o.profiles) > 0 {
					c.Profiles = map[string][]string{o.workspace: o.profiles}
				}
				return g.withCapturingLifecycle(cmd.Context(), "capture", c, func(l *recovery.Lifecycle) error {
					return g.emitReceipt(l.Capture(cmd.Context(), o.workspace, recovery.ReasonManual))
				})
			}
			// --profile directories are resolved before the key is derived;
			// the others are found by the capture's own walk.
			explicit, err := checkpoint.ResolveProfiles(args[0], o.profiles)
			if err != nil {
				return err
			}
			// No repository lock: the capture is a session (repo.BeginSession)
			// that a two-phase prune beside it respects.
			return g.withRepo(cmd.Context(), true, func(r *repo.Repository) error {
				return runCapture(cmd, g, r, args[0], explicit, o)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.workspace, "workspace", "", "workspace id (required)")
	f.StringVar(&o.instance, "instance", "", "the provider's instance id, recorded in the snapshot")
	f.StringVar(&o.host, "host", "", "host name recorded in the snapshot (default: this machine's)")
	f.StringSliceVar(&o.tags, "tag", nil, "tag the snapshot (repeatable)")
	f.StringArrayVar(&o.excludes, "exclude", nil, "skip paths matching `PATTERN` (repeatable; without '/' it matches a name anywhere)")
	f.IntVar(&o.readers, "readers", 0, "files read in parallel (default: twice the CPUs)")
	f.BoolVar(&o.noCache, "force", false, "read every file, ignoring the file cache")
	f.StringArrayVar(&o.profiles, "profile", nil, "capture the browser profile `DIR` (inside PATH; without PATH, relative to the registered workspace's root) into the sensitive tier (repeatable)")
	f.BoolVar(&o.noDiscover, "no-profile-discovery", false, "do not look for browser profiles in the workspace; only --profile directories are captured as profiles")
	f.BoolVar(&o.verify, "verify", false, "check the snapshot after it is written: its manifest and every tree load and every chunk is indexed (without PATH the lifecycle always does)")
	return cmd
}

// runCapture captures root, with the browser profiles given (explicit,
// resolved) and, unless --no-profile-discovery, those its walk finds.
func runCapture(cmd *cobra.Command, g *globalOptions, r *repo.Repository, root string, explicit []profile.Profile, o captureOptions) error {
	prog := newProgress(g.out, "capturing")
	start := time.Now()
	res, err := checkpoint.Capture(cmd.Context(), r, root, checkpoint.Options{Workspace: o.workspace, Host: o.host, Instance: o.instance,
		Tags: o.tags, Excludes: o.excludes, Readers: o.readers, NoCache: o.noCache, Profiles: explicit, NoDiscovery: o.noDiscover,
		Verify: o.verify, Progress: prog, Own: g.ownDirs()})
	prog.finish()
	g.profileProblems(res.Problems)
	if err != nil {
		return err
	}
	m := res.Manifest
	msg := summaryMessage{"summary", m.ID.String(), m.Workspace, m.Complete, m.Totals, len(m.Errors), time.Since(start).Seconds(), []profileRef{},
		append([]snapshot.CapturePrefix{}, m.Prefixes...), m.PrefixesNotListed, append([]snapshot.OwnDir{}, res.LeftOut...), res.Verified}
	for _, p := range res.Profiles {
		msg.Profiles = append(msg.Profiles, profileRef{p.Rel, string(p.Kind)})
	}
	g.out.emit(msg, func(w io.Writer) {
		fmt.Fprintf(w, "snapshot %s of workspace %s: %s, %s, %s (%s new) in %.2fs\n", m.ID.Short(), m.Workspace,
			count(m.Totals.Files, "file"), count(m.Totals.Dirs, "dir"), snapshot.HumanBytes(m.Totals.Bytes), snapshot.HumanBytes(m.Totals.NewBytes), msg.Seconds)
		for _, p := range msg.Profiles {
			fmt.Fprintf(w, "browser profile %s (%s) captured into the sensitive tier\n", quoteName(p.Path), p.Kind)
		}
		for _, p := range m.Prefixes {
			fmt.Fprintf(w, "%s kept growing while it was read: captured as its first %d of %d bytes (checked to be exactly the file's)\n",
				quoteName(p.Path), p.Size, p.FileSize)
		}
		if m.PrefixesNotListed > 0 {
			fmt.Fprintf(w, "%d more files kept growing while they were read and were captured as their first bytes\n", m.PrefixesNotListed)
		}
		for _, d := range msg.LeftOut {
			fmt.Fprintf(w, "left out %s, %s: it lies inside the captured directory\n", quoteName(d.Path), d.What)
		}
		if res.Verified {
			fmt.Fprintln(w, "verified: the manifest and every tree load, and every chunk is indexed")
		}
		if !m.Complete {
			fmt.Fprintf(w, "partial: %s could not be captured (see the warnings above)\n", count(len(m.Errors), "path"))
		}
	})
	if !m.Complete {
		return partialError{len(m.Errors)}
	}
	return nil
}

// partialError ends a capture that saved a partial snapshot: exit code 3.
type partialError struct{ n int }

func (e partialError) Error() string {
	if e.n == 0 {
		return "the snapshot is partial: a browser profile could not be captured fully (see the warnings above)"
	}
	return fmt.Sprintf("the snapshot is partial: %s could not be captured", count(e.n, "path"))
}
