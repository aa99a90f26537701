package repo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/backend/local"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/storetest"
)

func TestInitOpenErrors(t *testing.T) {
	ctx := context.Background()
	tr := newTestRepo(t)
	if _, err := Init(ctx, tr.be, testPassword, InitOptions{KDF: testKDF()}); !errors.Is(err, ErrRepoExists) {
		t.Fatalf("second init: %v, want ErrRepoExists", err)
	}
	if _, err := Open(ctx, tr.be, []byte("wrong"), Options{CacheDir: tr.cache}); !errors.Is(err, crypt.ErrWrongPassword) {
		t.Fatalf("wrong password: %v", err)
	}
	empty, err := local.Create(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, empty, testPassword, Options{CacheDir: tr.cache}); !errors.Is(err, ErrNoRepository) {
		t.Fatalf("empty dir: %v", err)
	}
	r := tr.open(t, nil, testPassword)
	if got := r.Tiers(); len(got) != 2 {
		t.Fatalf("first key unlocks %v, want both tiers", got)
	}
	// The local index opens while the key is derived; a failed unlock
	// closed it, so the open above got the shared file, not a private one.
	if got := filepath.Base(r.Index().Path()); got != "index.db" {
		t.Errorf("after a wrong password, the next open uses index file %s, want index.db", got)
	}
}

func TestSaveLoadReopen(t *testing.T) { storetest.Each(t, testSaveLoadReopen) }

func testSaveLoadReopen(t *testing.T, s storetest.Store) {
	tr := newTestRepoIn(t, s)
	blobs := randomBlobs(t, 1, 60, 200<<10)
	r := tr.open(t, nil, testPassword)
	ids := saveAll(t, r, blob.Workspace, blobs)
	checkAll(t, r, blob.Workspace, ids, blobs)
	// Dedup: the same data is known.
	for i, b := range blobs {
		id, known, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, b)
		if err != nil || !known || id != ids[i] {
			t.Fatalf("resave %d: known=%v err=%v", i, known, err)
		}
	}
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	// A fresh cache dir forces a rebuild from the index objects.
	tr.cache = t.TempDir()
	r2 := tr.open(t, nil, testPassword)
	checkAll(t, r2, blob.Workspace, ids, blobs)
	n, packs, err := r2.Index().Count()
	if err != nil || n != len(uniq(ids)) || packs < 2 {
		t.Fatalf("index holds %d blobs in %d packs (err %v), want %d blobs in several packs", n, packs, err, len(uniq(ids)))
	}
}

func uniq(ids []blob.ID) map[blob.ID]bool {
	m := map[blob.ID]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func TestTiersGiveUnrelatedIDs(t *testing.T) {
	_, r := openNewTestRepo(t)
	data := []byte("the same bytes in two tiers")
	w, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, data)
	if err != nil {
		t.Fatal(err)
	}
	s, _, err := r.SaveBlob(context.Background(), blob.Sensitive, blob.Data, data)
	if err != nil {
		t.Fatal(err)
	}
	if w == s {
		t.Fatal("same id in both tiers")
	}
	other := newTestRepo(t).open(t, nil, testPassword)
	o, _, err := other.SaveBlob(context.Background(), blob.Workspace, blob.Data, data)
	if err != nil {
		t.Fatal(err)
	}
	if o == w {
		t.Fatal("same id in two repositories")
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := r.LoadBlob(context.Background(), blob.Workspace, blob.Data, s, nil); !errors.Is(err, ErrBlobNotFound) {
		t.Fatalf("sensitive id looked up in the workspace tier: %v", err)
	}
}

func TestConcurrentSaves(t *testing.T) { storetest.Each(t, testConcurrentSaves) }

func testConcurrentSaves(t *testing.T, s storetest.Store) {
	tr := newTestRepoIn(t, s)
	r := tr.open(t, nil, testPassword)
	blobs := randomBlobs(t, 2, 40, 64<<10)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range blobs {
				b := blobs[(i+g*5)%len(blobs)]
				if _, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, b); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	ids := make([]blob.ID, len(blobs))
	k, _ := r.TierKeys(blob.Workspace)
	for i, b := range blobs {
		ids[i] = k.BlobID(b)
	}
	checkAll(t, r, blob.Workspace, ids, blobs)
	n, _, _ := r.Index().Count()
	if n != len(uniq(ids)) {
		t.Fatalf("%d blobs indexed, want %d (each stored once)", n, len(uniq(ids)))
	}
	checkRepo(t, r)
}

// Two repositories open on the same directory and cache at once (as two
// processes would be): both save, nothing is lost.
func TestTwoWritersSameRepository(t *testing.T) { storetest.Each(t, testTwoWritersSameRepository) }

func testTwoWritersSameRepository(t *testing.T, s storetest.Store) {
	tr := newTestRepoIn(t, s)
	r1 := tr.open(t, nil, testPassword)
	r2 := tr.open(t, s.Open(t), testPassword)
	if !r2.Index().Private() {
		t.Fatal("second writer should fall back to a private index cache")
	}
	a, b := randomBlobs(t, 3, 30, 100<<10), randomBlobs(t, 4, 30, 100<<10)
	var ida, idb []blob.ID
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); ida = saveAll(t, r1, blob.Workspace, a) }()
	go func() { defer wg.Done(); idb = saveAll(t, r2, blob.Workspace, b) }()
	wg.Wait()
	if err := errors.Join(r1.Close(context.Background()), r2.Close(context.Background())); err != nil {
		t.Fatal(err)
	}
	r3 := tr.open(t, nil, testPassword)
	checkAll(t, r3, blob.Workspace, ida, a)
	checkAll(t, r3, blob.Workspace, idb, b)
	checkRepo(t, r3)
}

