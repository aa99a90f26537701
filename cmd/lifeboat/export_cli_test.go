package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/local"
	"lifeboat/blob"
	"lifeboat/pack"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// sensitivePacks counts the packs of the sensitive tier in a repository
// (the tier byte of the plaintext trailer).
func sensitivePacks(t *testing.T, dir string) int {
	t.Helper()
	ctx := context.Background()
	be, err := local.Open(dir)
	must(t, err)
	defer be.Close()
	n := 0
	must(t, be.List(ctx, backend.Pack, func(fi backend.FileInfo) error {
		b, err := be.Load(ctx, backend.Handle{Type: backend.Pack, Name: fi.Name}, fi.Size-pack.TrailerSize, pack.TrailerSize)
		if err != nil {
			return err
		}
		tr, err := pack.DecodeTrailer(b, fi.Size)
		if err == nil && tr.Tier == blob.Sensitive {
			n++
		}
		return err
	}))
	return n
}

func loadManifest(t *testing.T, dir, pw, id string) *snapshot.Manifest {
	t.Helper()
	ctx := context.Background()
	be, err := local.Open(dir)
	must(t, err)
	r, err := repo.Open(ctx, be, []byte(pw), repo.Options{CacheDir: t.TempDir(), NoIndexDB: true})
	must(t, err)
	defer r.Close(ctx)
	m, err := snapshot.Find(ctx, r, id, "")
	must(t, err)
	return m
}

func TestExport(t *testing.T) {
	e := newProfileEnv(t)
	ctx := context.Background()
	snap := last(jsonLines(t, e.lbOK(e.fullPW, "capture", "--workspace", "w", "--json", e.src).stdout))["snapshot"].(string)
	dst := filepath.Join(e.dir, "dst")
	dstPW := filepath.Join(e.dir, "pw-dst")
	must(t, os.WriteFile(dstPW, []byte("target repository password"), 0o600))
	e.lbOK(dstPW, "--repo", dst, "init", "--kdf-memory-kib", "64", "--kdf-time", "1")

	// Into the source repository itself: refused with exit 2, nothing written.
	srcBefore := e.lbOK(e.fullPW, "snapshots").stdout
	for _, to := range []string{e.repo, e.repo + "/"} {
		res := e.lb(e.fullPW, "export", "--to", to, "--to-password-file", e.fullPW, snap)
		if res.code != exitUsage || !strings.Contains(res.stderr, "is the source repository or a copy of it") || !strings.Contains(res.stderr, to) {
			t.Fatalf("export into the source repository (%s): exit %d: %s", to, res.code, res.stderr)
		}
	}
	if after := e.lbOK(e.fullPW, "snapshots").stdout; after != srcBefore {
		t.Fatalf("a refused export into the source wrote a snapshot:\n%s\nthen\n%s", srcBefore, after)
	}

	// Without --include-sensitive: the workspace only, no sensitive object.
	msg := last(jsonLines(t, e.lbOK(e.fullPW, "export", "--json", "--to", dst, "--to-password-file", dstPW, snap).stdout))
	if msg["message_type"] != "exported" || msg["sensitive"] != "left_out" {
		t.Fatalf("export: %v", msg)
	}
	if n := sensitivePacks(t, dst); n != 0 {
		t.Fatalf("export without --include-sensitive wrote %d sensitive packs", n)
	}
	copyID := msg["target"].(string)
	out := filepath.Join(e.dir, "from-dst")
	r := last(jsonLines(t, e.lbOK(dstPW, "--repo", dst, "restore", "--json", "--profiles", "--target", out, copyID).stdout))
	if r["sensitive"] != "none" {
		t.Fatalf("restore of the export: %v", r)
	}
	assertSameTree(t, filepath.Join(e.src, "project"), filepath.Join(out, "project"))
	assertNoProfile(t, out)
	plain, locked := readableObjects(t, dst, e.cache+"-dst-scan", "target repository password")
	if locked != 0 {
		t.Fatalf("%d objects of the target are locked to its own full key", locked)
	}
	for where, b := range plain {
		for _, s := range e.fx.Secrets() {
			if bytes.Contains(b, s) {
				t.Fatalf("a fixture secret was exported in %s", where)
			}
		}
	}
	// Ids are keyed per repository: the copy shares no tree id with the source.
	a, b := loadManifest(t, e.repo, testPW, snap), loadManifest(t, dst, "target repository password", copyID)
	if a.Root.Subtree[0] == b.Root.Subtree[0] || b.Parent != nil || a.Totals != b.Totals {
		t.Fatalf("export did not re-id the trees, or changed totals: %v %v", a.Root.Subtree, b.Root.Subtree)
	}

	// --include-sensitive with a workspace-only key: refused, nothing written.
	before := e.lbOK(dstPW, "--repo", dst, "snapshots").stdout
	if res := e.lb(e.wsPW, "export", "--include-sensitive", "--to", dst, "--to-password-file", dstPW, snap); res.code != exitTierLocked {
		t.Fatalf("--include-sensitive with a workspace-only key: exit %d %s", res.code, res.stderr)
	}
	if after := e.lbOK(dstPW, "--repo", dst, "snapshots").stdout; after != before {
		t.Fatal("a refused export wrote a snapshot")
	}

	// --include-sensitive with the full key: the profile comes back from the copy.
	msg = last(jsonLines(t, e.lbOK(e.fullPW, "export", "--json", "--include-sensitive", "--to", dst, "--to-password-file", dstPW, snap).stdout))
	if msg["sensitive"] != "copied" || sensitivePacks(t, dst) == 0 {
		t.Fatalf("export --include-sensitive: %v", msg)
	}
	out2 := filepath.Join(e.dir, "from-dst-2")
	e.lbOK(dstPW, "--repo", dst, "restore", "--profiles", "--target", out2, msg["target"].(string))
	if err := e.fx.Check(ctx, filepath.Join(out2, filepath.FromSlash(chromeRel)), true); err != nil {
		t.Fatal(err)
	}
	assertSameTree(t, filepath.Join(e.src, "project"), filepath.Join(out2, "project"))
}
