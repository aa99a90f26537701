package profile

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// sqliteNames are files that browsers keep as SQLite databases: such a
// file without the SQLite header is reported as damaged.
var sqliteNames = map[string]bool{
	"Cookies": true, "Login Data": true, "Login Data For Account": true, "Web Data": true, "History": true,
	"Favicons": true, "Top Sites": true, "Shortcuts": true, "Network Action Predictor": true,
	"cookies.sqlite": true, "places.sqlite": true, "key4.db": true, "cert9.db": true, "formhistory.sqlite": true,
	"permissions.sqlite": true, "favicons.sqlite": true, "webappsstore.sqlite": true,
}

// Validate checks and readies the profiles restored under staging (each at
// staging/Rel), before the restore switches them into place:
//
//   - lock files the rule table marks Never are removed;
//   - a database restored with a -wal or -journal beside it (captured
//     while its browser was paused) is opened with SQLite, which replays
//     the -wal up to its last commit or rolls back the hot -journal, and
//     checkpointed; then its -wal, -shm and -journal are removed, as are
//     any beside a file that is not a database. All of it happens in the
//     staging tree: nothing is written elsewhere;
//   - every SQLite database (by header, or by a known database name) must
//     pass PRAGMA integrity_check;
//   - every LevelDB folder (one holding CURRENT, a MANIFEST-* or *.ldb)
//     must have CURRENT naming a MANIFEST that exists;
//   - Chromium: each profile folder's Preferences gets profile.exit_type
//     "Normal" and profile.exited_cleanly true, so the browser does not
//     offer to "restore" a crashed session or discard state.
//
// Damage is reported as Problems and does not stop the restore: the files
// are exactly as captured (their content ids were verified), and the rest
// of the profile is still worth having. An error is returned only when the
// staging tree cannot be read or changed.
func Validate(ctx context.Context, staging string, ps []Profile) ([]Problem, error) {
	var probs []Problem
	for _, p := range ps {
		dir := filepath.Join(staging, filepath.FromSlash(p.Rel))
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() {
			return probs, fmt.Errorf("restored profile %s is not a directory in the staging tree %s: %v", p.Rel, staging, err)
		}
		add := func(rel, what string) { probs = append(probs, Problem{p.Rel, rel, what}) }
		err = filepath.WalkDir(dir, func(abs string, d fs.DirEntry, err error) error {
			if cerr := ctx.Err(); cerr != nil {
				return cerr
			}
			rel, _ := filepath.Rel(dir, abs)
			rel = filepath.ToSlash(rel)
			switch {
			case err != nil && abs == dir:
				return err
			case err != nil: // a folder restored without read permission, say
				add(rel, "not validated: "+err.Error())
				return nil
			case abs == dir:
				return nil
			}
			if a, _ := Decide(p.Kind, rel); a == Never || staleSide(abs) {
				if d.IsDir() {
					return removeAll(abs)
				}
				return removeIfThere(abs) // a database's side files went with its replay
			}
			switch {
			case d.IsDir():
				if what := checkLevelDB(abs); what != "" {
					add(rel, what)
				}
			case d.Type().IsRegular():
				switch {
				case isSQLite(abs):
					if err := replaySide(ctx, abs); err != nil {
						if cerr := ctx.Err(); cerr != nil {
							return cerr
						}
						add(rel, "SQLite could not replay the -wal or -journal restored with it, which were removed: "+err.Error())
					}
					if err := removeSide(abs); err != nil {
						return err
					}
					what, err := integrity(ctx, abs)
					if err != nil {
						return err
					}
					if what != "" {
						add(rel, "SQLite integrity check failed: "+what)
					}
				case sqliteNames[d.Name()]:
					if fi, err := d.Info(); err == nil && fi.Size() > 0 {
						add(rel, "not an SQLite database: the header is damaged")
					}
				}
			}
			return nil
		})
		if err != nil {
			return probs, fmt.Errorf("validating restored profile %s: %w", p.Rel, err)
		}
		if p.Kind == Chromium {
			more, err := resetCrashState(dir, p.Rel)
			probs = append(probs, more...)
			if err != nil {
				return probs, err
			}
		}
	}
	return probs, nil
}

