package docker

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"lifeboat/providers/docker/dockertest"
	"lifeboat/providers/providertest"
	"lifeboat/providers/tartree"
)

// TestMirrorKeepsUnchangedFiles: a second ReadFiles leaves the files
// that did not change as they were (same inode), so capture's file cache
// skips them; it follows changes of content, type, links and targets,
// removals and additions, so the mirror always equals a fresh copy; and a
// file changed again within the second it was read (same size, same
// whole-second mtime) is still seen (racy files are copied again).
func TestMirrorKeepsUnchangedFiles(t *testing.T) {
	d := dockertest.Start(t)
	p, id := newContainerOn(t, d, "mirror")
	cli := d.Client(t)
	ctx := context.Background()
	src := t.TempDir()
	providertest.Tree(t, src, "m")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(src, "keep.bin"), make([]byte, 1<<20), 0o644))
	must(os.Link(filepath.Join(src, "keep.bin"), filepath.Join(src, "keep-link.bin")))
	old := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	must(filepath.Walk(src, func(path string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode()&os.ModeSymlink == 0 {
			err = os.Chtimes(path, old, old)
		}
		return err
	}))
	providertest.PutTree(t, p, id, src)

	check := func(what string) string {
		t.Helper()
		f, err := p.ReadFiles(ctx, id)
		must(err)
		defer f.Close()
		fresh := filepath.Join(t.TempDir(), "fresh")
		must(os.Mkdir(fresh, 0o700))
		res, err := cli.CopyFromContainer(ctx, string(id), client.CopyFromContainerOptions{SourcePath: "/workspace/."})
		must(err)
		root, err := os.OpenRoot(fresh)
		must(err)
		must(tartree.Extract(ctx, res.Content, root, tartree.ExtractOptions{Where: fresh, Owners: true}))
		res.Content.Close()
		root.Close()
		if got, want := providertest.Listing(t, f.Dir()), providertest.Listing(t, fresh); got != want {
			t.Fatalf("%s: the mirror differs from a fresh copy:\n%s\nwant:\n%s", what, got, want)
		}
		return f.Dir()
	}
	ino := func(path string) uint64 {
		t.Helper()
		var st syscall.Stat_t
		must(syscall.Lstat(path, &st))
		return st.Ino
	}
	dir := check("first read")
	readme, deep := ino(filepath.Join(dir, "README")), ino(filepath.Join(dir, "src/deep/a/b/c.txt"))
	run := func(script string) {
		t.Helper()
		res, err := p.Exec(ctx, id, []string{"sh", "-c", script}, nil)
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %v %d %s", script, err, res.ExitCode, res.Stderr)
		}
	}
	run(`echo changed > src/main.go && rm -r empty && mkdir -p new/dir && echo new > new/dir/f && rm src/link && ln -s README src/link &&
		rm keep-link.bin && cp keep.bin keep-link.bin && rm bin/run.sh && mkdir bin/run.sh && mkfifo pipe && chmod 600 ro.txt`)
	dir = check("after changes in the container")
	if ino(filepath.Join(dir, "README")) != readme || ino(filepath.Join(dir, "src/deep/a/b/c.txt")) != deep {
		t.Fatal("unchanged files were copied again (their inodes changed)")
	}
	if ino(filepath.Join(dir, "keep.bin")) == ino(filepath.Join(dir, "keep-link.bin")) {
		t.Fatal("names no longer linked in the container are still one file in the mirror")
	}
	// Racy: written, read, rewritten with the same size within the same
	// second (the mtime put back, as a change within that second looks):
	// the second read must still see the new content.
	for i := range 3 {
		run("printf one > racy.txt && touch -r racy.txt .ref")
		check("racy, first")
		run("printf two > racy.txt && touch -r .ref racy.txt")
		dir = check("racy, second")
		if b, err := os.ReadFile(filepath.Join(dir, "racy.txt")); err != nil || string(b) != "two" {
			t.Fatalf("round %d: racy.txt in the mirror is %q (%v), want two", i, b, err)
		}
	}
	// A mirror without its sync record (a read that failed or was killed
	// left it) is not trusted: README changed keeping its size and its
	// old whole-second mtime, which an incremental sync would not see,
	// and the next read still has the new content.
	record := filepath.Join(p.cfg.CacheDir, syncStateName(string(id)))
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("no sync record after a read: %v", err)
	}
	run(`tr a-z A-Z < README > .up && cat .up > README && rm .up && touch -r keep.bin README &&
		printf one > racy.txt && touch -r racy.txt .ref`)
	must(os.Remove(record))
	dir = check("without a sync record")
	if b, err := os.ReadFile(filepath.Join(dir, "README")); err != nil || string(b) != "HELLO M\n" {
		t.Fatalf("README in the mirror is %q (%v), want the container's HELLO M", b, err)
	}
	// The rebuild records its racy files too: racy.txt, rewritten within
	// its second just before it, is copied again by the next read.
	run("printf two > racy.txt && touch -r .ref racy.txt")
	dir = check("racy after a rebuild")
	if b, err := os.ReadFile(filepath.Join(dir, "racy.txt")); err != nil || string(b) != "two" {
		t.Fatalf("after a rebuild: racy.txt in the mirror is %q (%v), want two", b, err)
	}
}
