package docker

import (
	"context"
	"maps"
	"regexp"
	"strings"

	"github.com/moby/moby/client"

	"lifeboat/providers"
)

// Checkpoint implements providers.Provider: the container is committed
// (paused for the commit, unless it already is) to an image tagged
// <checkpoint repository>:<container name or id>-<random> and labelled
// lifeboat.checkpoint=<container id>; the tag is the checkpoint id. The
// commit holds the container's own filesystem, the workspace with it, but
// not its mounts or volumes.
func (p *Provider) Checkpoint(ctx context.Context, id providers.InstanceID) (providers.CheckpointID, error) {
	const op = "checkpoint"
	if err := checkID(op, id); err != nil {
		return "", err
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	c, err := p.needContainer(ctx, op, id)
	if err != nil {
		return "", err
	}
	base := strings.TrimPrefix(c.Name, "/")
	if len(base) > 100 || base == "" {
		base = c.ID[:12]
	}
	ref := p.cfg.CheckpointRepository + ":" + base + "-" + randHex(8)
	_, err = p.cli.ContainerCommit(ctx, c.ID, client.ContainerCommitOptions{Reference: ref,
		Comment: "Lifeboat native checkpoint of container " + c.ID,
		Changes: []string{"LABEL " + LabelCheckpoint + "=" + c.ID}})
	if err != nil {
		if noSuchContainer(err) {
			return "", newErr(op, id, providers.KindConflict, "container %s disappeared during the commit (Inspect confirms whether it is missing)", id)
		}
		return "", wrap(op, id, ctxErr(ctx, err))
	}
	return providers.CheckpointID(ref), nil
}

// checkpointRE: what a checkpoint id of this adapter looks like.
var checkpointRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._/-]*(:[0-9]+)?[a-z0-9._/-]*:[A-Za-z0-9_.-]+-[0-9a-f]{16}$`)

func (p *Provider) checkCP(op string, cp providers.CheckpointID) error {
	if !checkpointRE.MatchString(string(cp)) || !strings.HasPrefix(string(cp), p.cfg.CheckpointRepository+":") {
		return newErr(op, "", providers.KindInvalid, "checkpoint id %q is not one this adapter made (%s:<container>-<16 hex digits>)", string(cp), p.cfg.CheckpointRepository)
	}
	return nil
}

// Rollback implements providers.Provider: a new container is created from
// the checkpoint image, with the labels of the one it replaces (or
// Lifeboat's own when that one is gone) and the configured command,
// mounts and network, and started; it is named after the instance and the
// checkpoint, so a retried Rollback finds it. Then the old container is
// removed when Lifeboat created it, or stopped when it did not (its owner
// decides). It returns the new container's id. The checkpoint image is
// kept.
func (p *Provider) Rollback(ctx context.Context, id providers.InstanceID, cp providers.CheckpointID) (providers.InstanceID, error) {
	const op = "rollback"
	if err := checkID(op, id); err != nil {
		return "", err
	}
	if err := p.checkCP(op, cp); err != nil {
		return "", err
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	if _, err := p.cli.ImageInspect(ctx, string(cp)); err != nil {
		if isNotFound(err) {
			return "", newErr(op, id, providers.KindInvalid, "checkpoint image %s does not exist on %s", cp, p.cfg.Host)
		}
		return "", wrap(op, id, ctxErr(ctx, err))
	}
	old, err := p.inspect(ctx, op, id)
	if err != nil {
		return "", err
	}
	labels := map[string]string{}
	if old != nil && old.Config != nil {
		maps.Copy(labels, old.Config.Labels)
	} else {
		maps.Copy(labels, p.cfg.Labels)
	}
	managedOld := labels[LabelManaged] == "true"
	labels[LabelManaged] = "true"
	labels[LabelRollback] = string(cp)
	delete(labels, LabelCheckpoint) // the image's own label; the container inherits it anyway
	name := containerName("rollback\x00" + string(id) + "\x00" + string(cp))
	newID, err := p.makeContainer(ctx, op, name, string(cp), labels)
	if err != nil {
		return "", err
	}
	if old != nil && old.ID != string(newID) {
		if managedOld {
			_, err = p.cli.ContainerRemove(ctx, old.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			p.dropMirror(id)
		} else {
			timeout := 10
			_, err = p.cli.ContainerStop(ctx, old.ID, client.ContainerStopOptions{Timeout: &timeout})
		}
		if err != nil && !noSuchContainer(err) {
			return newID, wrap(op, id, ctxErr(ctx, err))
		}
	}
	return newID, nil
}

// DeleteCheckpoint implements providers.Provider: the checkpoint's tag is
// removed, and the image with it; when a container still runs from the
// image (one a Rollback made) only the tag goes, and Destroy of that
// container removes the image. A checkpoint already gone is not an error;
// any other failure is returned, so the lifecycle retries it.
func (p *Provider) DeleteCheckpoint(ctx context.Context, cp providers.CheckpointID) error {
	const op = "delete checkpoint"
	if err := p.checkCP(op, cp); err != nil {
		return err
	}
	ctx, cancel := p.bound(ctx)
	defer cancel()
	_, err := p.cli.ImageRemove(ctx, string(cp), client.ImageRemoveOptions{PruneChildren: true})
	if err != nil && isConflict(err) {
		_, err = p.cli.ImageRemove(ctx, string(cp), client.ImageRemoveOptions{Force: true, PruneChildren: true})
	}
	if err != nil && isNotFound(err) {
		return nil
	}
	return wrap(op, "", ctxErr(ctx, err))
}
