package restore

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"lifeboat/internal/osutil"
)

// StaleStaging is a directory a restore left beside its target
// (.lifeboat-restore-<hex> or .lifeboat-old-<hex>), found by a clean-up,
// and what the clean-up did with it.
type StaleStaging struct {
	Path    string   `json:"path"`
	Removed bool     `json:"removed"`
	Why     string   `json:"why,omitempty"` // why it stayed (not removed)
	Remains *Remains `json:"-"`             // what stayed of a tree it began to remove
}

// stagingInUse is StaleStaging.Why of a running restore's directory.
const stagingInUse = "in use by a running restore"

// CleanStaging removes from dir the staging and replaced trees of
// restores whose process is gone: each .lifeboat-restore-<hex> and
// .lifeboat-old-<hex> directory whose flock it can take (a running
// restore holds the lock on its staging directory until it ends; the
// kernel drops it when the process dies). It never removes:
//
//   - a directory whose lock is held (a running restore's);
//   - the pair .lifeboat-restore-<hex> and .lifeboat-old-<hex> of one
//     restore: that is what a crash inside the two-step switch leaves (the
//     target moved aside, the new tree not yet in its place); both are
//     named, for the user to rename one of them to the target;
//   - .lifeboat-kept-<hex> (a replaced tree a failed switch kept), or
//     anything that is not a directory;
//   - anything below a mount point, or through a symlink (stage_remove.go).
//
// It returns every stale directory it found, removed or not. Staging
// directories of a restore run by a Lifeboat without this lock (before
// this clean-up existed) cannot be told from dead ones: do not upgrade
// while such a restore runs.
func CleanStaging(dir string) ([]StaleStaging, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("cleaning up interrupted restores in %s: %w", dir, &fs.PathError{Op: "open", Path: dir, Err: err})
	}
	defer unix.Close(fd)
	return cleanStaging(fd, dir, unix.Openat2), nil
}

// stagingHex returns the hex digits of a staging or old-tree name, or "".
func stagingHex(name string) (hex string, old bool) {
	switch {
	case strings.HasPrefix(name, stagePrefix):
		hex = name[len(stagePrefix):]
	case strings.HasPrefix(name, stageOldPre):
		hex, old = name[len(stageOldPre):], true
	default:
		return "", false
	}
	if len(hex) != 16 || strings.Trim(hex, "0123456789abcdef") != "" {
		return "", false
	}
	return hex, old
}

// cleanStaging is CleanStaging in the open directory pfd (at dir).
func cleanStaging(pfd int, dir string, openat2 func(int, string, *unix.OpenHow) (int, error)) []StaleStaging {
	type pair struct{ staging, old bool }
	found := map[string]*pair{}
	for _, name := range dirNames(pfd) {
		hex, old := stagingHex(name)
		if hex == "" {
			continue
		}
		p := found[hex]
		if p == nil {
			p = &pair{}
			found[hex] = p
		}
		if old {
			p.old = true
		} else {
			p.staging = true
		}
	}
	var out []StaleStaging
	for _, hex := range slices.Sorted(maps.Keys(found)) {
		p := found[hex]
		staging, old := stagePrefix+hex, stageOldPre+hex
		if p.staging && p.old {
			why := fmt.Sprintf("a restore was interrupted inside its switch: its target was moved aside to %s and the new tree, complete, is at %s; "+
				"rename one of them to the target (the old one restores the state before the restore), then delete the other",
				filepath.Join(dir, old), filepath.Join(dir, staging))
			out = append(out, StaleStaging{Path: filepath.Join(dir, staging), Why: why}, StaleStaging{Path: filepath.Join(dir, old), Why: why})
			continue
		}
		name := staging
		if p.old {
			name = old
		}
		out = append(out, cleanOne(pfd, dir, name, openat2))
	}
	return out
}

