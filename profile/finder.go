package profile

import (
	"context"
	"path/filepath"
)

// Finder finds the profiles of a workspace during a capture's own walk
// instead of a walk of its own (Discover): the capture asks Detect about
// every directory it lists, calls Check for each profile found, on its
// walker's goroutine, in walk order, and Prepare for each right before it
// captures it, once the walk is done. It satisfies
// capture.Discoverer. What Discover promises holds here too, because the
// capture's walk gives it: symlinks are never followed, a profile is not
// searched further, the workspace root is never a profile, and a
// directory that cannot be listed is reported by the capture and not
// searched. Unlike Discover, it sees only what the capture walks: a
// directory the capture's excludes leave out, or one below it, is never
// a profile, and one that may be searched but not listed is reported by
// the capture (it cannot open it) instead of recognised by its markers.
type Finder struct {
	// Root is the workspace root, absolute.
	Root string
	// Allow, when set, is asked about each profile found, before its
	// browser is checked; an error ends the capture (a key without the
	// sensitive tier, say).
	Allow func(Profile) error

	// Found lists the profiles prepared, in path order; Problems what
	// their preparation reported. Read them after the capture returns.
	Found    []Profile
	Problems []Problem
}

// Detect reports whether the directory open as dirfd, whose entries are
// names (all of them, before any exclude), is a profile root.
func (f *Finder) Detect(dirfd int, names []string) (string, bool) {
	k, ok := DetectNames(dirfd, names)
	return string(k), ok
}

// profile is the profile at slash path rel of the root, of kind.
func (f *Finder) profile(rel, kind string) Profile {
	return Profile{Dir: filepath.Join(f.Root, filepath.FromSlash(rel)), Rel: rel, Kind: Kind(kind)}
}

// Check refuses the profile at slash path rel, which Detect found to be
// of kind, when Allow does or its browser is running (*RunningError): the
// capture ends before it reads the rest of the workspace.
func (f *Finder) Check(_ context.Context, rel, kind string) error {
	p := f.profile(rel, kind)
	if f.Allow != nil {
		if err := f.Allow(p); err != nil {
			return err
		}
	}
	return CheckRunning(p)
}

// Prepare readies the profile at slash path rel right before the capture
// reads it (see Prepare: its browser is checked again, its databases
// checkpointed) and returns the filter its capture keeps entries by.
func (f *Finder) Prepare(ctx context.Context, rel, kind string) (func(string) bool, error) {
	p := f.profile(rel, kind)
	probs, err := Prepare(ctx, &p)
	f.Problems = append(f.Problems, probs...)
	if err != nil {
		return nil, err
	}
	f.Found = append(f.Found, p)
	return p.CaptureFilter(), nil
}
