package profile

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// Problem is something found in a profile that the user should know
// about; the operation went on. It names a path, never file content.
type Problem struct {
	Profile string `json:"profile"` // the profile's slash path from the workspace root
	Path    string `json:"path"`    // slash path inside the profile
	What    string `json:"what"`
}

// Prepare makes p ready to capture and records its browser's state in
// p.State (Detect), which decides p.CaptureFilter:
//   - Running: refused with a *RunningError (ErrBrowserRunning).
//   - Paused: nothing is opened or changed. The frozen browser may hold
//     its databases' locks, so no checkpoint can run; the capture takes
//     each database with its -wal and -journal, a crash-consistent unit
//     that restore replays (Validate).
//   - NotRunning: every SQLite database that has a write-ahead log or a
//     rollback journal beside it is checkpointed, so the database file
//     alone holds all committed data (the side files are not captured);
//     one whose side files are all empty has nothing to checkpoint and is
//     only checked for locks (sqliteHeld), never opened for writing. A
//     database that another connection holds (busy) means a writer is at
//     work: *RunningError. A database that cannot be checkpointed
//     otherwise (damaged, say) is captured as it is and reported as a
//     Problem.
func Prepare(ctx context.Context, p *Profile) ([]Problem, error) {
	st, err := Detect(*p)
	p.State = st
	if err != nil || st == Paused {
		return nil, err
	}
	var probs []Problem
	err = walkKept(*p, func(rel, abs string, d fs.DirEntry) error {
		if !d.Type().IsRegular() || !hasSide(abs) || !isSQLite(abs) {
			return nil
		}
		err := sidesRegular(abs)
		switch {
		case err != nil:
		case sidesEmpty(abs):
			// Nothing to fold in or roll back: the database is not
			// opened for writing (a capture leaves it as it found it),
			// only checked for a connection holding it.
			err = sqliteHeld(abs)
		default:
			err = checkpoint(ctx, abs)
		}
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, errBusy) {
				// A writer holds it: the WAL cannot be folded in, and
				// the copy would lack its committed rows.
				return &RunningError{Dir: p.Dir, Why: rel + " is held by another SQLite connection, so its write-ahead log cannot be checkpointed"}
			}
			probs = append(probs, Problem{p.Rel, rel, "SQLite checkpoint failed, captured as it is: " + err.Error()})
		}
		return nil
	})
	return probs, err
}

// hasSide reports whether a -wal or -journal file sits beside p.
func hasSide(p string) bool {
	for _, s := range []string{"-wal", "-journal"} {
		if _, err := os.Lstat(p + s); err == nil {
			return true
		}
	}
	return false
}

// sidesEmpty reports whether every -wal and -journal beside p is an empty
// regular file: then there is nothing to fold in or roll back (SQLite
// takes no empty journal as hot, and an empty write-ahead log has no
// frames), and the database file alone holds every committed row.
func sidesEmpty(p string) bool {
	for _, s := range []string{"-wal", "-journal"} {
		if fi, err := os.Lstat(p + s); err == nil && (!fi.Mode().IsRegular() || fi.Size() > 0) {
			return false
		}
	}
	return true
}

// sidesRegular refuses to let SQLite open database p when a side file
// beside it is not a regular file: SQLite would follow a symlink and
// write, truncate or map the file it points to.
func sidesRegular(p string) error {
	for _, s := range sqliteSide {
		if fi, err := os.Lstat(p + s); err == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("%s%s is not a regular file (%v), so SQLite does not open the database", filepath.Base(p), s, fi.Mode().Type())
		}
	}
	return nil
}

// walkKept calls fn for every entry of p the capture keeps, never
// entering skipped directories or following symlinks.
func walkKept(p Profile, fn func(rel, abs string, d fs.DirEntry) error) error {
	return filepath.WalkDir(p.Dir, func(abs string, d fs.DirEntry, err error) error {
		if abs == p.Dir {
			return err
		}
		rel, _ := filepath.Rel(p.Dir, abs)
		rel = filepath.ToSlash(rel)
		if a, _ := DecideState(p.Kind, p.State, rel); a != Keep {
			if d != nil && d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if err != nil {
			return nil // unreadable: the capture reports it
		}
		return fn(rel, abs, d)
	})
}
