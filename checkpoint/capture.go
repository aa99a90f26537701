package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/profile"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/capture"
)

// Options say what Capture saves and how.
type Options struct {
	Workspace string // required
	Host      string // default: this machine's name
	Instance  string // the provider's instance id, recorded in the snapshot
	Tags      []string
	Excludes  []string
	Readers   int  // files read in parallel; default twice the CPUs
	NoCache   bool // read every file, ignoring the file cache
	// Profiles are browser profiles named by the caller (ResolveProfiles),
	// captured into the sensitive tier whether or not discovery finds them.
	Profiles []profile.Profile
	// NoDiscovery captures only Profiles as profiles: the walk does not
	// look for others (they are then workspace files, or left to Excludes).
	NoDiscovery bool
	// Verify checks the snapshot after it is written (Verify): a snapshot
	// that fails is reported as an error, though it stays stored.
	Verify bool
	// Verified, when set, remembers the directories that passed Verify
	// across captures (VerifiedTrees): those of later snapshots are not
	// checked again while the index has lost no blob.
	Verified *VerifiedTrees
	// Progress is told of the capture; when the workspace has a parent
	// snapshot its totals are announced first, as the best estimate.
	Progress snapshot.Progress
	// Parent is the snapshot recorded as the new one's parent (serve: the
	// workspace's last good checkpoint), loaded alone. Null, or one that
	// no longer loads: the workspace's newest readable complete snapshot,
	// which takes listing every snapshot of the repository.
	Parent blob.ID
	// NoParentSearch: with a null Parent, record no parent rather than
	// list every snapshot for the newest (serve's first capture of a
	// workspace, which has no last good checkpoint yet).
	NoParentSearch bool
	// Own are more directories Lifeboat keeps its own data in (the CLI's
	// cache directory) beside the repository and its index cache: each
	// that lies inside the captured directory is left out of the snapshot
	// (Result.LeftOut), and a captured directory inside one is refused
	// (ErrCaptureOverlaps).
	Own []snapshot.OwnDir
}

// Result is what Capture did.
type Result struct {
	Manifest *snapshot.Manifest // nil when no snapshot was written
	Parent   *snapshot.Manifest // the workspace's latest readable snapshot before, or nil
	// Profiles are the browser profiles captured into the sensitive tier,
	// named or found, in path order.
	Profiles []profile.Profile
	// Problems are what preparing the profiles found (a database that
	// could not be checkpointed); they name paths, never content.
	Problems []profile.Problem
	Verified bool // Options.Verify was set and the snapshot passed
	// LeftOut are Lifeboat's own directories that lay inside the captured
	// directory and were left out of the snapshot (OwnDir.Path relative).
	LeftOut []snapshot.OwnDir
}

// ErrProfileTier: a workspace holds a browser profile and the key in use
// cannot write the sensitive tier, the only place profiles are captured
// to. It wraps crypt.ErrTierLocked.
var ErrProfileTier = fmt.Errorf("browser profiles are captured only into the sensitive tier: %w", crypt.ErrTierLocked)

// ResolveProfiles checks the browser profile directories dirs (absolute,
// or relative to the current directory) and returns them as profiles of
// the workspace at root: each must lie inside root, be no symlink, and be
// a profile of a known browser; profiles nested in one another are
// refused (profile.Select).
func ResolveProfiles(root string, dirs []string) ([]profile.Profile, error) {
	if len(dirs) == 0 {
		return nil, nil
	}
	return profile.Select(root, dirs, false)
}

