package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/profile"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// RepoCapturer is the real Capturer: snapshot.Capture into a repository
// (browser profiles discovered and captured into the sensitive tier,
// unchanged files found through the file cache), then Verify.
type RepoCapturer struct {
	Repo     *repo.Repository
	Excludes []string
	Readers  int
	NoCache  bool // read every file
	// NoProfileDiscovery leaves browser profiles to the excludes.
	NoProfileDiscovery bool
	Progress           snapshot.Progress
}

// Capture saves req.Dir as a snapshot of the workspace and verifies it.
func (c *RepoCapturer) Capture(ctx context.Context, req CaptureRequest) (Result, error) {
	profs, err := profile.Select(req.Dir, nil, !c.NoProfileDiscovery)
	if err != nil {
		return Result{}, err
	}
	if len(profs) > 0 && !hasTier(c.Repo, blob.Sensitive) {
		return Result{}, fmt.Errorf("workspace %s holds %d browser profile(s) (first: %s), captured only into the sensitive tier: %w",
			req.Workspace.ID, len(profs), profs[0].Rel, crypt.ErrTierLocked)
	}
	if _, err := profile.PrepareAll(ctx, profs); err != nil {
		return Result{}, err
	}
	parent, err := snapshot.Find(ctx, c.Repo, "latest", req.Workspace.ID)
	if err != nil && !errors.Is(err, snapshot.ErrNoSnapshot) {
		return Result{}, err
	}
	host, _ := os.Hostname()
	o := snapshot.CaptureOptions{Workspace: req.Workspace.ID, Host: host, Instance: string(req.Workspace.Instance),
		Tags: []string{"reason:" + string(req.Reason)}, Excludes: c.Excludes, Readers: c.Readers, Parent: parent,
		Progress: c.Progress}
	for _, p := range profs {
		o.Sensitive = append(o.Sensitive, snapshot.SensitiveSpec{Path: p.Rel, Kind: string(p.Kind), Filter: p.CaptureFilter()})
	}
	if !c.NoCache {
		o.Cache = c.Repo.Index()
	}
	m, err := snapshot.Capture(ctx, c.Repo, req.Dir, o)
	if err != nil {
		return Result{}, err
	}
	if err := Verify(ctx, c.Repo, m.ID); err != nil {
		return Result{}, err
	}
	return Result{Snapshot: m.ID.String(), Complete: m.Complete, Problems: len(m.Errors),
		Files: m.Totals.Files, Bytes: m.Totals.Bytes, NewBytes: m.Totals.NewBytes}, nil
}
