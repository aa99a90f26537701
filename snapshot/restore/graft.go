package restore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	"lifeboat/repo"

	"lifeboat/snapshot"
)

// graft restores o.Grafts into the staging tree st, after the snapshot's
// own tree is built. Each graft is planned and checked like a snapshot
// (every name validated, its chunks verified), and written through
// descriptors: the way to its path is opened one name at a time without
// following a symlink, missing directories on the way are created (0700),
// and the graft's own directory must not exist yet. The directory that
// receives a graft gets its metadata (times, mode) back afterwards.
func (w *rsWriter) graft(ctx context.Context, r *repo.Repository, st *stage, o Options, res *Result) error {
	for _, g := range o.Grafts {
		n, err := w.graftOne(ctx, r, st, o, g)
		if err != nil {
			var re *Error
			if errors.As(err, &re) {
				for i, p := range re.Paths {
					re.Paths[i] = snapshot.JoinPath(g.Path, p)
				}
			}
			return err
		}
		res.Files += uint64(len(n.files)) + n.others
		res.Dirs += n.dirs
		res.Bytes += n.bytes
		for _, p := range n.skipped {
			res.Skipped = append(res.Skipped, snapshot.JoinPath(g.Path, p))
		}
	}
	return nil
}

func (w *rsWriter) graftOne(ctx context.Context, r *repo.Repository, st *stage, o Options, g snapshot.Graft) (*rsPlan, error) {
	comps, err := snapshot.SplitPath(g.Path)
	if err != nil || len(comps) == 0 {
		return nil, fmt.Errorf("%w: graft path %q is not a path below the root", snapshot.ErrUnsafeEntry, g.Path)
	}
	keys, err := r.TierKeys(g.Tier)
	if err != nil {
		return nil, fmt.Errorf("restoring %s: %w", g.Path, err)
	}
	root := g.Root
	root.Name = nil
	plan, err := rsPlanTree(ctx, r, g.Tier, &snapshot.Manifest{Root: root, Totals: g.Totals}, nil)
	if err != nil {
		return nil, err
	}
	if err := plan.planChunks(r, g.Tier); err != nil {
		return nil, err
	}
	parent, err := graftParent(st.fd, comps[:len(comps)-1])
	if err != nil {
		return nil, &Error{Paths: []string{""}, Err: err}
	}
	defer unix.Close(parent)
	last := comps[len(comps)-1]
	pe := w.findDir(comps[:len(comps)-1])
	if pe != nil && pe.node.Mode&0o300 != 0o300 {
		// The parent already has its mode, which may deny its owner
		// writing; it gets its metadata back below.
		if err := unix.Fchmod(parent, pe.node.Mode|0o300); err != nil {
			return nil, &Error{Paths: []string{""}, Err: fmt.Errorf("opening the parent directory for the graft: %w", err)}
		}
	}
	if err := unix.Mkdirat(parent, last, 0o700); err != nil {
		if errors.Is(err, unix.EEXIST) {
			err = fmt.Errorf("%w (the snapshot's tree already has an entry there)", err)
		}
		return nil, &Error{Paths: []string{""}, Err: fmt.Errorf("creating the directory: %w", err)}
	}
	fd, err := safeOpenAt(parent, last, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, &Error{Paths: []string{""}, Err: err}
	}
	defer unix.Close(fd)
	entries := plan.entries
	gw := &rsWriter{plan: plan, keys: keys, store: r, workers: w.workers, progress: w.progress,
		chown: w.chown, umask: w.umask}
	gw.dirs = newSafeDirs(fd, func(d int32) (int32, string) { return entries[d].parent, entries[d].name }, 256)
	err = gw.build(ctx)
	gw.closeFiles()
	gw.dirs.close()
	if err != nil {
		return nil, err
	}
	// Creating the graft moved its parent's times (and maybe its mode);
	// put them back.
	if pe != nil {
		if err := w.metaFD(parent, pe); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// graftParent opens the directory at comps below the staging root, one
// name at a time and never through a symlink, creating what is missing.
func graftParent(rootFD int, comps []string) (int, error) {
	fd, err := unix.Dup(rootFD)
	if err != nil {
		return -1, err
	}
	for _, c := range comps {
		nfd, err := safeOpenAt(fd, c, unix.O_RDONLY|unix.O_DIRECTORY, 0)
		if errors.Is(err, unix.ENOENT) {
			if err = unix.Mkdirat(fd, c, 0o700); err == nil {
				nfd, err = safeOpenAt(fd, c, unix.O_RDONLY|unix.O_DIRECTORY, 0)
			}
		}
		_ = unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("opening the way to a graft at %q (a symlink there is never followed): %w", c, err)
		}
		fd = nfd
	}
	return fd, nil
}

// findDir returns the planned directory entry at comps, or nil.
func (w *rsWriter) findDir(comps []string) *rsEntry {
	p := strings.Join(comps, "/")
	for i := range w.plan.entries {
		if e := &w.plan.entries[i]; e.path == p && e.node.Type == snapshot.TypeDir {
			return e
		}
	}
	return nil
}
