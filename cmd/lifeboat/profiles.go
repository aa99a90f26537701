package main

import (
	"context"
	"fmt"
	"io"
	"slices"

	"lifeboat/blob"
	"lifeboat/profile"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/restore"
)

// profileProblemMessage is a problem found in a browser profile: at
// capture (a database that could not be checkpointed) or at restore
// (validation). It names paths, never content.
type profileProblemMessage struct {
	MessageType string `json:"message_type"` // "profile_problem"
	Profile     string `json:"profile"`
	Path        string `json:"path"`
	What        string `json:"what"`
}

// profileRef names a profile in capture and restore messages.
type profileRef struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
}

func (g *globalOptions) profileProblems(probs []profile.Problem) {
	for _, p := range probs {
		g.out.emit(profileProblemMessage{"profile_problem", p.Profile, p.Path, p.What}, func(w io.Writer) {})
		if !g.out.json {
			fmt.Fprintf(g.out.errw, "warning: profile %s: %s: %s\n", quoteName(p.Profile), quoteName(p.Path), p.What)
		}
	}
}

// restoredProfiles collects, for the restore message, the profiles grafted
// and the problems their validation found.
type restoredProfiles struct {
	refs     []profileRef
	problems *[]profile.Problem
}

// restoreProfiles decides what a restore does with m's sensitive part. With
// want (--profiles) it loads the part, which needs the sensitive tier (a
// workspace-only key gets an error that exits 16), and sets ro's grafts and
// validation; the status says what became of the part.
func restoreProfiles(ctx context.Context, r *repo.Repository, m *snapshot.Manifest, want bool, ro *restore.Options) (string, restoredProfiles, error) {
	rp := restoredProfiles{refs: []profileRef{}, problems: new([]profile.Problem)}
	switch {
	case m.Sensitive == nil:
		return "none", rp, nil
	case !slices.Contains(r.Tiers(), blob.Sensitive):
		if want {
			return "", rp, fmt.Errorf("--profiles: %w; restore without --profiles to get the workspace files, or use a key with the sensitive tier (`lifeboat key list` shows each key's tiers)",
				snapshot.ErrSensitiveLocked)
		}
		return "locked", rp, nil
	case !want:
		return "not_requested", rp, nil
	}
	part, err := snapshot.LoadSensitivePart(ctx, r, m)
	if err != nil {
		return "", rp, err
	}
	var ps []profile.Profile
	for _, t := range part.Trees {
		ps = append(ps, profile.Profile{Rel: t.Path, Kind: profile.Kind(t.Kind)})
		rp.refs = append(rp.refs, profileRef{t.Path, t.Kind})
	}
	ro.Grafts = part.Grafts()
	ro.Validate = func(ctx context.Context, staging string) error {
		probs, err := profile.Validate(ctx, staging, ps)
		*rp.problems = probs
		return err
	}
	return "restored", rp, nil
}

func restoreSensitiveText(w io.Writer, status string, refs []profileRef) {
	switch status {
	case "restored":
		for _, p := range refs {
			fmt.Fprintf(w, "browser profile %s (%s) restored\n", quoteName(p.Path), p.Kind)
		}
	case "locked":
		fmt.Fprintln(w, "this snapshot has a sensitive part (browser profiles) that your key cannot open; only the workspace files were restored")
	case "not_requested":
		fmt.Fprintln(w, "this snapshot has browser profiles; they were not restored (add --profiles)")
	}
}

// profileFlaggedError ends a restore that finished but whose profile
// validation flagged files: exit code 19.
type profileFlaggedError struct{ n int }

func (e profileFlaggedError) Error() string {
	return fmt.Sprintf("the restore finished, but validation flagged %d file(s) in the restored browser profiles (see the warnings above)", e.n)
}
