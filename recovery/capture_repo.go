package recovery

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

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
	parent, err := snapshot.Find(ctx, c.Repo, "latest", req.Workspace.ID)
	if err != nil && !errors.Is(err, snapshot.ErrNoSnapshot) {
		return Result{}, err
	}
	host, _ := os.Hostname()
	o := snapshot.CaptureOptions{Workspace: req.Workspace.ID, Host: host, Instance: string(req.Workspace.Instance),
		Tags: []string{"reason:" + string(req.Reason)}, Excludes: c.Excludes, Readers: c.Readers, Parent: parent,
		Progress: c.Progress}
	if !c.NoProfileDiscovery { // found by the capture's walk
		abs, err := filepath.Abs(req.Dir)
		if err != nil {
			return Result{}, err
		}
		o.Discover = &profile.Finder{Root: abs, Allow: func(p profile.Profile) error {
			if !hasTier(c.Repo, blob.Sensitive) {
				return fmt.Errorf("workspace %s holds a browser profile (%s), captured only into the sensitive tier: %w",
					req.Workspace.ID, p.Rel, crypt.ErrTierLocked)
			}
			return nil
		}}
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
	res := Result{Snapshot: m.ID.String(), Complete: m.Complete, Problems: len(m.Errors),
		Files: m.Totals.Files, Bytes: m.Totals.Bytes, NewBytes: m.Totals.NewBytes}
	for _, p := range m.Prefixes {
		res.Prefixes = append(res.Prefixes, p.Path)
	}
	return res, nil
}
