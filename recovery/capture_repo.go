package recovery

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"lifeboat/blob"
	"lifeboat/checkpoint"
	"lifeboat/prune"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// RepoCapturer is the real Capturer: checkpoint.Capture into a repository
// (browser profiles named in Profiles or discovered, captured into the
// sensitive tier; unchanged files found through the file cache), always
// verified.
type RepoCapturer struct {
	Repo     *repo.Repository
	Excludes []string
	Readers  int
	NoCache  bool // read every file
	// NoProfileDiscovery leaves browser profiles to the excludes, except
	// those Profiles names.
	NoProfileDiscovery bool
	// Profiles names, by workspace id, browser profile directories
	// relative to the workspace's root (or absolute paths inside it),
	// captured as profiles whether or not discovery finds them; the
	// lifecycle checks them before it does anything for a capture.
	Profiles map[string][]string
	Progress snapshot.Progress

	// verified spares each capture's verification the directories that
	// passed an earlier one and have not changed since.
	verified checkpoint.VerifiedTrees
}

// Capture saves req.Dir as a snapshot of the workspace and verifies it.
func (c *RepoCapturer) Capture(ctx context.Context, req CaptureRequest) (Result, error) {
	ps, err := c.profiles(req.Workspace.ID, req.Dir)
	if err != nil {
		return Result{}, err
	}
	// The last good checkpoint is the parent (none before the first):
	// loaded alone, where finding the newest snapshot would list them all
	// at every capture.
	var parent blob.ID
	if lg := req.Workspace.LastGood; lg != nil {
		parent, _ = blob.ParseID(lg.Snapshot)
	}
	cr, err := checkpoint.Capture(ctx, c.Repo, req.Dir, checkpoint.Options{Workspace: req.Workspace.ID, Parent: parent, NoParentSearch: true,
		Instance: string(req.Workspace.Instance), Tags: []string{"reason:" + string(req.Reason)}, Excludes: c.Excludes,
		Readers: c.Readers, NoCache: c.NoCache, Profiles: ps, NoDiscovery: c.NoProfileDiscovery, Verify: true, Verified: &c.verified, Progress: c.Progress})
	if err != nil {
		return Result{}, err
	}
	m := cr.Manifest
	res := Result{Snapshot: m.ID.String(), Complete: m.Complete, Problems: len(m.Errors),
		Files: m.Totals.Files, Bytes: m.Totals.Bytes, NewBytes: m.Totals.NewBytes}
	for _, p := range m.Prefixes {
		res.Prefixes = append(res.Prefixes, p.Path)
	}
	return res, nil
}

// RepoRetention is the real Retention: checkpoint.Retain for the
// workspace, keeping lastGood. A snapshot already removed by someone else
// is logged, not an error. The caller holds a shared repository lock, as
// for the capture.
type RepoRetention struct {
	Repo    *repo.Repository
	Now     func() time.Time // default time.Now
	Default *prune.Policy    // for a workspace with no stored policy; nil = leave it alone
	Logger  *slog.Logger     // optional: tells of snapshots already gone
}

// Apply implements Retention.
func (rr RepoRetention) Apply(ctx context.Context, ws, lastGood string) error {
	id, err := blob.ParseID(lastGood)
	if err != nil {
		return fmt.Errorf("retention for %s: the last good checkpoint %q is not a snapshot id, so nothing was removed: %w", ws, lastGood, err)
	}
	now := time.Now
	if rr.Now != nil {
		now = rr.Now
	}
	res, err := checkpoint.Retain(ctx, rr.Repo, checkpoint.RetainOptions{Workspace: ws, LastGood: id, Default: rr.Default, Now: now()})
	if rr.Logger != nil {
		if len(res.Gone) > 0 {
			rr.Logger.Info("retention: snapshots were already removed by another forget or retention beside this one",
				"workspace", ws, "snapshots", shortIDs(res.Gone))
		}
		if removed := removedIDs(res); len(removed) > 0 {
			rr.Logger.Info("retention removed snapshots", "workspace", ws, "last_good", id.Short(), "snapshots", shortIDs(removed))
		}
	}
	return err
}

// removedIDs are the snapshots a forget removed itself (not kept, not
// already gone).
func removedIDs(res checkpoint.ForgetResult) []blob.ID {
	var out []blob.ID
	for _, d := range res.Decisions {
		if !d.Keep && !slices.Contains(res.Gone, d.Snapshot.ID) {
			out = append(out, d.Snapshot.ID)
		}
	}
	return out
}
