package profile

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// discoverRef is Discover as it was before it listed directories by
// descriptor: a filepath.WalkDir with Lstat calls on candidate marker
// paths in every directory. The comparison tests check Discover against
// it.
func discoverRef(root string) ([]Profile, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	walkRoot := abs
	if fi, err := os.Lstat(abs); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		if walkRoot, err = filepath.EvalSymlinks(abs); err != nil {
			return nil, fmt.Errorf("searching %s for browser profiles: %w", abs, err)
		}
	}
	var out []Profile
	err = filepath.WalkDir(walkRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == walkRoot {
				return err
			}
			return nil
		}
		if !d.IsDir() || p == walkRoot {
			return nil
		}
		if k, ok := detectRef(p); ok {
			rel, _ := filepath.Rel(walkRoot, p)
			out = append(out, Profile{Dir: filepath.Join(abs, rel), Rel: filepath.ToSlash(rel), Kind: k})
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("searching %s for browser profiles: %w", abs, err)
	}
	return out, nil
}

func detectRef(dir string) (Kind, bool) {
	if regularRef(filepath.Join(dir, "Local State")) {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return "", false
		}
		for _, e := range ents {
			if e.IsDir() && regularRef(filepath.Join(dir, e.Name(), "Preferences")) {
				return Chromium, true
			}
		}
		return "", false
	}
	if regularRef(filepath.Join(dir, "profiles.ini")) {
		return Firefox, true
	}
	if regularRef(filepath.Join(dir, "prefs.js")) && (regularRef(filepath.Join(dir, "cookies.sqlite")) || regularRef(filepath.Join(dir, "key4.db"))) {
		return Firefox, true
	}
	return "", false
}

func regularRef(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular()
}
