package repo

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/internal/storetest"
)

var testPassword = []byte("correct horse battery staple")

// testKDF keeps argon2id cheap in tests.
func testKDF() crypt.KDFParams { return crypt.NewKDFParams(1, 64, 1) }

type testRepo struct {
	dir, cache string // dir: the store's location
	be         backend.Backend
	store      storetest.Store
	warnings   *bytes.Buffer // set by captureWarnings: where openCounting's warnings go
}

// newTestRepo initialises a repository in a temp dir with 1 MiB packs.
func newTestRepo(t *testing.T) *testRepo {
	t.Helper()
	return newTestRepoIn(t, storetest.Local(t))
}

// openNewTestRepo makes a test repository (newTestRepo) and opens it with
// testPassword.
func openNewTestRepo(t *testing.T) (*testRepo, *Repository) {
	t.Helper()
	tr := newTestRepo(t)
	return tr, tr.open(t, nil, testPassword)
}

// newTestRepoIn initialises a repository in s with 1 MiB packs.
func newTestRepoIn(t *testing.T, s storetest.Store) *testRepo {
	t.Helper()
	be := s.Create(t)
	if _, err := Init(context.Background(), be, testPassword, InitOptions{PackSize: 1 << 20, KDF: testKDF()}); err != nil {
		t.Fatal(err)
	}
	return &testRepo{dir: s.Location, cache: t.TempDir(), be: be, store: s}
}

// open opens the repository with small packs and the test's cache dir.
func (tr *testRepo) open(t *testing.T, be backend.Backend, pw []byte) *Repository {
	t.Helper()
	if be == nil {
		be = tr.be
	}
	r, err := Open(context.Background(), be, pw, Options{CacheDir: tr.cache, PackSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

// randomBlobs returns n seeded random byte slices of 1 B to maxLen.
func randomBlobs(t *testing.T, seed uint64, n, maxLen int) [][]byte {
	t.Logf("random blobs: seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	out := make([][]byte, n)
	for i := range out {
		b := make([]byte, 1+rng.IntN(maxLen))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		if i%2 == 0 { // half compressible
			b = bytes.Repeat(b[:1+len(b)/64], 64)
		}
		out[i] = b
	}
	return out
}

// saveAll saves blobs as data blobs of tier t and returns their ids.
func saveAll(t *testing.T, r *Repository, tier blob.Tier, blobs [][]byte) []blob.ID {
	t.Helper()
	ids := make([]blob.ID, len(blobs))
	for i, b := range blobs {
		id, _, err := r.SaveBlob(context.Background(), tier, blob.Data, b)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = id
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ids
}

// checkAll loads every blob and compares it.
func checkAll(t *testing.T, r *Repository, tier blob.Tier, ids []blob.ID, blobs [][]byte) {
	t.Helper()
	for i, id := range ids {
		got, err := r.LoadBlob(context.Background(), tier, blob.Data, id, nil)
		if err != nil {
			t.Fatalf("blob %d (%s): %v", i, id.Short(), err)
		}
		if !bytes.Equal(got, blobs[i]) {
			t.Fatalf("blob %d (%s): content differs", i, id.Short())
		}
	}
}

// saveUntilFull saves blobs as workspace data blobs, batch at a time with
// a Flush after each, until an error. It returns the blobs a successful
// Flush covered, whether the error came from a SaveBlob (else a Flush),
// and the error.
func saveUntilFull(r *Repository, blobs [][]byte, batch int) (durable []blob.ID, durableData [][]byte, atSave bool, err error) {
	for i := 0; i < len(blobs); i += batch {
		next := blobs[i:min(len(blobs), i+batch)]
		var ids []blob.ID
		for _, b := range next {
			id, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, b)
			if err != nil {
				return durable, durableData, true, err
			}
			ids = append(ids, id)
		}
		if err := r.Flush(context.Background()); err != nil {
			return durable, durableData, false, err
		}
		durable, durableData = append(durable, ids...), append(durableData, next...)
	}
	return durable, durableData, false, nil
}

// checkRepo runs a full check with --read-data and fails on any problem.
func checkRepo(t *testing.T, r *Repository) {
	t.Helper()
	res, err := r.Check(context.Background(), CheckOptions{ReadData: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range res.Problems {
		t.Errorf("check: %s %s: %s", p.Kind, p.Object, p.Detail)
	}
}

// loadFails is a backend whose files of type typ cannot be loaded, with err.
type loadFails struct {
	backend.Backend
	typ backend.FileType
	err error
}

func (b loadFails) Load(ctx context.Context, h backend.Handle, off int64, n int) ([]byte, error) {
	if h.Type == b.typ {
		return nil, b.err
	}
	return b.Backend.Load(ctx, h, off, n)
}