// staleSide reports whether p is a SQLite side file beside a database.
func staleSide(p string) bool {
	for _, s := range sqliteSide {
		if db, ok := strings.CutSuffix(p, s); ok && len(filepath.Base(p)) > len(s) && regular(db) {
			return true
		}
	}
	return false
}

// replaySide brings into database p the -wal or -journal restored beside
// it: SQLite replays the -wal up to its last commit (frames of a
// transaction that never committed are ignored) or rolls back a hot
// -journal, and the checkpoint leaves the database file alone holding
// every committed row. Nothing to do without side files.
func replaySide(ctx context.Context, p string) error {
	if !hasSide(p) {
		return nil
	}
	// The -shm is derived from the -wal; one restored with it could be a
	// symlink that SQLite would write through.
	if err := removeIfThere(p + "-shm"); err != nil {
		return err
	}
	if err := sidesRegular(p); err != nil {
		return err
	}
	return checkpoint(ctx, p)
}

// removeSide removes the -wal, -shm and -journal files of database p.
func removeSide(p string) error {
	for _, s := range sqliteSide {
		fi, err := os.Lstat(p + s)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err == nil && fi.IsDir():
			err = os.RemoveAll(p + s)
		case err == nil:
			err = os.Remove(p + s)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func removeIfThere(p string) error {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func removeAll(p string) error {
	if err := os.RemoveAll(p); err != nil {
		return err
	}
	return filepath.SkipDir
}

// checkLevelDB returns what is wrong with dir as a LevelDB folder, or ""
// when it is sound or is not one.
func checkLevelDB(dir string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return ""
	}
	looks := false
	for _, e := range ents {
		n := e.Name()
		if n == "CURRENT" || strings.HasPrefix(n, "MANIFEST-") || strings.HasSuffix(n, ".ldb") {
			looks = true
		}
	}
	if !looks {
		return ""
	}
	cur := filepath.Join(dir, "CURRENT")
	if !regular(cur) {
		return "LevelDB folder without CURRENT"
	}
	b, err := os.ReadFile(cur)
	if err != nil {
		return "LevelDB CURRENT unreadable: " + err.Error()
	}
	name, _, _ := bytes.Cut(b, []byte("\n"))
	if !strings.HasPrefix(string(name), "MANIFEST-") || strings.ContainsAny(string(name), "/\x00") {
		return "LevelDB CURRENT does not name a MANIFEST"
	}
	if !regular(filepath.Join(dir, string(name))) {
		return fmt.Sprintf("LevelDB CURRENT names %s, which is missing", name)
	}
	return ""
}

// resetCrashState sets exit_type Normal and exited_cleanly true in the
// Preferences of each profile folder of a Chromium user-data-dir.
func resetCrashState(dir, profRel string) ([]Problem, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var probs []Problem
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		p := filepath.Join(dir, e.Name(), "Preferences")
		if !regular(p) {
			continue
		}
		if err := resetPrefs(p); err != nil {
			if _, ok := err.(prefsError); ok {
				probs = append(probs, Problem{profRel, e.Name() + "/Preferences", err.Error()})
				continue
			}
			return probs, err
		}
	}
	return probs, nil
}

type prefsError string

func (e prefsError) Error() string { return string(e) }

func resetPrefs(p string) error {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return err
	}
	var prefs map[string]any
	dec := json.NewDecoder(bufio.NewReader(f))
	dec.UseNumber()
	err = dec.Decode(&prefs)
	f.Close()
	if err != nil || prefs == nil {
		return prefsError("not a JSON object; crash state not reset")
	}
	prof, _ := prefs["profile"].(map[string]any)
	if prof == nil {
		prof = map[string]any{}
		prefs["profile"] = prof
	}
	prof["exit_type"] = "Normal"
	prof["exited_cleanly"] = true
	out, err := json.Marshal(prefs)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(p), ".Preferences-*")
	if err != nil {
		return err
	}
	_, err = tmp.Write(out)
	if err == nil {
		err = tmp.Chmod(fi.Mode().Perm())
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(tmp.Name(), fi.ModTime(), fi.ModTime())
	}
	if err == nil {
		err = os.Rename(tmp.Name(), p)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
	}
	return err
}
