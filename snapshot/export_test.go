package snapshot_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
)

// exportCorpus saves six directories of 25 small files each, the same
// subdirectory in each (a repeated directory), an empty file and a file
// of several chunks, and returns the root and every file's content by
// path.
func exportCorpus(t *testing.T, r *snaptest.Repo) (snapshot.Node, map[string][]byte) {
	t.Helper()
	const seed = 71
	t.Logf("export corpus: seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	files := map[string][]byte{}
	shared := random(3000)
	var dirs []snapshot.Node
	for d := range 6 {
		name := fmt.Sprintf("d%d", d)
		nodes := []snapshot.Node{r.Dir(t, "same", r.File(t, "shared", shared))}
		files[name+"/same/shared"] = shared
		for f := range 25 {
			data := random(200 + rng.IntN(4000))
			fn := fmt.Sprintf("f%02d", f)
			nodes = append(nodes, r.File(t, fn, data))
			files[name+"/"+fn] = data
		}
		dirs = append(dirs, r.Dir(t, name, nodes...))
	}
	big := random(3 << 20)
	dirs = append(dirs, r.File(t, "big", big), r.File(t, "empty", nil))
	files["big"], files["empty"] = big, []byte{}
	return r.Dir(t, "root", dirs...), files
}

// readFiles reads every file below subtree (tier t) back from r into
// files, by path below prefix.
func readFiles(t *testing.T, r *repo.Repository, tier blob.Tier, subtree []blob.ID, prefix string, files map[string][]byte) {
	t.Helper()
	ctx := context.Background()
	err := snapshot.LoadDir(ctx, r, tier, subtree, func(n *snapshot.Node) error {
		p := path.Join(prefix, string(n.Name))
		switch n.Type {
		case snapshot.TypeDir:
			readFiles(t, r, tier, n.Subtree, p, files)
		case snapshot.TypeFile:
			var b bytes.Buffer
			if err := r.LoadBlobs(ctx, tier, blob.Data, repo.BlobsOf(n.Content), func(_ blob.ID, plain []byte) error {
				b.Write(plain)
				return nil
			}); err != nil {
				return fmt.Errorf("%s: %w", p, err)
			}
			files[p] = b.Bytes()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// An export reads the chunks of many files, across directories, a few
// packs' reads at a time, where it read them a request each (and each
// listing with a request of its own); the copy holds the same files.
func TestExportReadsChunksTogether(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := snaptest.NewRepo(t)
	root, files := exportCorpus(t, src)
	m := src.Manifest(t, root, true)
	src2, reads := src.Reopen(t)
	dst := snaptest.NewRepo(t)
	nm, err := snapshot.Export(ctx, src2, dst.Repository, m, snapshot.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	readFiles(t, dst.Repository, blob.Workspace, nm.Root.Subtree, "", got)
	if len(got) != len(files) {
		t.Fatalf("the copy holds %d files, the source %d", len(got), len(files))
	}
	chunks := 0
	for p, want := range files {
		if !bytes.Equal(got[p], want) {
			t.Fatalf("%s differs in the copy", p)
		}
		if !strings.Contains(p, "/same/") || strings.HasPrefix(p, "d0/") {
			chunks++ // a lower bound: the big file has several
		}
	}
	if n := reads.Count(); n*4 > chunks {
		t.Fatalf("%d pack reads to copy %d chunks or more, want at most one for 4", n, chunks)
	} else {
		t.Logf("%d pack reads for %d chunks or more", n, chunks)
	}
}

// A file whose chunks are gone fails the export with its name, even when
// the file before it was read whole and the read that fails is the first
// of its own chunks.
func TestExportNamesTheFileWhoseChunksAreGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := snaptest.NewRepo(t)
	var nodes []snapshot.Node
	for _, name := range []string{"a", "b", "c"} {
		nodes = append(nodes, src.File(t, name, bytes.Repeat([]byte(name), 5000)))
		if err := src.Flush(ctx); err != nil { // a pack of its own
			t.Fatal(err)
		}
	}
	m := src.Manifest(t, src.Dir(t, "root", src.Dir(t, "dir", nodes...)), true)
	loc, ok, err := src.LookupBlob(blob.Workspace, blob.Data, nodes[1].Content[0])
	if err != nil || !ok {
		t.Fatalf("lookup of b's chunk: %v %v", ok, err)
	}
	if err := src.Backend().Remove(ctx, backend.Handle{Type: backend.Pack, Name: loc.Pack.String()}); err != nil {
		t.Fatal(err)
	}
	src2, _ := src.Reopen(t)
	_, err = snapshot.Export(ctx, src2, snaptest.NewRepo(t).Repository, m, snapshot.ExportOptions{})
	if !errors.Is(err, repo.ErrPackMissing) || !strings.Contains(err.Error(), `"dir": "b": `) {
		t.Fatalf("export with b's pack gone: %v", err)
	}
}

// A listing that cannot be read fails the export with its path, the
// files before it copied and nothing waiting on the walk ahead (which
// meets it first).
func TestExportFailsOnAMissingListing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := snaptest.NewRepo(t)
	gone := snapshot.Node{Name: []byte("b"), Type: snapshot.TypeDir, Mode: 0o755, MtimeNs: snaptest.Mtime, Subtree: []blob.ID{{9, 9, 9}}}
	root := src.Dir(t, "root",
		src.Dir(t, "a", src.File(t, "f", bytes.Repeat([]byte("a"), 5000))),
		src.Dir(t, "d", gone),
		src.Dir(t, "e", src.File(t, "f", bytes.Repeat([]byte("e"), 5000))))
	m := src.Manifest(t, root, true)
	_, err := snapshot.Export(ctx, src.Repository, snaptest.NewRepo(t).Repository, m, snapshot.ExportOptions{})
	if !errors.Is(err, repo.ErrBlobNotFound) || !strings.HasPrefix(err.Error(), `"d": "b": `) {
		t.Fatalf("export with d/b's listing missing: %v", err)
	}
}

// A listing only the walk ahead fails to read costs the look-ahead, not
// the export: the files it did not list are read one by one, with a
// warning, and the copy holds every file.
func TestExportOutlivesItsWalkAhead(t *testing.T) {
	var mu sync.Mutex
	var warnings []string
	ctx := repo.WithWarn(context.Background(), func(w string) {
		mu.Lock()
		defer mu.Unlock()
		warnings = append(warnings, w)
	})
	src := snaptest.NewRepo(t)
	root, files := exportCorpus(t, src)
	m := src.Manifest(t, root, true)
	var d2 []blob.ID // the listing of d2, the third directory
	if err := snapshot.LoadDir(ctx, src, blob.Workspace, root.Subtree, func(n *snapshot.Node) error {
		if string(n.Name) == "d2" {
			d2 = n.Subtree
		}
		return nil
	}); err != nil || len(d2) != 1 {
		t.Fatalf("d2's listing: %v %v", d2, err)
	}
	defer snapshot.FailExportWalkForTest(d2[0])()
	dst := snaptest.NewRepo(t)
	nm, err := snapshot.Export(ctx, src.Repository, dst.Repository, m, snapshot.ExportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]byte{}
	readFiles(t, dst.Repository, blob.Workspace, nm.Root.Subtree, "", got)
	for p, want := range files {
		if !bytes.Equal(got[p], want) {
			t.Fatalf("%s differs in the copy", p)
		}
	}
	if len(got) != len(files) {
		t.Fatalf("the copy holds %d files, the source %d", len(got), len(files))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(warnings) != 1 || !strings.Contains(warnings[0], "reading ahead stopped") || !strings.Contains(warnings[0], "the walk ahead cannot read this listing") {
		t.Fatalf("warnings: %q", warnings)
	}
}

// Two browser profiles that share a directory: the second copy takes it
// from the first (a repeated directory across the sensitive part's trees),
// whose chunks it does not read again, and both come back whole.
func TestExportProfilesSharingADirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	src := snaptest.NewRepo(t)
	sensitiveDir := func(name string, nodes ...snapshot.Node) snapshot.Node {
		ids, err := snapshot.SaveDir(ctx, src, blob.Sensitive, nodes)
		if err != nil {
			t.Fatal(err)
		}
		return snapshot.Node{Name: []byte(name), Type: snapshot.TypeDir, Mode: 0o700, MtimeNs: snaptest.Mtime, Subtree: ids}
	}
	sensitiveFile := func(name string, data []byte) snapshot.Node {
		ids, _, err := src.SaveStream(ctx, blob.Sensitive, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		return snapshot.Node{Name: []byte(name), Type: snapshot.TypeFile, Mode: 0o600, MtimeNs: snaptest.Mtime, Size: uint64(len(data)), Content: ids}
	}
	files := map[string][]byte{}
	var part snapshot.SensitivePart
	for i, p := range []string{"p1", "p2"} {
		shared, own := bytes.Repeat([]byte("extension "), 900), bytes.Repeat([]byte{byte('0' + i)}, 7000)
		root := sensitiveDir(p, sensitiveDir("Extensions", sensitiveFile("ext.js", shared)), sensitiveFile("Login Data", own))
		files[p+"/Extensions/ext.js"], files[p+"/Login Data"] = shared, own
		part.Trees = append(part.Trees, snapshot.SensitiveTree{Path: "profiles/" + p, Kind: "chromium", Root: root, Complete: true})
	}
	part.Version, part.Salt = snapshot.SensitivePartVersion, make([]byte, 16)
	b, err := json.Marshal(&part)
	if err != nil {
		t.Fatal(err)
	}
	partID, _, err := src.SaveBlob(ctx, blob.Sensitive, blob.Tree, b)
	if err != nil {
		t.Fatal(err)
	}
	m := src.Manifest(t, src.Dir(t, "root", src.File(t, "f", []byte("workspace"))), false)
	m.Sensitive = &partID
	dst := snaptest.NewRepo(t)
	nm, err := snapshot.Export(ctx, src.Repository, dst.Repository, m, snapshot.ExportOptions{IncludeSensitive: true})
	if err != nil {
		t.Fatal(err)
	}
	got, err := snapshot.LoadSensitivePart(ctx, dst, nm)
	if err != nil {
		t.Fatal(err)
	}
	copied := map[string][]byte{}
	for _, tr := range got.Trees {
		readFiles(t, dst.Repository, blob.Sensitive, tr.Root.Subtree, strings.TrimPrefix(tr.Path, "profiles/"), copied)
	}
	for p, want := range files {
		if !bytes.Equal(copied[p], want) {
			t.Fatalf("%s differs in the copy", p)
		}
	}
	if len(copied) != len(files) {
		t.Fatalf("the copy's profiles hold %d files, the source's %d", len(copied), len(files))
	}
}

// The walk ahead hands the feed batches of exactly 1024 chunk ids (the
// last fewer), in the copy's order; when a listing fails it first sends
// what it has listed before it.
func TestExportWalkAheadBatches(t *testing.T) {
	ctx := context.Background()
	src := snaptest.NewRepo(t)
	var files []snapshot.Node
	var want []blob.ID
	for i := range 400 { // 3 chunks each: 1,200 ids
		n := snapshot.Node{Name: []byte(fmt.Sprintf("f%03d", i)), Type: snapshot.TypeFile, Mode: 0o644, MtimeNs: snaptest.Mtime}
		for c := range 3 {
			n.Content = append(n.Content, src.SaveChunk(t, []byte(fmt.Sprintf("file %d chunk %d", i, c))))
			n.Size += uint64(len(fmt.Sprintf("file %d chunk %d", i, c)))
		}
		files = append(files, n)
		want = append(want, n.Content...)
	}
	b := src.Dir(t, "b", src.File(t, "f", []byte("after the listing that fails")))
	root := src.Dir(t, "root", src.Dir(t, "a", files...), b)
	src.Manifest(t, root, false) // flushes
	defer snapshot.FailExportWalkForTest(b.Subtree[0])()
	out := make(chan []blob.ID, 8)
	err := snapshot.ExportChunksForTest(ctx, src.Repository, root.Subtree, out)
	close(out)
	var got []blob.ID
	var sizes []int
	for batch := range out {
		got = append(got, batch...)
		sizes = append(sizes, len(batch))
	}
	if err == nil || !strings.HasPrefix(err.Error(), `"b": `) || !slices.Equal(sizes, []int{1024, 176}) || !slices.Equal(got, want) {
		t.Fatalf("walk ahead: batches of %v ids (%d in order of %d), error %v", sizes, len(got), len(want), err)
	}
}
