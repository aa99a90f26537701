package restore

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"

	"golang.org/x/sys/unix"

	"lifeboat/repo"
	"lifeboat/snapshot"
)

// ErrTargetOverlaps: the restore target is, is inside, or contains a
// directory Lifeboat keeps its own data in (the repository, its cache,
// the lifecycle state). A restore there would overwrite it, and
// --replace would delete it.
var ErrTargetOverlaps = errors.New("restore target refused")

// ErrTargetHoldsRepository is ErrTargetOverlaps under its former name.
var ErrTargetHoldsRepository = ErrTargetOverlaps

// ProtectedDir is a directory a restore target must neither be inside nor
// contain.
type ProtectedDir = snapshot.OwnDir

// dirID is a directory's identity.
type dirID struct{ dev, ino uint64 }

// CheckTarget refuses, as Run does before it writes anything, a target
// that is, is inside, or contains the repository's own directories (its
// location, its index cache) or one of protect (ErrTargetOverlaps). A
// command calls it before it looks for the snapshot, which can write to
// the local index (its snapshot catalog), so that a refused restore
// changes nothing.
func CheckTarget(r *repo.Repository, target string, protect []ProtectedDir) error {
	return refuseOverlap(target, snapshot.OwnDirs(r, protect))
}

// refuseOverlap refuses a target that is, is inside, or contains one of
// own (ErrTargetOverlaps, naming both). Directories are compared by
// identity (device and inode), from each of them up to the root as the
// kernel resolves "..", so no spelling slips through: not a symlink
// among the parents, not "..", not a bind mount of the repository seen
// at another path. A target that does not exist yet is placed by the
// nearest directory above it that does. A protected path that is not a
// local directory (an object store's location, a state directory not
// created yet) has nothing a restore could destroy and is passed over.
func refuseOverlap(target string, own []ProtectedDir) error {
	if target == "" {
		return nil // newStage says what is wrong
	}
	abs, err := filepath.Abs(target)
	if err != nil {
		return nil
	}
	at := abs
	fd, err := openPath(at)
	for err != nil {
		up := filepath.Dir(at)
		if up == at {
			return nil
		}
		at = up
		fd, err = openPath(at)
	}
	exists := at == abs
	tAnc := ancestry(fd)
	if len(tAnc) == 0 {
		return nil
	}
	// Say "is" or "is inside" before "contains": a target that is the
	// cache directory also contains the repository's index cache.
	type found struct {
		p   ProtectedDir
		rel string
	}
	var hits []found
	for _, p := range own {
		if p.Path == "" {
			continue
		}
		pfd, err := openPath(p.Path)
		if err != nil {
			continue
		}
		pAnc := ancestry(pfd)
		switch {
		case len(pAnc) == 0:
		case exists && pAnc[0] == tAnc[0]:
			hits = append(hits, found{p, "is"})
		case slices.Contains(tAnc, pAnc[0]):
			hits = append(hits, found{p, "is inside"})
		case exists && slices.Contains(pAnc, tAnc[0]):
			hits = append(hits, found{p, "contains"})
		}
	}
	if len(hits) == 0 {
		return nil
	}
	h := slices.MinFunc(hits, func(a, b found) int { return boolInt(a.rel == "contains") - boolInt(b.rel == "contains") })
	return fmt.Errorf("%w: %s%s %s %s %s: a restore there would overwrite it, and --replace would delete it; restore somewhere else",
		ErrTargetOverlaps, target, spelledAs(target, abs, at), h.rel, h.p.What, h.p.Path)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// spelledAs is " (that is, P)" when the target's real path P (symlinks
// of its existing part resolved) differs from how it was given.
func spelledAs(target, abs, existing string) string {
	real, err := filepath.EvalSymlinks(existing)
	if err != nil {
		return ""
	}
	if rest, err := filepath.Rel(existing, abs); err == nil && rest != "." {
		real = filepath.Join(real, rest)
	}
	if real == target || real == abs {
		return ""
	}
	return " (that is, " + real + ")"
}

func openPath(p string) (int, error) {
	return unix.Open(p, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
}

// ancestry returns the identities of the directory fd and of every
// directory above it, up to the root, and closes fd.
func ancestry(fd int) []dirID {
	var out []dirID
	for range 4096 {
		var st unix.Stat_t
		if unix.Fstat(fd, &st) != nil {
			break
		}
		id := dirID{uint64(st.Dev), st.Ino}
		if len(out) > 0 && out[len(out)-1] == id {
			break // the root: its ".." is itself
		}
		out = append(out, id)
		up, err := unix.Openat(fd, "..", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			break
		}
		_ = unix.Close(fd)
		fd = up
	}
	_ = unix.Close(fd)
	return out
}
