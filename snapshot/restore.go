package snapshot

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"lifeboat/blob"
	"lifeboat/repo"
)

// RestoreOptions say where and what to restore.
type RestoreOptions struct {
	Target   string    // directory to create or (with Replace) replace
	Replace  bool      // replace an existing target by atomic exchange
	Includes []string  // slash paths relative to the snapshot root; empty = everything; an include of a dir takes its subtree
	Workers  int       // parallel pack readers and file writers; default GOMAXPROCS*2
	Progress Progress  // nil = NoProgress
	Tier     blob.Tier // tier of the snapshot's trees and chunks; default workspace
	// Grafts are further trees (a snapshot's sensitive part) restored into
	// the same staging directory, each at its path, after the snapshot's
	// own tree and before the switch (restore_graft.go).
	Grafts []Graft
	// Validate, when set, runs on the staging directory once everything is
	// written and verified, before the sync and the switch; an error
	// aborts the restore and leaves the target as it was. It may change
	// files in the staging tree.
	Validate func(ctx context.Context, staging string) error

	hooks *stageHooks // tests: rename system calls
}

// RestoreResult counts what a restore put in place.
type RestoreResult struct {
	Files   uint64   // non-directory entries created: files, hard links, symlinks, FIFOs
	Dirs    uint64   // directories, the target itself included
	Bytes   uint64   // content bytes of the regular files (a hard-linked file counts once)
	Skipped []string // sockets and devices: never created (each also reported to Progress.Error)
	Staging string   // the staging directory used; gone when Restore returns unless its error says otherwise
	// Leftover is set when the restore succeeded but the tree it replaced
	// could not be removed: it is still at this path and may be deleted.
	Leftover string
}

// Restore rebuilds snapshot m under o.Target.
//
// A manifest and its trees are untrusted input: the whole tree is walked
// and every entry checked before anything is written (names, node fields,
// hard link targets, extended attribute namespaces; see ErrUnsafeEntry).
// Contents are read once per pack range, each chunk verified on read, and
// each file verified against its chunk ids after writing. Everything is
// built in a staging directory next to the target, through directory
// descriptors that never follow a symlink, then fsynced and switched into
// place (see stage.go for the exchange and its fallback). On any error or
// cancellation the staging directory is removed and the target is left
// exactly as it was; the error is a *RestoreError naming the entries
// concerned where there are any.
//
// Sockets and device nodes are never created: they are listed in
// Skipped and reported to Progress.Error. Ownership is restored only when
// running as root.
func Restore(ctx context.Context, r *repo.Repository, m *Manifest, o RestoreOptions) (res RestoreResult, err error) {
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0) * 2
	}
	if o.Progress == nil {
		o.Progress = NoProgress{}
	}
	if o.Tier == 0 {
		o.Tier = blob.Workspace
	}
	keys, err := r.TierKeys(o.Tier)
	if err != nil {
		return res, err
	}
	if err := refuseOwnFiles(o.Target, r); err != nil {
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
	st, err := newStage(o.Target, o.Replace, o.hooks)
	if err != nil {
		return res, err
	}
	res.Staging = st.path()
	entries := plan.entries
	w := &rsWriter{plan: plan, keys: keys, be: r.Backend(), workers: o.Workers, progress: o.Progress,
		chown: os.Geteuid() == 0, umask: rsUmask(), zeroIDs: map[int64]blob.ID{}}
	w.dirs = newSafeDirs(st.fd, func(d int32) (int32, string) { return entries[d].parent, entries[d].name }, 256)
	o.Progress.Start(uint64(len(plan.files)), plan.bytes)
	w.flusher = newRsFlusher(st.fd)
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
	if err == nil {
		res.Leftover, err = st.commit()
	}
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			err = fmt.Errorf("%w (the files to restore hold %s, less where sparse; free space in %s or restore elsewhere)", err, HumanBytes(plan.bytes), st.parent)
		}
		if aerr := st.abort(); aerr != nil {
			err = fmt.Errorf("%w; %w", err, aerr)
		}
		return res, err
	}
	st.close()
	if res.Leftover != "" {
		o.Progress.Error("", fmt.Errorf("the replaced tree could not be removed; it is at %s", res.Leftover))
	}
	res.Files += uint64(len(plan.files)) + plan.others
	res.Dirs += plan.dirs
	res.Bytes += plan.bytes
	res.Skipped = append(plan.skipped, res.Skipped...)
	return res, nil
}

// HumanBytes renders n with a binary unit, for messages.
func HumanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// ErrTargetHoldsRepository: the target contains the repository or its
// cache, which a restore (and --replace above all) would destroy.
var ErrTargetHoldsRepository = errors.New("restore target contains the repository or its cache")

// refuseOwnFiles refuses a target that is, or contains, the repository's
// local directory or the local index cache.
func refuseOwnFiles(target string, r *repo.Repository) error {
	t, err := filepath.Abs(target)
	if err != nil {
		return err
	}
	if resolved, err := filepath.EvalSymlinks(t); err == nil {
		t = resolved
	}
	own := []string{r.Backend().Location()}
	if idx := r.Index(); idx != nil {
		own = append(own, filepath.Dir(idx.Path()))
	}
	for _, p := range own {
		p, err := filepath.Abs(p)
		if err != nil {
			continue
		}
		if resolved, err := filepath.EvalSymlinks(p); err == nil {
			p = resolved
		}
		if p == t || strings.HasPrefix(p, t+string(filepath.Separator)) {
			return fmt.Errorf("%w: %s holds %s; restore somewhere else", ErrTargetHoldsRepository, target, p)
		}
	}
	return nil
}
