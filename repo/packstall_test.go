package repo

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/backend/local"
	"lifeboat/blob"
)

// stallBackend's first temp file blocks its writes until release is
// closed; stalled is closed when the first write blocks.
type stallBackend struct {
	fault.TempBackend
	once             sync.Once
	stalled, release chan struct{}
	first            bool
	mu               sync.Mutex
}

func (b *stallBackend) CreateTemp() (backend.TempFile, error) {
	f, err := b.TempBackend.CreateTemp()
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.first {
		return f, nil
	}
	b.first = true
	return &stallFile{TempFile: f, b: b}, nil
}

type stallFile struct {
	backend.TempFile
	b *stallBackend
}

func (f *stallFile) Write(p []byte) (int, error) {
	f.b.once.Do(func() { close(f.b.stalled) })
	<-f.b.release
	return f.TempFile.Write(p)
}

// A blob is written into a pack no other blob is being written into: while
// one pack's file write waits (for a slow disk, here for the test), saves
// go to the set's other pack and return. With the slot picked at random
// alone, about every second save would wait behind the stalled one.
func TestStalledPackDoesNotHoldUpTheOthers(t *testing.T) {
	tr := newTestRepo(t)
	sb := &stallBackend{TempBackend: tr.be.(*local.Backend), stalled: make(chan struct{}), release: make(chan struct{})}
	r, err := Open(context.Background(), sb, testPassword, Options{CacheDir: tr.cache, PackSize: 8 << 20, Packers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	// Incompressible blobs larger than a streamed pack's write buffer
	// (256 KiB) go to the pack's file as they are added.
	rng := rand.New(rand.NewChaCha8([32]byte{7}))
	blobs := make([][]byte, 12)
	for i := range blobs {
		blobs[i] = make([]byte, 300<<10)
		for j := 0; j < len(blobs[i]); j += 8 {
			v := rng.Uint64()
			for k := range 8 {
				blobs[i][j+k] = byte(v >> (8 * k))
			}
		}
	}
	firstDone := make(chan error, 1)
	go func() {
		_, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, blobs[0])
		firstDone <- err
	}()
	<-sb.stalled // the first blob's pack waits in its file write
	for i, b := range blobs[1:] {
		if _, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, b); err != nil {
			t.Fatalf("blob %d: %v", i+1, err)
		}
	}
	close(sb.release)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	k, err := r.TierKeys(blob.Workspace)
	if err != nil {
		t.Fatal(err)
	}
	for i, b := range blobs {
		got, err := r.LoadBlob(context.Background(), blob.Workspace, blob.Data, k.BlobID(b), nil)
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("blob %d after the flush: %v", i, err)
		}
	}
	checkRepo(t, r)
}

// Blobs saved one after another by one writer scatter over the set's
// packs rather than fill one pack after another: a file's consecutive
// chunks do not end a pack at a cut point the pack's size would reveal
// (docs/format.md, random pack assignment). Each save starts its search
// from a random slot, so the second pack stays unopened through the 39
// saves after the first with probability 2^-39.
func TestSequentialSavesScatterOverPacks(t *testing.T) {
	tr := newTestRepo(t)
	r, err := Open(context.Background(), tr.be, testPassword, Options{CacheDir: tr.cache, PackSize: 8 << 20, Packers: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	for i := range 40 {
		b := bytes.Repeat([]byte{byte(i)}, 1000+i)
		if _, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	packs := 0
	if err := tr.be.List(context.Background(), backend.Pack, func(backend.FileInfo) error { packs++; return nil }); err != nil {
		t.Fatal(err)
	}
	if packs != 2 {
		t.Errorf("40 blobs saved one at a time went to %d packs, want both of the set's 2", packs)
	}
}
