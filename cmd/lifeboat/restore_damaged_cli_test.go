package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/backend/local"
	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// Restore of damaged and forged snapshots through the CLI: `latest` never silently falls back, a damaged snapshot
// named by id is reported as damaged, and a forged snapshot whose trees
// expand past what restore plans is refused; all with exit code 13 and
// nothing written.

// flipSnapshot flips one byte in the middle of the stored snapshot id.
func (e *env) flipSnapshot(id string) {
	e.t.Helper()
	p := filepath.Join(e.repo, "snapshots", id)
	b, err := os.ReadFile(p)
	if err != nil {
		e.t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.Chmod(p, 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		e.t.Fatal(err)
	}
}

// damagedNewest captures workspace w twice, a file a holding "one" and
// then a file named second holding "two", and flips a byte of the newer
// snapshot's stored object. It returns both ids.
func (e *env) damagedNewest(second string) (older, newest string) {
	e.t.Helper()
	src := filepath.Join(e.dir, "src")
	must(e.t, os.MkdirAll(src, 0o755))
	must(e.t, os.WriteFile(filepath.Join(src, "a"), []byte("one"), 0o644))
	older = e.capture("w", src)["snapshot"].(string)
	must(e.t, os.WriteFile(filepath.Join(src, second), []byte("two"), 0o644))
	newest = e.capture("w", src)["snapshot"].(string)
	e.flipSnapshot(newest)
	return older, newest
}

func TestRestoreLatestDamagedCLI(t *testing.T) {
	e := newEnv(t)
	e.init()
	older, newest := e.damagedNewest("a")

	// latest: refused, naming the damaged snapshot; nothing restored.
	target := filepath.Join(e.dir, "t")
	res := e.run("restore", "--workspace", "w", "--target", target, "latest")
	if res.code != exitCorrupt || !strings.Contains(res.stderr, newest[:8]) || !strings.Contains(res.stderr, "--skip-damaged") ||
		!strings.Contains(res.stderr, older[:8]) {
		t.Fatalf("restore latest with the newest damaged: exit %d\n%s", res.code, res.stderr)
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused restore created the target: %v", err)
	}

	// --skip-damaged: the previous snapshot, saying which it skipped and why.
	res = e.run("restore", "--workspace", "w", "--target", target, "--skip-damaged", "latest")
	if res.code != 0 || !strings.Contains(res.stderr, "skipped snapshot "+newest[:8]) || !strings.Contains(res.stderr, "cannot be read") ||
		!strings.Contains(res.stdout, "restored snapshot "+older[:8]) {
		t.Fatalf("restore --skip-damaged latest: exit %d\nstdout: %s\nstderr: %s", res.code, res.stdout, res.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(target, "a")); err != nil || string(b) != "one" {
		t.Fatalf("restored %q, %v; want the older snapshot's content", b, err)
	}
	res = e.run("restore", "--json", "--workspace", "w", "--target", filepath.Join(e.dir, "t2"), "--skip-damaged", "latest")
	msg := last(jsonLines(t, res.stdout))
	sk, _ := msg["skipped_snapshots"].([]any)
	if res.code != 0 || msg["snapshot"] != older || len(sk) != 1 || sk[0].(map[string]any)["id"] != newest ||
		!strings.Contains(sk[0].(map[string]any)["error"].(string), newest[:8]) {
		t.Fatalf("restore --json --skip-damaged latest: exit %d, %v\n%s", res.code, msg, res.stderr)
	}

	// By id (a prefix or the whole): the damage, not "no matching snapshot".
	for _, ref := range []string{newest[:8], newest} {
		res = e.run("restore", "--target", filepath.Join(e.dir, "t3"), ref)
		if res.code != exitCorrupt || !strings.Contains(res.stderr, newest[:8]) || !strings.Contains(res.stderr, "cannot be read") ||
			strings.Contains(res.stderr, "no matching snapshot") {
			t.Errorf("restore %s (damaged): exit %d\n%s", ref, res.code, res.stderr)
		}
	}
	// The intact one by id still restores.
	e.ok("restore", "--target", filepath.Join(e.dir, "t4"), older[:8])
}

// forgeDAG writes, through the repository API, a snapshot of workspace
// ws whose trees share subtrees: fanout directories naming one tree of
// fanout directories naming one tree of fanout empty files (fanout^2
// files), under a manifest that declares totals. It returns its id.
func (e *env) forgeDAG(ws string, fanout int, totals snapshot.Totals) string {
	e.t.Helper()
	ctx := context.Background()
	be, err := local.Open(e.repo)
	if err != nil {
		e.t.Fatal(err)
	}
	r, err := repo.Open(ctx, be, []byte(testPW), repo.Options{CacheDir: e.t.TempDir()})
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = r.Close(ctx) }()
	nodes := make([]snapshot.Node, fanout)
	for i := range nodes {
		nodes[i] = snapshot.Node{Name: fmt.Appendf(nil, "f%05d", i), Type: snapshot.TypeFile, Mode: 0o644}
	}
	ids, err := snapshot.SaveDir(ctx, r, blob.Workspace, nodes)
	if err != nil {
		e.t.Fatal(err)
	}
	for range 2 {
		for i := range nodes {
			nodes[i] = snapshot.Node{Name: fmt.Appendf(nil, "d%05d", i), Type: snapshot.TypeDir, Mode: 0o755, Subtree: ids}
		}
		if ids, err = snapshot.SaveDir(ctx, r, blob.Workspace, nodes); err != nil {
			e.t.Fatal(err)
		}
	}
	if err := r.Flush(ctx); err != nil {
		e.t.Fatal(err)
	}
	m := &snapshot.Manifest{Workspace: ws, Paths: []string{"/forged"}, Root: snapshot.Node{Type: snapshot.TypeDir, Mode: 0o755, Subtree: ids},
		Totals: totals, Complete: true}
	id, err := snapshot.SaveManifest(ctx, r, m)
	if err != nil {
		e.t.Fatal(err)
	}
	return id.String()
}

func TestRestoreForgedDAGCLI(t *testing.T) {
	e := newEnv(t)
	e.init()
	// The campaign's bomb: 2048^2 files from three tree blobs, 2^62
	// entries declared. Refused before anything is expanded.
	bomb := e.forgeDAG("w", 2048, snapshot.Totals{Files: 1 << 62, Dirs: 2048 + 2048*2048 + 1})
	target := filepath.Join(e.dir, "t")
	res := e.run("restore", "--target", target, bomb[:8])
	if res.code != exitCorrupt || !strings.Contains(res.stderr, "snapshot "+bomb[:8]) || !strings.Contains(res.stderr, "more than restore's limit") {
		t.Fatalf("restore of the DAG bomb: exit %d\n%s", res.code, res.stderr)
	}
	// Totals under the limit that the trees exceed: refused one entry past
	// them; --max-entries bounds a manifest without giving it away.
	liar := e.forgeDAG("w", 100, snapshot.Totals{Files: 1000, Dirs: 101})
	res = e.run("restore", "--target", target, liar[:8])
	if res.code != exitCorrupt || !strings.Contains(res.stderr, "more than the 1101 entries its manifest declares") {
		t.Fatalf("restore of a DAG that lists more than it declares: exit %d\n%s", res.code, res.stderr)
	}
	res = e.run("restore", "--target", target, "--max-entries", "500", "--include", "d00001", liar[:8])
	if res.code != exitCorrupt || !strings.Contains(res.stderr, "more than 500 entries") || !strings.Contains(res.stderr, "--max-entries") {
		t.Fatalf("restore of a part past --max-entries: exit %d\n%s", res.code, res.stderr)
	}
	ents, err := os.ReadDir(e.dir)
	must(t, err)
	for _, d := range ents {
		if strings.HasPrefix(d.Name(), ".lifeboat-") {
			t.Errorf("a refused restore left %s beside the target", d.Name())
		}
	}
	if _, err := os.Lstat(target); !os.IsNotExist(err) {
		t.Fatalf("a refused restore created the target: %v", err)
	}
	// A genuine snapshot within the limits restores; with --max-entries
	// below its size it is refused at once, and the message says how to
	// raise the limit.
	src := filepath.Join(e.dir, "src")
	must(t, os.MkdirAll(filepath.Join(src, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "sub", "a"), []byte("a"), 0o644))
	e.capture("g", src)
	res = e.run("restore", "--workspace", "g", "--target", target, "--max-entries", "2", "latest")
	if res.code != exitCorrupt || !strings.Contains(res.stderr, "declares 3 entries") || !strings.Contains(res.stderr, "--max-entries") {
		t.Fatalf("restore past --max-entries: exit %d\n%s", res.code, res.stderr)
	}
	e.ok("restore", "--workspace", "g", "--target", target, "--max-entries", "3", "latest")
	if b, err := os.ReadFile(filepath.Join(target, "sub", "a")); err != nil || string(b) != "a" {
		t.Fatalf("restored %q, %v", b, err)
	}
}
