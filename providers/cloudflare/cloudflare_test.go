package cloudflare

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"lifeboat/providers"
	"lifeboat/providers/platformtest"
	"lifeboat/providers/providertest"
)

// The contract server is providers/platformtest's Cloudflare handler: the
// bridge routes docs/providers.md defines after the Cloudflare Sandbox SDK
// (developers.cloudflare.com/sandbox: getSandbox, exec, writeFile,
// readFile, destroy, createBackup, restoreBackup; errors per its 1.0
// errors page: CONTAINER_UNAVAILABLE with retryAfterMs).

func start(t *testing.T) (*platformtest.Sandboxes, string, string) {
	return platformtest.Start(t, "bridge-token", (*platformtest.Sandboxes).Cloudflare)
}

func newProvider(t *testing.T, base, cache, token string) *Provider {
	return providertest.MustNew(t, New, Config{Token: token, BaseURL: base, CacheDir: cache})
}

func TestConformance(t *testing.T) {
	s, base, cache := start(t)
	providertest.Run(t, s.Harness(base, "ws-absent", "/.lifeboat-workspace/staging", func(t *testing.T, base string) providers.Provider {
		return newProvider(t, base, cache, "bridge-token")
	}))
}

// TestStatusMapping: the bridge's 404 is the only Missing; 502, 503
// CONTAINER_UNAVAILABLE, 401, 403 and 429 (with its Retry-After) are
// typed errors and never Missing.
func TestStatusMapping(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "bridge-token")
	ctx := context.Background()
	id := providertest.MustCreate(t, p, "k")
	cases := append(platformtest.CommonStatuses(`{"error":{"code":"UNAUTHORIZED","message":"bad bridge token"}}`, `{"error":{"code":"RATE_LIMITED"}}`),
		platformtest.StatusCase{Status: 503, Body: `{"error":{"code":"CONTAINER_UNAVAILABLE","message":"container_starting","retryAfterMs":2000}}`,
			RetryAfter: "2", Want: providers.KindUnavailable})
	platformtest.CheckStatuses(t, s, p, id, cases, map[string]func() error{
		"Checkpoint": func() error { _, err := p.Checkpoint(ctx, id); return err },
	}, newProvider(t, base, cache, "wrong-secret"))
}

// TestLostDiskRolledBack: a container that restarted without its disk is
// Missing to Inspect and a conflict to the data plane; rolling back to a
// backup restores the workspace into the same sandbox.
func TestLostDiskRolledBack(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "bridge-token")
	ctx := context.Background()
	id, src := platformtest.NewWithTree(t, p, "k", "backed-up")
	cp, err := p.Checkpoint(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Wipe(string(id)); err != nil {
		t.Fatal(err)
	}
	s.Update(string(id), func(b *platformtest.Box) { b.State = "lost" })
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Missing {
		t.Fatalf("Inspect of a lost sandbox: %+v, %v", st, err)
	}
	_, err = p.ReadFiles(ctx, id)
	providertest.WantKind(t, "ReadFiles of a lost sandbox", err, providers.KindConflict)
	to, err := p.Rollback(ctx, id, cp)
	if err != nil || to != id {
		t.Fatalf("Rollback = %s, %v", to, err)
	}
	platformtest.WantTree(t, p, id, src, "after the rollback")
}

// TestReadFilesIsIncremental: a second ReadFiles transfers only what
// changed: an unchanged file keeps its inode in the mirror (so capture's
// file cache skips it), a changed one is made anew, a removed one goes, a
// new one comes, and the mirror equals the workspace.
func TestReadFilesIsIncremental(t *testing.T) {
	s, base, cache := start(t)
	p := newProvider(t, base, cache, "bridge-token")
	ctx := context.Background()
	id := providertest.MustCreate(t, p, "k")
	work, err := s.HostPath(string(id), DefaultWorkspace)
	if err != nil {
		t.Fatal(err)
	}
	providertest.Tree(t, work, "inc")
	old := time.Now().Add(-time.Hour)
	for _, f := range []string{"README", "src/main.go", "ro.txt", "src/deep/a/b/c.txt"} {
		if err := os.Chtimes(filepath.Join(work, f), old, old); err != nil {
			t.Fatal(err)
		}
	}
	// inode and ctime: a file made anew has a new ctime (its inode
	// number may be reused).
	inode := func(dir, rel string) [2]int64 {
		fi, err := os.Lstat(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return [2]int64{int64(st.Ino), st.Ctim.Nano()}
	}
	f, err := p.ReadFiles(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	mirror := f.Dir()
	keep, change := inode(mirror, "README"), inode(mirror, "src/main.go")
	f.Close()

	if err := os.WriteFile(filepath.Join(work, "src/main.go"), []byte("package main // changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(work, "src/main.go"), old, old); err != nil { // same mtime: the size tells
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(work, "ro.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(work, "new.txt"), []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err = p.ReadFiles(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if got, want := providertest.Listing(t, f.Dir()), providertest.Listing(t, work); got != want {
		t.Fatalf("mirror after the second ReadFiles:\n%s\nwant:\n%s", got, want)
	}
	if inode(f.Dir(), "README") != keep {
		t.Fatal("an unchanged file was transferred again (new inode or ctime)")
	}
	if inode(f.Dir(), "src/main.go") == change {
		t.Fatal("a changed file was not made anew in the mirror")
	}
}

// TestRollbackOfDestroyed: rolling a destroyed sandbox back to a backup
// makes it again under its name with the backup's files; a rollback to a
// backup that is gone leaves no empty sandbox behind.
func TestRollbackOfDestroyed(t *testing.T) {
	_, base, cache := start(t)
	p := newProvider(t, base, cache, "bridge-token")
	ctx := context.Background()
	id, src := platformtest.NewWithTree(t, p, "k", "rolled")
	cp, err := p.Checkpoint(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Rollback(ctx, id, "bak-gone"); err == nil {
		t.Fatal("rollback to a backup that does not exist succeeded")
	}
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Missing {
		t.Fatalf("a failed rollback left the sandbox: %+v, %v", st, err)
	}
	to, err := p.Rollback(ctx, id, cp)
	if err != nil || to != id {
		t.Fatalf("Rollback = %s, %v", to, err)
	}
	platformtest.WantTree(t, p, id, src, "after the rollback")
}

// TestLive runs the conformance suite against a deployed bridge Worker
// when LIFEBOAT_LIVE_CLOUDFLARE_BRIDGE_URL and
// LIFEBOAT_LIVE_CLOUDFLARE_BRIDGE_TOKEN are set. Never run for this
// repository so far: no bridge Worker is deployed.
func TestLive(t *testing.T) {
	env := platformtest.LiveEnv(t, "LIFEBOAT_LIVE_CLOUDFLARE_BRIDGE_URL", "LIFEBOAT_LIVE_CLOUDFLARE_BRIDGE_TOKEN")
	cache := t.TempDir()
	providertest.Run(t, platformtest.LiveHarness(func(t *testing.T) providers.Provider {
		return providertest.MustNew(t, New, Config{Token: env["LIFEBOAT_LIVE_CLOUDFLARE_BRIDGE_TOKEN"], BaseURL: env["LIFEBOAT_LIVE_CLOUDFLARE_BRIDGE_URL"], CacheDir: cache})
	}, "ws-lifeboatabsent"))
}