// cleanOne removes the directory name in pfd if no process holds its lock.
func cleanOne(pfd int, dir, name string, openat2 func(int, string, *unix.OpenHow) (int, error)) StaleStaging {
	res := StaleStaging{Path: filepath.Join(dir, name)}
	fd, err := unix.Openat(pfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	switch {
	case err == unix.ENOENT:
		res.Removed = true // removed meanwhile (by its restore, or another clean-up)
		return res
	case err == unix.ENOTDIR || err == unix.ELOOP:
		res.Why = "not a directory (not left by a restore): left alone"
		return res
	case err != nil:
		res.Why = fmt.Sprintf("cannot be opened to tell whether a restore still uses it (%v): remove it by hand once no restore runs", err)
		return res
	}
	defer unix.Close(fd)
	err = osutil.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	switch {
	case err == unix.EWOULDBLOCK:
		res.Why = stagingInUse
		return res
	case err != nil:
		res.Why = fmt.Sprintf("cannot tell whether a restore still uses it (locking: %v): remove it by hand once no restore runs", err)
		return res
	}
	// Locked: the directory at the name may have been replaced since it was
	// opened (removed by another clean-up, then a new restore took the
	// name); remove only the one locked.
	var st, at unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Nlink == 0 ||
		unix.Fstatat(pfd, name, &at, unix.AT_SYMLINK_NOFOLLOW) != nil || at.Dev != st.Dev || at.Ino != st.Ino {
		res.Removed = true
		return res
	}
	if left := removeTree(pfd, dir, name, openat2); left != nil {
		res.Why, res.Remains = left.String(), left
		return res
	}
	res.Removed = true
	return res
}

// dirNames lists the names in the open directory pfd (without . and ..).
func dirNames(pfd int) []string {
	fd, err := unix.Openat(pfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	defer unix.Close(fd)
	buf := make([]byte, 8<<10)
	var names []string
	for {
		n, err := osutil.IgnoringEINTR2(func() (int, error) { return unix.Getdents(fd, buf) })
		if err != nil || n <= 0 {
			return names
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}

// Records: with Options.Records set, a restore writes the file
// <records>/<hex> holding its target's parent directory before it creates
// its staging directory, and removes it when it ends with nothing left
// beside the target. A killed restore leaves its record, which
// CleanRecordedStaging (`lifeboat unlock`) follows.

// writeRecord notes this restore in records (best effort: a restore does
// not fail because its cache directory cannot be written).
func (s *stage) writeRecord(records string) {
	s.removeRecord()
	if records == "" {
		return
	}
	if err := os.MkdirAll(records, 0o700); err != nil {
		return
	}
	p := filepath.Join(records, s.hex)
	if os.WriteFile(p, []byte(s.parent+"\n"), 0o600) == nil {
		s.record = p
	}
}

func (s *stage) removeRecord() {
	if s.record != "" {
		_ = os.Remove(s.record)
		s.record = ""
	}
}

// forgetRecords removes from records the records of the restores whose
// directories a clean-up removed.
func forgetRecords(records string, cleaned []StaleStaging) {
	if records == "" {
		return
	}
	for _, c := range cleaned {
		if hex, _ := stagingHex(filepath.Base(c.Path)); c.Removed && hex != "" {
			_ = os.Remove(filepath.Join(records, hex))
		}
	}
}

// CleanRecordedStaging runs CleanStaging in the directory of every restore
// recorded in records (Options.Records) and forgets each record
// whose restore left nothing there any more. A directory that is gone
// has its records forgotten.
func CleanRecordedStaging(records string) ([]StaleStaging, error) {
	ents, err := os.ReadDir(records)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the records of restores in %s: %w", records, err)
	}
	byDir := map[string][]string{} // parent -> record names (hex)
	for _, e := range ents {
		p := filepath.Join(records, e.Name())
		hex, _ := stagingHex(stagePrefix + e.Name())
		b, err := os.ReadFile(p)
		dir := strings.TrimSuffix(string(b), "\n")
		if hex == "" || !e.Type().IsRegular() || err != nil || !filepath.IsAbs(dir) || strings.ContainsAny(dir, "\n\x00") {
			if e.Type().IsRegular() {
				_ = os.Remove(p) // not a record, or one cut short by a kill
			}
			continue
		}
		byDir[dir] = append(byDir[dir], hex)
	}
	var out []StaleStaging
	var errs []error
	for _, dir := range slices.Sorted(maps.Keys(byDir)) {
		found, err := CleanStaging(dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		out = append(out, found...)
		for _, hex := range byDir[dir] {
			if !exists(filepath.Join(dir, stagePrefix+hex)) && !exists(filepath.Join(dir, stageOldPre+hex)) {
				_ = os.Remove(filepath.Join(records, hex))
			}
		}
	}
	return out, errors.Join(errs...)
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return !errors.Is(err, fs.ErrNotExist)
}
