package profile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Profile is a browser profile inside a workspace: a Chromium
// user-data-dir (it holds Local State and the profile folders such as
// Default), a Firefox root (profiles.ini and its profiles), or one Firefox
// profile folder.
type Profile struct {
	Dir  string // absolute path
	Rel  string // slash path from the workspace root
	Kind Kind
	// State is the browser's state that Prepare found (NotRunning until
	// then); CaptureFilter depends on it.
	State State
}

// ErrNotProfile: a --profile directory is not a browser profile, or not a
// real directory inside the workspace.
var ErrNotProfile = errors.New("not a browser profile inside the workspace")

// Discover walks the workspace at root and returns the profiles in it,
// in path order. Symlinks are never followed, and a found profile is not
// searched further. Directories that cannot be listed are passed over:
// the capture reports them. The walk goes by directory descriptors and
// lists each directory once (see discover_walk.go).
func Discover(root string) ([]Profile, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	fail := func(err error) ([]Profile, error) {
		return nil, fmt.Errorf("searching %s for browser profiles: %w", abs, err)
	}
	// The root itself may be a symlink to the workspace (capture allows
	// that); nothing below it is followed.
	fd, err := openat(unix.AT_FDCWD, abs, unix.O_RDONLY|unix.O_DIRECTORY)
	if err != nil {
		if fi, serr := os.Stat(abs); serr == nil && !fi.IsDir() {
			return nil, nil // a file holds no profiles
		}
		return fail(err)
	}
	s := &searcher{abs: abs, buf: make([]byte, 32<<10), heldFrom: 1, onStack: map[dirID]bool{}}
	rootDir := &searchDir{fd: fd}
	defer closeDir(rootDir)
	var ok bool
	if rootDir.id, ok = statDir(fd); !ok {
		return fail(errors.New("cannot stat the directory"))
	}
	l, err := list(fd, s.buf)
	if err != nil {
		return fail(err)
	}
	s.stack = []*searchDir{rootDir}
	s.onStack[rootDir.id] = true
	s.search(rootDir, l.subdirs) // the workspace itself is never a profile
	return s.found, nil
}

// detectDir is detect for the directory at path (not a symlink).
func detectDir(path string) (Kind, bool) {
	fd, readable, err := openDir(unix.AT_FDCWD, path)
	if err != nil {
		return "", false
	}
	defer unix.Close(fd)
	var l listing
	if readable {
		l, _ = list(fd, make([]byte, 8<<10))
	}
	return detect(fd, &l)
}

// regular reports whether p is a regular file (not through a symlink).
func regular(p string) bool {
	fi, err := os.Lstat(p)
	return err == nil && fi.Mode().IsRegular()
}

// Resolve checks a profile directory given by the user: it must be a real
// directory inside the workspace root (no symlink on the way, none
// followed) and a profile root. A Chromium profile folder (Default, ...)
// is refused with a hint to give its user-data-dir, which holds Local
// State.
func Resolve(root, dir string) (Profile, error) {
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return Profile{}, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Profile{}, err
	}
	rel, err := filepath.Rel(absRoot, abs)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return Profile{}, fmt.Errorf("%w: %s is not below the workspace %s; profiles are restored at their path inside the workspace", ErrNotProfile, abs, absRoot)
	}
	p := absRoot
	for _, c := range strings.Split(rel, string(filepath.Separator)) {
		p = filepath.Join(p, c)
		fi, err := os.Lstat(p)
		if err != nil {
			return Profile{}, fmt.Errorf("%w: %s: %v", ErrNotProfile, abs, err)
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return Profile{}, fmt.Errorf("%w: %s: %s is a symlink, which is never followed; give the real directory inside the workspace", ErrNotProfile, abs, p)
		}
		if !fi.IsDir() {
			return Profile{}, fmt.Errorf("%w: %s is not a directory", ErrNotProfile, p)
		}
	}
	k, ok := detectDir(abs)
	if !ok {
		if regular(filepath.Join(abs, "Preferences")) && regular(filepath.Join(filepath.Dir(abs), "Local State")) {
			return Profile{}, fmt.Errorf("%w: %s is a Chromium profile folder; give its user-data-dir %s, which holds Local State", ErrNotProfile, abs, filepath.Dir(abs))
		}
		return Profile{}, fmt.Errorf("%w: %s has no Local State with a profile folder (Chromium), and no profiles.ini or prefs.js with cookies.sqlite or key4.db (Firefox)", ErrNotProfile, abs)
	}
	return Profile{Dir: abs, Rel: filepath.ToSlash(rel), Kind: k}, nil
}