// Capture saves dir as a new snapshot of o.Workspace in r: unchanged files
// (same device, inode, size, mtime and ctime as in the parent, the
// workspace's latest snapshot) are not read again; browser profiles, named
// in o.Profiles or found by the walk, are checked (a running browser
// stops the capture before anything is read), prepared right before they
// are read, and captured into the sensitive tier; with o.Verify the
// snapshot is verified. A key without the sensitive tier is refused
// (ErrProfileTier) as soon as a profile is named or found. Lifeboat's own
// directories inside dir (the repository, its index cache, o.Own) are
// left out; a dir that is, or is inside, one of them is refused
// (ErrCaptureOverlaps).
//
// Files that cannot be read make the snapshot partial
// (Manifest.Complete false), which is not an error here. The result's
// Profiles and Problems are set on an error too.
func Capture(ctx context.Context, r *repo.Repository, dir string, o Options) (res Result, err error) {
	if o.Workspace == "" {
		return res, errors.New("capture: no workspace named")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return res, err
	}
	if res.LeftOut, err = ownInside(abs, snapshot.OwnDirs(r, o.Own)); err != nil {
		return res, err
	}
	finder := &profile.Finder{Root: abs, Allow: func(p profile.Profile) error { return needSensitive(r, o.Workspace, p) }}
	defer func() { res.Profiles, res.Problems = finder.Found, finder.Problems }()
	specs := make([]capture.SensitiveSpec, len(o.Profiles))
	for i, p := range o.Profiles {
		if err := finder.Check(ctx, p.Rel, string(p.Kind)); err != nil {
			return res, err
		}
		specs[i] = finderSpec(finder, p)
	}
	if !o.Parent.IsNull() {
		res.Parent, err = snapshot.LoadManifest(ctx, r, o.Parent)
		if err != nil && ctx.Err() != nil {
			return res, err
		}
	}
	if res.Parent == nil && (!o.NoParentSearch || !o.Parent.IsNull()) {
		res.Parent, err = snapshot.Find(ctx, r, "latest", o.Workspace)
	}
	switch {
	case errors.Is(err, snapshot.ErrNoSnapshot):
		res.Parent = nil // the first complete snapshot of this workspace
	case err != nil:
		return res, err
	}
	if o.Progress != nil && res.Parent != nil {
		o.Progress.Start(res.Parent.Totals.Files, res.Parent.Totals.Bytes)
	}
	if o.Host == "" {
		o.Host, _ = os.Hostname()
	}
	copts := capture.Options{Workspace: o.Workspace, Host: o.Host, Instance: o.Instance, Tags: o.Tags,
		Excludes: o.Excludes, Readers: o.Readers, Parent: res.Parent, Progress: o.Progress, Sensitive: specs}
	if len(res.LeftOut) > 0 {
		out := make(map[string]bool, len(res.LeftOut))
		for _, d := range res.LeftOut {
			out[d.Path] = true
		}
		copts.Filter = func(rel string) bool { return !out[rel] }
	}
	if !o.NoDiscovery {
		copts.Discover = finder
	}
	if !o.NoCache {
		copts.Cache = r.FileCache()
	}
	m, err := capture.Run(ctx, r, dir, copts)
	if err != nil {
		return res, err
	}
	res.Manifest = m
	if o.Verify {
		if err := verify(ctx, r, m.ID, o.Verified); err != nil {
			return res, err
		}
		res.Verified = true
	}
	return res, nil
}

// finderSpec is the capture's sensitive tree for profile p, named by the
// caller: prepared by f right before it is read, like the profiles f
// finds, and filtered by the rule table.
func finderSpec(f *profile.Finder, p profile.Profile) capture.SensitiveSpec {
	return capture.SensitiveSpec{Path: p.Rel, Kind: string(p.Kind), Prepare: func(ctx context.Context) (func(string) bool, error) {
		return f.Prepare(ctx, p.Rel, string(p.Kind))
	}}
}

// needSensitive refuses, before anything is read, a capture of profile p
// with a key that lacks the sensitive tier: the profile would otherwise
// have to go into the workspace tree.
func needSensitive(r *repo.Repository, ws string, p profile.Profile) error {
	if hasTier(r, blob.Sensitive) {
		return nil
	}
	return fmt.Errorf("workspace %s holds the browser profile %s: %w. Use a key with the sensitive tier, or leave the profile out "+
		"(lifeboat capture: --no-profile-discovery and --exclude)", ws, p.Rel, ErrProfileTier)
}

func hasTier(r *repo.Repository, t blob.Tier) bool { return slices.Contains(r.Tiers(), t) }