func TestNewerFormatRefused(t *testing.T) {
	tr := newTestRepo(t)
	editConfig(t, tr.dir, func(m map[string]any) { m["version"] = 2 })
	_, err := Open(context.Background(), tr.be, testPassword, Options{CacheDir: tr.cache})
	if !errors.Is(err, ErrNewerFormat) {
		t.Fatalf("got %v, want ErrNewerFormat", err)
	}
}

func TestTamperedPublicConfig(t *testing.T) {
	tr := newTestRepo(t)
	editConfig(t, tr.dir, func(m map[string]any) { m["pack_size"] = 2 << 20 })
	_, err := Open(context.Background(), tr.be, testPassword, Options{CacheDir: tr.cache})
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("got %v, want ErrCorrupt", err)
	}
}

func editConfig(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	p := filepath.Join(dir, "config")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]any{}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, _ = json.Marshal(m)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// No stored file contains a plaintext blob or its unkeyed hash.
func TestNoPlaintextInRepository(t *testing.T) {
	tr, r := openNewTestRepo(t)
	secret := bytes.Repeat([]byte("TOP-SECRET-cookie-value;"), 100)
	saveAll(t, r, blob.Sensitive, [][]byte{secret})
	saveAll(t, r, blob.Workspace, [][]byte{secret[:200]})
	err := filepath.WalkDir(tr.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte("TOP-SECRET")) || bytes.Contains(b, []byte(string(testPassword))) {
			t.Errorf("%s holds plaintext", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestCorruptLocalCacheRebuilt(t *testing.T) {
	tr, r := openNewTestRepo(t)
	blobs := randomBlobs(t, 5, 10, 50<<10)
	ids := saveAll(t, r, blob.Workspace, blobs)
	path := r.Index().Path()
	if err := r.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.Repeat([]byte{0xAB}, 64<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	r2 := tr.open(t, nil, testPassword)
	checkAll(t, r2, blob.Workspace, ids, blobs)
}

func TestObjectsRoundTrip(t *testing.T) {
	tr, r := openNewTestRepo(t)
	ctx := context.Background()
	id, err := r.SaveObject(ctx, crypt.KindSnapshot, blob.Workspace, []byte(`{"hello":1}`))
	if err != nil {
		t.Fatal(err)
	}
	var listed []blob.ID
	if err := r.ListObjects(ctx, crypt.KindSnapshot, func(id blob.ID) error { listed = append(listed, id); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(listed) != 1 || listed[0] != id {
		t.Fatalf("listed %v", listed)
	}
	tier, plain, err := r.LoadObject(ctx, crypt.KindSnapshot, id)
	if err != nil || tier != blob.Workspace || string(plain) != `{"hello":1}` {
		t.Fatalf("load: %v %v %q", err, tier, plain)
	}
	// A snapshot file moved into the lock namespace does not open as a lock.
	data, _ := tr.be.Load(ctx, backend.Handle{Type: backend.Snapshot, Name: id.String()}, 0, 0)
	if err := tr.be.Save(ctx, backend.Handle{Type: backend.Lock, Name: id.String()}, data); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.LoadObject(ctx, crypt.KindLock, id); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("snapshot read as lock: %v", err)
	}
}

// A location whose config went missing but that still holds a
// repository's files is no place for init: init refuses (a new config
// would make every key, index and pack unreadable), open says the config
// is missing rather than inviting an init, and with the config put back
// everything reads as before. With the keys gone too, the packs alone
// still stop init.
func TestInitRefusesRepositoryWithoutConfig(t *testing.T) {
	storetest.Each(t, testInitRefusesRepositoryWithoutConfig)
}

func testInitRefusesRepositoryWithoutConfig(t *testing.T, s storetest.Store) {
	ctx := context.Background()
	tr := newTestRepoIn(t, s)
	blobs := randomBlobs(t, 7, 20, 64<<10)
	r := tr.open(t, nil, testPassword)
	ids := saveAll(t, r, blob.Workspace, blobs)
	must(t, r.Close(ctx))
	cfgHandle := backend.Handle{Type: backend.Config, Name: "config"}
	cfg, err := tr.be.Load(ctx, cfgHandle, 0, 0)
	must(t, err)
	must(t, tr.be.Remove(ctx, cfgHandle))
	keys := listNames(t, tr.be, backend.Key)

	_, err = Open(ctx, tr.be, testPassword, Options{CacheDir: tr.cache})
	if !errors.Is(err, ErrNoRepository) || !strings.Contains(err.Error(), "config is missing but keys/ holds its files") || strings.Contains(err.Error(), "run `lifeboat init`") {
		t.Fatalf("open without the config: %v", err)
	}
	_, err = Init(ctx, tr.be, testPassword, InitOptions{KDF: testKDF()})
	if !errors.Is(err, ErrRepoExists) || !strings.Contains(err.Error(), "keys/") || !strings.Contains(err.Error(), tr.be.Location()) {
		t.Fatalf("init over a repository without its config: %v", err)
	}
	if _, err := tr.be.Stat(ctx, cfgHandle); !errors.Is(err, backend.ErrNotFound) {
		t.Fatalf("the refused init left a config: %v", err)
	}
	if got := listNames(t, tr.be, backend.Key); !slices.Equal(got, keys) {
		t.Fatalf("the refused init changed the key files: %v, were %v", got, keys)
	}

	must(t, tr.be.Save(ctx, cfgHandle, cfg))
	checkAll(t, tr.open(t, nil, testPassword), blob.Workspace, ids, blobs)

	must(t, tr.be.Remove(ctx, cfgHandle))
	for _, k := range keys {
		must(t, tr.be.Remove(ctx, backend.Handle{Type: backend.Key, Name: k}))
	}
	for _, typ := range []backend.FileType{backend.Snapshot, backend.Index} {
		for _, n := range listNames(t, tr.be, typ) {
			must(t, tr.be.Remove(ctx, backend.Handle{Type: typ, Name: n}))
		}
	}
	if _, err := Init(ctx, tr.be, testPassword, InitOptions{KDF: testKDF()}); !errors.Is(err, ErrRepoExists) || !strings.Contains(err.Error(), "data/") {
		t.Fatalf("init over packs alone: %v", err)
	}
}

// listNames returns the sorted names of be's files of type typ.
func listNames(t *testing.T, be backend.Backend, typ backend.FileType) []string {
	t.Helper()
	var names []string
	must(t, be.List(context.Background(), typ, func(fi backend.FileInfo) error {
		names = append(names, fi.Name)
		return nil
	}))
	slices.Sort(names)
	return names
}

// An init whose config cannot be saved takes its key file back, so init
// can run there again; key files alone (an init that could not take its
// key back) are named as what an unfinished init leaves.
func TestInitFailureLeavesNoKey(t *testing.T) {
	ctx := context.Background()
	s := storetest.Local(t)
	fb := fault.Wrap(s.Create(t))
	fb.Add(fault.OnSave).Match(backend.Config).Fail(backend.ErrUnavailable)
	if _, err := Init(ctx, fb, testPassword, InitOptions{KDF: testKDF()}); !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("init with the config save failing: %v", err)
	}
	if keys := listNames(t, fb, backend.Key); len(keys) != 0 {
		t.Fatalf("the failed init left key files %v", keys)
	}
	if _, err := Init(ctx, fb, testPassword, InitOptions{KDF: testKDF()}); err != nil {
		t.Fatalf("init again after the failure: %v", err)
	}

	// Key files alone, no config.
	lone := storetest.Local(t)
	be := lone.Create(t)
	if _, err := Init(ctx, be, testPassword, InitOptions{KDF: testKDF()}); err != nil {
		t.Fatal(err)
	}
	must(t, be.Remove(ctx, backend.Handle{Type: backend.Config, Name: "config"}))
	_, err := Init(ctx, be, testPassword, InitOptions{KDF: testKDF()})
	if !errors.Is(err, ErrRepoExists) || !strings.Contains(err.Error(), "keys/ alone holds files, as an init that did not finish leaves them") {
		t.Fatalf("init over key files alone: %v", err)
	}
	if _, err := Open(ctx, be, testPassword, Options{CacheDir: t.TempDir()}); !errors.Is(err, ErrNoRepository) || !strings.Contains(err.Error(), "remove keys/ there and run init again") {
		t.Fatalf("open of key files alone: %v", err)
	}
}
