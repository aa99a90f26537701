package local

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"strings"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

// Checkpoint implements providers.Provider: a copy of the instance tree
// under <root>/.lifeboat/checkpoints/<id>~<random>, made with FICLONE
// reflinks where the filesystem supports them (btrfs, xfs with reflink,
// bcachefs: near-free and copy-on-write) and a plain copy elsewhere. Hard
// links are deliberately not used: a workspace that rewrites a file in
// place would change the checkpoint too. The copy is built under a
// temporary name and renamed, so a checkpoint id exists only for a
// complete, durable tree. Files changing during the copy are copied as
// they are; quiesce first for a consistent checkpoint.
func (p *Provider) Checkpoint(ctx context.Context, id providers.InstanceID) (providers.CheckpointID, error) {
	const op = "checkpoint"
	r, err := p.openExisting(ctx, op, id)
	if err != nil {
		return "", err
	}
	defer r.Close()
	cp := providers.CheckpointID(string(id) + "~" + randHex(8))
	names := trees{src: "instance " + string(id), dst: "checkpoint " + string(cp)}
	if err := scanRel(ctx, r, string(id), names); err != nil {
		return "", wrap(op, id, err)
	}
	if err := r.MkdirAll(checkpointsDir, 0o700); err != nil {
		return "", wrap(op, id, err)
	}
	tmp := filepath.Join(checkpointsDir, ".tmp-"+string(cp))
	if err := r.Mkdir(tmp, 0o700); err != nil {
		return "", wrap(op, id, err)
	}
	err = copyBetween(ctx, r, string(id), tmp, names, true)
	if err == nil {
		err = r.Rename(tmp, filepath.Join(checkpointsDir, string(cp)))
	}
	if err == nil {
		err = syncDir(r, checkpointsDir)
	}
	if err != nil {
		p.discard(r, tmp)
		return "", wrap(op, id, err)
	}
	return cp, nil
}

// checkCP validates a checkpoint id: "<instance id>~<16 hex digits>".
func checkCP(op string, cp providers.CheckpointID) error {
	inst, suffix, ok := strings.Cut(string(cp), "~")
	if !ok || !ValidID(inst) || len(suffix) != 16 || strings.Trim(suffix, "0123456789abcdef") != "" {
		return invalid(op, "", "checkpoint id %q is not one this adapter made (<instance>~<16 hex digits>)", string(cp))
	}
	return nil
}

// Rollback implements providers.Provider: the checkpoint is copied
// (reflinked where possible) into staging and switched in place of the
// instance like a restore (see Switch); when the instance directory no
// longer exists it is created from the checkpoint instead. The checkpoint
// itself is kept. The instance id does not change.
func (p *Provider) Rollback(ctx context.Context, id providers.InstanceID, cp providers.CheckpointID) (providers.InstanceID, error) {
	const op = "rollback"
	if err := checkID(op, id); err != nil {
		return "", err
	}
	if err := checkCP(op, cp); err != nil {
		return "", err
	}
	defer p.locks.Lock(id)()
	r, err := p.openRoot(ctx, op, id)
	if err != nil {
		return "", err
	}
	defer r.Close()
	src := filepath.Join(checkpointsDir, string(cp))
	if fi, err := r.Lstat(src); err != nil || !fi.IsDir() {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", wrap(op, id, err)
		}
		return "", invalid(op, id, "checkpoint %s does not exist under %s", cp, filepath.Join(p.root, checkpointsDir))
	}
	fi, err := statInstance(r, op, id)
	if err != nil {
		return "", err
	}
	names := trees{src: "checkpoint " + string(cp), dst: "the rollback build of instance " + string(id)}
	if err := scanRel(ctx, r, src, names); err != nil {
		return "", wrap(op, id, err)
	}
	build, err := p.newStaging(r, op, id, "rollback")
	if err != nil {
		return "", err
	}
	if err := copyBetween(ctx, r, src, build, names, true); err != nil {
		p.discard(r, build)
		return "", wrap(op, id, err)
	}
	if fi == nil {
		err = p.clearStopped(r, id) // a marker left by an instance removed behind our back
		if err == nil {
			err = renameNoReplace(r, build, string(id))
		}
		if err == nil {
			err = syncDir(r, ".")
		}
	} else {
		err = p.swapIn(r, build, string(id))
	}
	if err != nil {
		p.discard(r, build)
		return "", wrap(op, id, err)
	}
	return id, nil
}

// DeleteCheckpoint implements providers.Provider; a checkpoint that is
// already gone is not an error.
func (p *Provider) DeleteCheckpoint(ctx context.Context, cp providers.CheckpointID) error {
	const op = "delete checkpoint"
	if err := checkCP(op, cp); err != nil {
		return err
	}
	r, err := p.openRoot(ctx, op, "")
	if err != nil {
		return err
	}
	defer r.Close()
	return wrap(op, "", fsmeta.RemoveTree(r, filepath.Join(checkpointsDir, string(cp))))
}
