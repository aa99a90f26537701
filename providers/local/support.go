package local

import (
	"context"
	"os"
	"path/filepath"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

// FileSupport implements providers.FileSupporter. HardLinks, Xattrs,
// Fifos and Sparse are what the filesystem under the root accepts, found
// by trying each once in a scratch directory under .lifeboat (a link, a
// user.* attribute, a fifo, a file with a hole) and kept for the
// provider's life once found; Ownership is true when running as root. On
// Linux's usual filesystems (ext4, xfs, btrfs, tmpfs since 6.6) all of
// them hold.
func (p *Provider) FileSupport(ctx context.Context) (providers.FileSupport, error) {
	const op = "file support"
	p.supportMu.Lock()
	defer p.supportMu.Unlock()
	if p.support != nil {
		return *p.support, nil
	}
	r, err := p.openRoot(ctx, op, "")
	if err != nil {
		return providers.FileSupport{}, err
	}
	defer r.Close()
	if err := r.MkdirAll(metaDir, 0o700); err != nil {
		return providers.FileSupport{}, wrap(op, "", err)
	}
	dir := probeDir + "." + randHex(8)
	if err := r.Mkdir(dir, 0o700); err != nil {
		return providers.FileSupport{}, wrap(op, "", err)
	}
	defer fsmeta.RemoveTree(r, dir)
	fs, err := probe(r, dir)
	if err != nil {
		return providers.FileSupport{}, wrap(op, "", err)
	}
	fs.Ownership = os.Geteuid() == 0
	p.support = &fs
	return fs, nil
}

// probe tries each kept feature in the empty directory dir under r.
func probe(r *os.Root, dir string) (providers.FileSupport, error) {
	var fs providers.FileSupport
	f, err := r.OpenFile(filepath.Join(dir, "f"), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fs, err
	}
	defer f.Close()
	fs.Xattrs = probeXattr(f)
	fs.Sparse = probeHole(f)
	fs.HardLinks = r.Link(filepath.Join(dir, "f"), filepath.Join(dir, "g")) == nil
	fs.Fifos = inParent(r, filepath.Join(dir, "p"), func(dirfd int, name string) error { return mkfifoat(dirfd, name, 0o600) }) == nil
	return fs, nil
}
