package restore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/repo"

	"lifeboat/snapshot"
)

// Options say where and what to restore.
type Options struct {
	Target   string            // directory to create or (with Replace) replace
	Replace  bool              // replace an existing target by atomic exchange
	Includes []string          // slash paths relative to the snapshot root; empty = everything; an include of a dir takes its subtree
	Workers  int               // parallel pack readers and file writers; default GOMAXPROCS*2
	Progress snapshot.Progress // nil = NoProgress
	Tier     blob.Tier         // tier of the snapshot's trees and chunks; default workspace
	// Grafts are further trees (a snapshot's sensitive part) restored into
	// the same staging directory, each at its path, after the snapshot's
	// own tree and before the switch (graft.go).
	Grafts []snapshot.Graft
	// Validate, when set, runs on the staging directory once everything is
	// written and verified, before the sync and the switch; an error
	// aborts the restore and leaves the target as it was. It may change
	// files in the staging tree.
	Validate func(ctx context.Context, staging string) error
	// Protect names further directories the target must neither be inside
	// nor contain (the CLI's cache and state directories); the
	// repository's own directory and its index cache always are.
	Protect []ProtectedDir
	// Records, when set, is a directory where the restore notes its
	// staging directory while it runs, so that CleanRecordedStaging
	// (`lifeboat unlock`) finds what a killed restore left (stage_clean.go).
	Records string

	hooks *stageHooks // tests: rename and openat2 system calls
}

// Result counts what a restore put in place.
type Result struct {
	Files   uint64   // non-directory entries created: files, hard links, symlinks, FIFOs
	Dirs    uint64   // directories, the target itself included
	Bytes   uint64   // content bytes of the regular files (a hard-linked file counts once)
	Skipped []string // sockets and devices: never created (each also reported to Progress.Error)
	Staging string   // the staging directory used; gone when Run returns unless its error says otherwise
	// Leftover is set when the restore succeeded but the tree it replaced
	// could not be removed entirely: what stayed of it is at this path,
	// and LeftoverKept names the entries that stayed and why (a mount
	// point is never entered; each is also reported to Progress.Error).
	Leftover     string
	LeftoverKept []KeptPath
	// Cleaned lists what restores whose process is gone had left beside
	// the target, found before this one began: removed, or kept and why.
	Cleaned []StaleStaging
}

// Run rebuilds snapshot m under o.Target.
//
// A manifest and its trees are untrusted input: the whole tree is walked
// and every entry checked before anything is written (names, node fields,
// hard link targets, extended attribute namespaces; see snapshot.ErrUnsafeEntry).
// Contents are read once per pack range; each chunk is verified against
// its id on read, in the buffer whose bytes are then written, and each
// file is checked to hold all its bytes after writing (content.go,
// finishFile). Everything is
// built in a staging directory next to the target, through directory
// descriptors that never follow a symlink, then fsynced and switched into
// place (see stage.go for the exchange and its fallback). On any error or
// cancellation the staging directory is removed and the target is left
// exactly as it was; the error is a *Error naming the entries
// concerned where there are any.
//
// Sockets and device nodes are never created: they are listed in
// Skipped and reported to Progress.Error. Ownership is restored only when
// running as root.
func Run(ctx context.Context, r *repo.Repository, m *snapshot.Manifest, o Options) (res Result, err error) {
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0) * 2
	}
	if o.Progress == nil {
		o.Progress = snapshot.NoProgress{}
	}
	if o.Tier == 0 {
		o.Tier = blob.Workspace
	}
	keys, err := r.TierKeys(o.Tier)
	if err != nil {
		return res, err
	}
	if err := CheckTarget(r, o.Target, o.Protect); err != nil {
		return res, err
	}
	plan, err := rsPlanTree(ctx, r, o.Tier, m, o.Includes)
	if err != nil {
		return res, err
	}
	if err := plan.planChunks(r, o.Tier); err != nil {
		return res, err
	}
	for _, p := range plan.skipped {
		o.Progress.Error(p, errors.New("socket or device node: not restored"))
	}
	st, err := newStageRecorded(o.Target, o.Replace, o.hooks, o.Records)
	if err != nil {
		return res, err
	}
	res.Staging, res.Cleaned = st.path(), st.cleaned
	for _, c := range st.cleaned {
		if !c.Removed && c.Why != stagingInUse {
			o.Progress.Error(c.Path, fmt.Errorf("left beside the target by an earlier restore: %s", c.Why))
		}
	}
	entries := plan.entries
	w := &rsWriter{plan: plan, keys: keys, store: r, workers: o.Workers, progress: o.Progress,
		chown: os.Geteuid() == 0, umask: rsUmask()}
	w.dirs = newSafeDirs(st.fd, func(d int32) (int32, string) { return entries[d].parent, entries[d].name }, 256)
	o.Progress.Start(uint64(len(plan.files)), plan.bytes)
	w.flusher, w.writeBacks = newRsFlusher(st.fd), &rsWriteBacks{}
	err = w.build(ctx)
	writeback := w.flusher.stop() // an early writeback's error: the final syncfs would not report it again
	w.closeFiles()
	w.dirs.close()
	if err == nil {
		err = ctx.Err()
	}
	if err == nil && len(o.Grafts) > 0 {
		err = w.graft(ctx, r, st, o, &res)
	}
	if err == nil && o.Validate != nil {
		err = o.Validate(ctx, st.path())
	}
	if err == nil {
		// One syncfs makes every file and directory of the staging tree
		// durable: far cheaper than an fsync per file, and it reports
		// writeback errors of the whole filesystem (Linux 5.8+).
		if writeback == nil {
			writeback = unix.Syncfs(st.fd)
		}
		if writeback != nil {
			err = fmt.Errorf("syncing the staging tree in %s: %w", st.parent, writeback)
		}
	}
	var left *Remains
	if err == nil {
		left, err = st.commit()
	}
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			err = fmt.Errorf("%w (the files to restore hold %s, less where sparse; free space in %s or restore elsewhere)", err, snapshot.HumanBytes(plan.bytes), st.parent)
		}
		if aerr := st.abort(); aerr != nil {
			err = fmt.Errorf("%w; %w", err, aerr)
		}
		return res, err
	}
	st.close()
	if left != nil {
		res.Leftover, res.LeftoverKept = left.Path, left.Kept
		for _, k := range left.Kept {
			o.Progress.Error(k.Path, fmt.Errorf("left in place while removing the replaced tree (%s): %s", left.Path, k.Why))
		}
		if left.More > 0 {
			o.Progress.Error(left.Path, fmt.Errorf("%d more entries of the replaced tree stayed in it", left.More))
		}
	}
	res.Files += uint64(len(plan.files)) + plan.others
	res.Dirs += plan.dirs
	res.Bytes += plan.bytes
	res.Skipped = append(plan.skipped, res.Skipped...)
	return res, nil
}
