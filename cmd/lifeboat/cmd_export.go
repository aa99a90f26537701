package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/repo"
	"lifeboat/snapshot"
)

type exportOptions struct {
	to               string
	toPasswordFile   string
	workspace        string
	includeSensitive bool
	skipDamaged      bool
}

type exportMessage struct {
	MessageType string  `json:"message_type"` // "exported"
	Snapshot    string  `json:"snapshot"`     // id in the source repository
	Target      string  `json:"target"`       // id of the copy in the target repository
	Sensitive   string  `json:"sensitive"`    // "none", "copied" or "left_out"
	Seconds     float64 `json:"seconds"`
}

func newExportCommand(g *globalOptions) *cobra.Command {
	var o exportOptions
	cmd := &cobra.Command{
		Use:   "export --to LOCATION --to-password-file FILE SNAPSHOT...",
		Short: "Copy snapshots into another repository",
		Long: "Copy each SNAPSHOT (an id, a unique prefix, or `latest` with --workspace) into the repository at LOCATION (a directory, or s3:https://HOST/BUCKET[/PREFIX] with the AWS_* credentials of the environment), which must exist " +
			"(`lifeboat init`). Ids are keyed per repository, so every file is re-chunked and re-identified for the target and every " +
			"tree rewritten. A snapshot's sensitive part (browser profiles) is left out unless --include-sensitive is given, which " +
			"needs keys with the sensitive tier in both repositories.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.to == "" || o.toPasswordFile == "" {
				return usageError{"--to and --to-password-file are required"}
			}
			return g.withLockedRepo(cmd.Context(), repo.LockShared, "export", func(src *repo.Repository, _ *repo.Lock) error {
				return runExport(cmd.Context(), g, src, args, o)
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.to, "to", "", "the target repository `LOCATION` (required)")
	f.StringVar(&o.toPasswordFile, "to-password-file", "", "read the target repository's password from `FILE` (required)")
	f.StringVar(&o.workspace, "workspace", "", "the `WORKSPACE` whose newest complete snapshot latest means")
	f.BoolVar(&o.includeSensitive, "include-sensitive", false, "also copy browser profiles (needs the sensitive tier in both repositories)")
	addSkipDamaged(f, &o.skipDamaged)
	return cmd
}

func runExport(ctx context.Context, g *globalOptions, src *repo.Repository, refs []string, o exportOptions) error {
	var snaps []*snapshot.Manifest
	for _, ref := range refs {
		m, skipped, err := g.resolveSnapshot(ctx, src, ref, o.workspace, o.skipDamaged, "exporting")
		if err != nil {
			return err
		}
		g.emitSkipped(skipped, m)
		snaps = append(snaps, m)
	}
	be, err := openLocation(ctx, o.to, nil, false)
	if err != nil {
		return fmt.Errorf("export target: %w", err)
	}
	pw, err := readPasswordFile("target's password file (--to-password-file)", o.toPasswordFile)
	if err != nil {
		_ = be.Close()
		return err
	}
	dst, err := repo.Open(ctx, be, pw, repo.Options{CacheDir: g.cacheDir})
	clear(pw)
	if err != nil {
		_ = be.Close()
		return fmt.Errorf("export target %s: %w", o.to, err)
	}
	if id := src.Config().ID; dst.Config().ID == id {
		return errors.Join(usageError{fmt.Sprintf("export target %s is the source repository or a copy of it (repository id %s, "+
			"whose keys and local index cache the two would share): export copies snapshots into another repository; "+
			"to bring a copy up to date, copy the repository's files (rsync, aws s3 sync); nothing was written", o.to, id.Short())}, dst.Close(ctx), be.Close())
	}
	err = func() error {
		// A shared lock on the target, so that an exclusive one (prune
		// --instant-delete, repair) waits; each Export is also a capture
		// session there (it syncs the target's index), which a two-phase
		// prune respects.
		l, err := dst.Lock(ctx, repo.LockShared, g.lockOptions("export"))
		if err != nil {
			return fmt.Errorf("export target %s: %w", o.to, err)
		}
		defer func() { _ = l.Unlock(context.WithoutCancel(ctx)) }()
		for _, m := range snaps {
			start := time.Now()
			nm, err := snapshot.Export(ctx, src, dst, m, snapshot.ExportOptions{IncludeSensitive: o.includeSensitive})
			if err != nil {
				return fmt.Errorf("exporting snapshot %s: %w", m.ID.Short(), err)
			}
			msg := exportMessage{"exported", m.ID.String(), nm.ID.String(), "none", time.Since(start).Seconds()}
			switch {
			case nm.Sensitive != nil:
				msg.Sensitive = "copied"
			case m.Sensitive != nil:
				msg.Sensitive = "left_out"
			}
			g.out.emit(msg, func(w io.Writer) {
				fmt.Fprintf(w, "snapshot %s exported to %s as %s", m.ID.Short(), o.to, nm.ID.Short())
				switch msg.Sensitive {
				case "copied":
					fmt.Fprint(w, ", with its browser profiles")
				case "left_out":
					fmt.Fprint(w, ", without its browser profiles (--include-sensitive copies them)")
				}
				fmt.Fprintf(w, " in %.2fs\n", msg.Seconds)
			})
		}
		return l.Err()
	}()
	return errors.Join(err, dst.Close(ctx), be.Close())
}
