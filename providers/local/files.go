package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

type dirFiles string

func (d dirFiles) Dir() string  { return string(d) }
func (d dirFiles) Close() error { return nil }

// ReadFiles implements providers.Provider: the instance's own directory,
// read in place (nothing is copied). It is checked to be a real directory,
// not a symlink, so the path handed to capture is inside the root.
func (p *Provider) ReadFiles(ctx context.Context, id providers.InstanceID) (providers.Files, error) {
	const op = "read files"
	r, err := p.openExisting(ctx, op, id)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return dirFiles(filepath.Join(p.root, string(id))), nil
}

// openExisting checks id, opens the root and confirms the instance
// directory exists (notThere otherwise). The caller closes the root.
func (p *Provider) openExisting(ctx context.Context, op string, id providers.InstanceID) (*os.Root, error) {
	if err := checkID(op, id); err != nil {
		return nil, err
	}
	r, err := p.openRoot(ctx, op, id)
	if err != nil {
		return nil, err
	}
	fi, err := statInstance(r, op, id)
	if err == nil && fi == nil {
		err = notThere(op, id)
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// notThere is a data-plane "no such instance": a conflict for the caller
// to settle with Inspect, never Missing (only Inspect says Missing).
func notThere(op string, id providers.InstanceID) error {
	return conflict(op, id, "instance directory does not exist (Inspect confirms whether it is missing)")
}

// WriteFiles implements providers.Provider. src (a local directory, read
// through an os.Root so its symlinks are copied, never followed) is copied
// into a new directory under <root>/.lifeboat/staging, on the same
// filesystem as the instance so Switch is a rename; the returned staging
// path is that directory's absolute local path. The copy keeps what
// FileSupport reports (see copyTree) and is made durable (syncfs) before
// WriteFiles returns. A socket or a device in src is refused
// (KindUnsupported, naming it) before anything is written; an access
// refusal on either side is KindPermission naming the entry.
// providers.WriteStarted is called right before the staging directory is
// made; a failure removes it.
func (p *Provider) WriteFiles(ctx context.Context, id providers.InstanceID, src string) (string, error) {
	const op = "write files"
	r, err := p.openExisting(ctx, op, id)
	if err != nil {
		return "", err
	}
	defer r.Close()
	sr, err := os.OpenRoot(src)
	if err != nil {
		return "", invalid(op, id, "source directory %s cannot be opened: %v", src, err)
	}
	defer sr.Close()
	names := trees{src: "the source tree " + src, dst: "the staging directory of instance " + string(id)}
	if err := scanTree(ctx, sr, names); err != nil {
		return "", wrap(op, id, err)
	}
	providers.WriteStarted(ctx)
	rel, err := p.newStaging(r, op, id, "write")
	if err != nil {
		return "", err
	}
	names.dst += " (" + filepath.Join(p.root, rel) + ")"
	dst, err := r.OpenRoot(rel)
	if err == nil {
		err = copyTree(ctx, sr, dst, names, true)
		dst.Close()
	}
	if err != nil {
		p.discard(r, rel)
		return "", wrap(op, id, err)
	}
	return filepath.Join(p.root, rel), nil
}

// Switch implements providers.Provider. With RENAME_EXCHANGE the staging
// tree and the workspace swap names in one atomic step; the old tree then
// sits at the staging path until it is removed, after the swap is durable.
// Where the filesystem cannot exchange, the fallback is two renames: the
// workspace to .lifeboat/switching/<id>, then staging into place; if the
// second fails the first is undone. Between the two renames (or after a
// crash there) the instance name is absent, and Inspect reports
// KindConflict naming the parked tree instead of Missing.
// providers.WriteStarted is called right before the first rename.
func (p *Provider) Switch(ctx context.Context, id providers.InstanceID, staging string) error {
	const op = "switch"
	if err := checkID(op, id); err != nil {
		return err
	}
	rel, err := p.stagingRel(op, id, staging)
	if err != nil {
		return err
	}
	defer p.locks.Lock(id)()
	r, err := p.openRoot(ctx, op, id)
	if err != nil {
		return err
	}
	defer r.Close()
	if fi, err := r.Lstat(rel); err != nil || !fi.IsDir() {
		return invalid(op, id, "staging directory %s does not exist (already switched, or not made by WriteFiles)", staging)
	}
	fi, err := statInstance(r, op, id)
	if err != nil {
		return err
	}
	if fi == nil {
		return notThere(op, id)
	}
	providers.WriteStarted(ctx)
	return wrap(op, id, p.swapIn(r, rel, string(id)))
}

// swapIn puts the tree at rel in place of the existing directory name
// (see Switch) and removes the old tree.
func (p *Provider) swapIn(r *os.Root, rel, name string) error {
	err := exchange(r, rel, name)
	if errors.Is(err, errExchangeUnsupported) {
		return p.twoStepSwap(r, rel, name)
	}
	if err != nil {
		return err
	}
	if err := errors.Join(syncDir(r, "."), syncDir(r, filepath.Dir(rel))); err != nil {
		// Not known to be durable: swap back so the error means "as it was".
		if uerr := exchange(r, rel, name); uerr != nil {
			return errors.Join(err, uerr)
		}
		return err
	}
	// The old tree now sits at the staging name. Failing to remove it does
	// not undo the switch, so it is left under .lifeboat/staging (harmless,
	// removable by hand) rather than reported.
	_ = fsmeta.RemoveTree(r, rel)
	return nil
}

func (p *Provider) twoStepSwap(r *os.Root, rel, name string) error {
	if err := r.MkdirAll(switchingDir, 0o700); err != nil {
		return err
	}
	parked := filepath.Join(switchingDir, name)
	if err := fsmeta.RemoveTree(r, parked); err != nil {
		return err
	}
	if err := r.Rename(name, parked); err != nil {
		return err
	}
	if err := r.Rename(rel, name); err != nil {
		if uerr := r.Rename(parked, name); uerr != nil {
			return errors.Join(err, uerr)
		}
		return err
	}
	if err := syncDir(r, "."); err != nil {
		if uerr := errors.Join(r.Rename(name, rel), r.Rename(parked, name)); uerr != nil {
			return errors.Join(err, uerr)
		}
		return err
	}
	_ = fsmeta.RemoveTree(r, parked) // as above: the switch holds either way
	return nil
}

// stagingRel checks that staging is a directory WriteFiles made for id and
// returns its path relative to the root.
func (p *Provider) stagingRel(op string, id providers.InstanceID, staging string) (string, error) {
	base := filepath.Base(staging)
	if filepath.Clean(staging) != filepath.Join(p.root, stagingDir, base) || !strings.HasPrefix(base, string(id)+".write.") {
		return "", invalid(op, id, "%s is not a staging directory WriteFiles made for this instance under %s", staging, filepath.Join(p.root, stagingDir))
	}
	return filepath.Join(stagingDir, base), nil
}
