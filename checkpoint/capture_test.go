package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/profile"
	"lifeboat/profile/fixture"
	"lifeboat/profile/fixture/localstorage"
)

// workspaceWithProfile writes a workspace holding a Chromium profile
// (the deterministic fixture) at browser/chrome, and returns its root.
func workspaceWithProfile(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"notes.txt": "work", "src/main.go": "package main"})
	if err := os.Mkdir(filepath.Join(root, "browser"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := localstorage.New(1).Write(t.Context(), filepath.Join(root, "browser", "chrome"), fixture.Options{}); err != nil {
		t.Fatal(err)
	}
	return root
}

// A profile named by the caller is captured into the sensitive tier even
// with discovery off; without discovery and without naming it, it is
// workspace files.
func TestCaptureNamedProfile(t *testing.T) {
	r := newTestRepo(t).Repository
	ctx := t.Context()
	root := workspaceWithProfile(t)
	ps, err := ResolveProfiles(root, []string{filepath.Join(root, "browser", "chrome")})
	if err != nil || len(ps) != 1 || ps[0].Rel != "browser/chrome" {
		t.Fatalf("ResolveProfiles: %+v, %v", ps, err)
	}
	res, err := Capture(ctx, r, root, Options{Workspace: "w", Profiles: ps, NoDiscovery: true})
	if err != nil {
		t.Fatal(err)
	}
	if m := res.Manifest; m == nil || !m.Complete || m.Sensitive == nil {
		t.Fatalf("manifest %+v: want a complete snapshot with a sensitive part", m)
	}
	if len(res.Profiles) != 1 || res.Profiles[0].Rel != "browser/chrome" || res.Profiles[0].Kind != profile.Chromium {
		t.Fatalf("captured profiles %+v", res.Profiles)
	}
	if res.Verified {
		t.Fatal("verified without being asked")
	}
	res, err = Capture(ctx, r, root, Options{Workspace: "w", NoDiscovery: true})
	if err != nil || res.Manifest.Sensitive != nil || len(res.Profiles) != 0 || res.Parent == nil {
		t.Fatalf("without the profile named: %+v, %v", res, err)
	}
	if _, err := ResolveProfiles(root, []string{filepath.Join(root, "src")}); !errors.Is(err, profile.ErrNotProfile) {
		t.Fatalf("a directory that is no profile: %v", err)
	}
}

// A key without the sensitive tier is refused before anything is
// written, for a named profile as for a discovered one.
func TestCaptureProfileNeedsSensitiveTier(t *testing.T) {
	tr := newTestRepo(t)
	r := tr.keyRepo(t, blob.Workspace)
	root := workspaceWithProfile(t)
	ps, err := ResolveProfiles(root, []string{filepath.Join(root, "browser", "chrome")})
	if err != nil {
		t.Fatal(err)
	}
	for name, o := range map[string]Options{
		"named":      {Workspace: "w", Profiles: ps, NoDiscovery: true},
		"discovered": {Workspace: "w"},
	} {
		_, err := Capture(t.Context(), r, root, o)
		if !errors.Is(err, ErrProfileTier) || !errors.Is(err, crypt.ErrTierLocked) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if n := countSnapshots(t, tr.Repository, "w"); n != 0 {
		t.Fatalf("%d snapshots written", n)
	}
}

// With Verify, a snapshot is checked after it is written; a check that
// fails is the capture's error, with the manifest still reported.
func TestCaptureVerify(t *testing.T) {
	tr := newTestRepo(t)
	ctx := t.Context()
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"a.txt": "alpha", "d/b.txt": "beta"})
	res, err := Capture(ctx, tr.Repository, root, Options{Workspace: "w", Verify: true})
	if err != nil || !res.Verified {
		t.Fatalf("verified %v, %v", res.Verified, err)
	}
	writeFiles(t, root, map[string]string{"a.txt": "alpha two"})
	// The parent is read first (Find), then the new manifest by Verify.
	f := tr.fault.Add(fault.OnLoad).Match(backend.Snapshot).Nth(2).Fail(nil)
	res, err = Capture(ctx, tr.Repository, root, Options{Workspace: "w", Verify: true})
	if !errors.Is(err, fault.ErrInjected) || res.Verified || res.Manifest == nil || f.Fired() != 1 {
		t.Fatalf("verify failed: verified %v, manifest %v, %v", res.Verified, res.Manifest != nil, err)
	}
}

// A named parent is loaded alone and recorded, without listing the
// snapshots; one that no longer loads falls back to the workspace's
// newest snapshot.
func TestCaptureNamedParent(t *testing.T) {
	tr := newTestRepo(t)
	ctx := t.Context()
	root := t.TempDir()
	capture := func(content string, parent blob.ID) Result {
		t.Helper()
		writeFiles(t, root, map[string]string{"a.txt": content})
		res, err := Capture(ctx, tr.Repository, root, Options{Workspace: "w", Parent: parent})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	first := capture("one", blob.ID{})
	second := capture("two", blob.ID{})
	third := capture("three", blob.ID{9}) // names a snapshot that does not exist
	if *third.Manifest.Parent != second.Manifest.ID {
		t.Fatalf("parent after a named one that does not load: %s, want the newest %s", third.Manifest.Parent.Short(), second.Manifest.ID.Short())
	}
	lists := tr.fault.Add(fault.OnList).Match(backend.Snapshot).Times(1).Fail(nil) // a listing fails the capture
	fourth := capture("four", first.Manifest.ID)
	if fourth.Parent == nil || fourth.Parent.ID != first.Manifest.ID || *fourth.Manifest.Parent != first.Manifest.ID {
		t.Fatalf("parent %v, want the named %s", fourth.Manifest.Parent, first.Manifest.ID.Short())
	}
	if lists.Fired() != 0 {
		t.Fatal("a capture with a named parent listed the snapshots")
	}
	// No parent and no search: none recorded, nothing listed.
	writeFiles(t, root, map[string]string{"a.txt": "five"})
	fifth, err := Capture(ctx, tr.Repository, root, Options{Workspace: "w", NoParentSearch: true})
	if err != nil || fifth.Parent != nil || fifth.Manifest.Parent != nil || lists.Fired() != 0 {
		t.Fatalf("capture without a parent search: parent %v, listings %d, %v", fifth.Manifest.Parent, lists.Fired(), err)
	}
}
