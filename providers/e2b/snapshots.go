package e2b

import (
	"context"
	"net/http"
	"net/url"

	"lifeboat/providers"
)

// Checkpoint implements providers.Provider: POST /sandboxes/{id}/snapshots,
// a persistent snapshot of the sandbox's filesystem and memory (E2B pauses
// the sandbox while it is taken, then it goes on running; the snapshot
// outlives the sandbox). The checkpoint id is the snapshot's id, which
// E2B accepts as a template.
func (p *Provider) Checkpoint(ctx context.Context, id providers.InstanceID) (providers.CheckpointID, error) {
	const op = "checkpoint"
	if id == "" {
		return "", &providers.Error{Provider: Name, Op: op, Kind: providers.KindInvalid, Err: errEmptyID}
	}
	var out struct {
		SnapshotID string `json:"snapshotID"`
	}
	if _, err := p.long.Do(ctx, op, id, http.MethodPost, sandboxPath(id)+"/snapshots", map[string]any{}, &out); err != nil {
		return "", err
	}
	if out.SnapshotID == "" {
		return "", &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindUnavailable, Err: errNoSnapshotID}
	}
	return providers.CheckpointID(out.SnapshotID), nil
}

// Rollback implements providers.Provider: E2B restores a snapshot only
// into a new sandbox, so Rollback creates one from it (POST /sandboxes
// with the snapshot as template, idempotent through a key naming the
// sandbox and the snapshot, so a retried Rollback finds the same one),
// then kills the old sandbox (at most one sandbox per workspace), and
// returns the new sandbox's id. A deleted snapshot fails the create and
// leaves the old sandbox as it was.
func (p *Provider) Rollback(ctx context.Context, id providers.InstanceID, cp providers.CheckpointID) (providers.InstanceID, error) {
	const op = "rollback"
	if id == "" || cp == "" {
		return "", &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindInvalid, Err: errEmptyID}
	}
	to, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "rollback " + string(id) + " " + string(cp), Template: string(cp)})
	if err != nil {
		return "", err
	}
	if to != id {
		if err := p.Destroy(ctx, id); err != nil {
			return "", err
		}
	}
	return to, nil
}

// DeleteCheckpoint implements providers.Provider: DELETE
// /templates/{snapshot} (how E2B deletes a snapshot); 404 means already
// gone.
func (p *Provider) DeleteCheckpoint(ctx context.Context, cp providers.CheckpointID) error {
	if cp == "" {
		return &providers.Error{Provider: Name, Op: "delete checkpoint", Kind: providers.KindInvalid, Err: errEmptyID}
	}
	_, err := p.c.Do(ctx, "delete checkpoint", "", http.MethodDelete, "/templates/"+url.PathEscape(string(cp)), nil, nil, http.StatusNotFound)
	return err
}
