package restore

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"lifeboat/internal/nstest"
	"lifeboat/internal/repotest"
	"lifeboat/internal/storetest"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// restore (with or without --replace) into the repository itself
// (--target REPO/data, REPO/index, REPO/keys, REPO/snapshots) or over a
// directory holding it is refused, and the repository stays.

// rsRefused restores m into target and checks the restore is refused with
// ErrTargetOverlaps naming the target and what it overlaps, and that
// nothing under the watched directories changed.
func rsRefused(t *testing.T, r *snaptest.Repo, m *snapshot.Manifest, o Options, what, path string, watch ...string) {
	t.Helper()
	var before []string
	for _, w := range watch {
		before = append(before, snaptest.Dump(t, w, true))
	}
	_, err := Run(t.Context(), r.Repository, m, o)
	if !errors.Is(err, ErrTargetOverlaps) || !strings.Contains(err.Error(), o.Target) || !strings.Contains(err.Error(), what+" "+path) {
		t.Errorf("restore (replace %v) into %s: %v; want ErrTargetOverlaps naming %s and %s %s", o.Replace, o.Target, err, o.Target, what, path)
	}
	for i, w := range watch {
		if after := snaptest.Dump(t, w, true); after != before[i] {
			t.Errorf("restore into %s changed %s:\nbefore:\n%s\nafter:\n%s", o.Target, w, before[i], after)
		}
	}
}

// TestRestoreRefusesTargetInRepository: every target inside the
// repository, the repository itself, its index cache, and directories
// that contain them, by every spelling (a symlinked parent, "..", a
// trailing slash, a relative path), with and without --replace, is
// refused with ErrTargetOverlaps; the repository is unchanged and checks
// clean. A sibling whose name only starts like the repository's is not
// refused.
func TestRestoreRefusesTargetInRepository(t *testing.T) {
	r, m, want := rsMixedRepo(t, 3, 1000)
	repoDir, err := filepath.EvalSymlinks(r.Path)
	if err != nil {
		t.Fatal(err)
	}
	cache := filepath.Dir(r.Index().Path())
	alias := filepath.Join(t.TempDir(), "alias")
	if err := os.Symlink(repoDir, alias); err != nil {
		t.Fatal(err)
	}
	t.Chdir(repoDir)
	for _, target := range []string{
		repoDir, repoDir + "/", filepath.Join(repoDir, "data"), filepath.Join(repoDir, "index"), filepath.Join(repoDir, "keys"),
		filepath.Join(repoDir, "snapshots"), filepath.Join(repoDir, "new"), filepath.Join(repoDir, "data", "new", "deeper"),
		filepath.Join(alias, "data"), filepath.Join(alias, "new"), repoDir + "/data/../index", "keys", "./snapshots",
	} {
		for _, replace := range []bool{true, false} {
			rsRefused(t, r, m, Options{Target: target, Replace: replace}, "the repository", repoDir, repoDir)
		}
	}
	for _, target := range []string{cache, filepath.Join(cache, "x"), filepath.Dir(cache)} {
		rsRefused(t, r, m, Options{Target: target, Replace: true}, "the repository's index cache", cache, repoDir)
	}
	snaptest.Check(t, r.Repository)

	sibling := repoDir + "-restored"
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: sibling}); err != nil {
		t.Fatalf("restore beside the repository: %v", err)
	}
	rsCheckFiles(t, sibling, want)
}

// TestRestoreRefusesProtectedDirs: the directories a caller protects (the
// CLI's cache and state directories) are refused like the repository,
// inside and around, and through a symlink.
func TestRestoreRefusesProtectedDirs(t *testing.T) {
	t.Parallel()
	r, m, _ := rsMixedRepo(t, 3, 1000)
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(base, "home", "state")
	if err := os.MkdirAll(filepath.Join(state, "locks"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(state, "state.db"), []byte("records"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(base, "home"), filepath.Join(base, "h")); err != nil {
		t.Fatal(err)
	}
	protect := []ProtectedDir{{Path: state, What: "the state directory"}, {Path: filepath.Join(base, "not-yet"), What: "the cache directory"}}
	for _, target := range []string{state, filepath.Join(state, "locks"), filepath.Join(state, "new"), filepath.Join(base, "h", "state", "locks"),
		filepath.Join(base, "home"), filepath.Join(base, "h")} {
		rsRefused(t, r, m, Options{Target: target, Replace: true, Protect: protect}, "the state directory", state, state)
	}
	// A protected directory that does not exist holds nothing to destroy.
	if _, err := Run(t.Context(), r.Repository, m, Options{Target: filepath.Join(base, "elsewhere"), Protect: protect}); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreRefusesRepositoryThroughBindMount: the repository seen at
// another path through a bind mount (no symlink to resolve: only the
// directory's identity tells) is refused too.
func TestRestoreRefusesRepositoryThroughBindMount(t *testing.T) {
	t.Parallel()
	if !nstest.InOwnMountNamespace(t) {
		return
	}
	r, m, _ := rsMixedRepo(t, 3, 1000)
	view := filepath.Join(t.TempDir(), "view")
	if err := os.Mkdir(view, 0o700); err != nil {
		t.Fatal(err)
	}
	rsBind(t, filepath.Dir(r.Path), view)
	through := filepath.Join(view, filepath.Base(r.Path))
	for _, target := range []string{filepath.Join(through, "data"), filepath.Join(through, "new")} {
		rsRefused(t, r, m, Options{Target: target, Replace: true}, "the repository", r.Path, r.Path)
	}
	if err := unix.Unmount(view, 0); err != nil {
		t.Fatal(err)
	}
	snaptest.Check(t, r.Repository)
}

// restore --replace of a directory that holds the repository is refused
// with ErrTargetHoldsRepository, and the repository stays.
func TestReplaceRefusesRepositoryParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	home := t.TempDir()
	repoDir := filepath.Join(home, "backups")
	r := repotest.New(t, repotest.Options{Store: storetest.Store{Kind: "local", Location: repoDir}, Init: repo.InitOptions{PackSize: repo.DefaultPackSize}})
	rr := &snaptest.Repo{Repository: r, Path: repoDir}
	m := rr.Manifest(t, rr.Dir(t, "root", rr.File(t, "f", []byte("hello"))), true)
	if _, err := Run(ctx, r, m, Options{Target: home, Replace: true}); !errors.Is(err, ErrTargetHoldsRepository) {
		t.Fatalf("restore --replace over the repository's parent: %v, want ErrTargetHoldsRepository", err)
	}
	if _, err := os.Stat(repoDir); err != nil {
		t.Errorf("repository gone after restore --replace of its parent: %v", err)
	}
}
