package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"lifeboat/profile"
	"lifeboat/profile/fixture"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/capture"
	"lifeboat/snapshot/restore"
)

// ProfileRel is where WriteProfileWorkspace puts the browser profile.
const ProfileRel = "home/agent/.config/chromium"

// WriteProfileWorkspace writes a workspace at dir: the corpus of Generate at
// scale s under "project", and the deterministic Chromium session fixture of
// seed at ProfileRel (with an un-checkpointed Cookies WAL, and its
// localStorage when s.LocalStorage is set). It returns the fixture, whose
// Check confirms a restored copy.
func WriteProfileWorkspace(ctx context.Context, dir string, seed uint64, s Scale) (*fixture.Fixture, error) {
	if err := Generate(filepath.Join(dir, "project"), seed, s); err != nil {
		return nil, err
	}
	udd := filepath.Join(dir, filepath.FromSlash(ProfileRel))
	if err := os.MkdirAll(filepath.Dir(udd), 0o700); err != nil {
		return nil, err
	}
	fx := fixture.New(seed)
	fx.LocalStorage = s.LocalStorage
	return fx, fx.Write(ctx, udd, fixture.Options{WAL: true})
}

// ProfileRoundTrip captures the workspace at src with its browser
// profiles (discovered, prepared, filtered by the rule table) and restores
// it with the profiles into target, validated in staging: the library path
// that `lifeboat capture` and `lifeboat restore --profiles` take.
func ProfileRoundTrip(ctx context.Context, r *repo.Repository, src, target string) (*snapshot.Manifest, []profile.Problem, error) {
	abs, err := filepath.Abs(src)
	if err != nil {
		return nil, nil, err
	}
	finder := &profile.Finder{Root: abs}
	m, err := capture.Run(ctx, r, src, capture.Options{Workspace: "bench-profile", Discover: finder})
	probs := finder.Problems
	if err != nil {
		return nil, probs, err
	}
	part, err := snapshot.LoadSensitivePart(ctx, r, m)
	if err != nil {
		return m, probs, err
	}
	if part == nil {
		return m, probs, fmt.Errorf("snapshot %s has no profiles", m.ID.Short())
	}
	var ps []profile.Profile
	for _, t := range part.Trees {
		ps = append(ps, profile.Profile{Rel: t.Path, Kind: profile.Kind(t.Kind)})
	}
	_, err = restore.Run(ctx, r, m, restore.Options{Target: target, Grafts: part.Grafts(),
		Validate: func(ctx context.Context, staging string) error {
			more, err := profile.Validate(ctx, staging, ps)
			probs = append(probs, more...)
			return err
		}})
	return m, probs, err
}
