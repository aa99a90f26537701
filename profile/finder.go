package profile

import (
	"context"
	"path/filepath"
)

// Finder finds the profiles of a workspace during a capture's own walk
// instead of a walk of its own (Discover): the capture asks Detect about
// every directory it lists, then calls Prepare for each profile found, on
// its walker's goroutine, in walk order. It satisfies
// snapshot.Discoverer. What Discover promises holds here too, because the
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
	// Check, when set, is asked about each profile found before it is
	// prepared; an error ends the capture (a key without the sensitive
	// tier, say).
	Check func(Profile) error

	// Found lists the profiles prepared, in walk order; Problems what
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

// Prepare readies the profile at slash path rel of the root, which Detect
// found to be of kind (see Prepare), and returns the filter its capture
// keeps entries by. A running browser is refused with a *RunningError.
func (f *Finder) Prepare(ctx context.Context, rel, kind string) (func(string) bool, error) {
	p := Profile{Dir: filepath.Join(f.Root, filepath.FromSlash(rel)), Rel: rel, Kind: Kind(kind)}
	if f.Check != nil {
		if err := f.Check(p); err != nil {
			return nil, err
		}
	}
	probs, err := Prepare(ctx, &p)
	f.Problems = append(f.Problems, probs...)
	if err != nil {
		return nil, err
	}
	f.Found = append(f.Found, p)
	return p.CaptureFilter(), nil
}
