package snapshot

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/backend/local"
	"lifeboat/blob"
)

// File cache entries whose chunks the local index holds when the readers
// are done are written beside the final flush, before the manifest; an
// entry with a chunk not yet indexed waits for the flush. So a capture
// that fails at its final flush or at its manifest keeps the entries of
// the files indexed before (here by a Flush while the last file is about
// to be read, with one reader, in name order), never one of a file whose
// chunk did not reach the index; and the next capture reads only that
// file and is complete.
func TestCacheEntriesWrittenOnceIndexed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault func(*fault.Backend)
	}{
		// The hook's Flush saves index object 1; the final flush's is 2.
		{"final flush fails", func(fb *fault.Backend) { fb.Add(fault.OnSave).Match(backend.Index).Nth(2) }},
		{"manifest fails", func(fb *fault.Backend) { fb.Add(fault.OnSave).Match(backend.Snapshot) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			root := t.TempDir()
			files := map[string]string{}
			const early = 100
			for i := range early {
				files[fmt.Sprintf("f%03d", i)] = fmt.Sprintf("early file %d\n", i)
			}
			files["zz-last"] = "the last file, read after the flush\n"
			capTestWrite(t, root, files)
			tr := newCapTestRepo(t)
			inner, err := local.Open(tr.dir)
			if err != nil {
				t.Fatal(err)
			}
			fb := fault.Wrap(inner)
			r := capTestOpenBackend(t, fb, capTestPassword, tr.cache)
			var read atomic.Int64
			o := capTestOptions(&read)
			o.Cache = r.Index()
			o.Readers = 1
			var flushErr error
			o.hooks.beforeOpen = func(p string) {
				if p == "zz-last" {
					flushErr = r.Flush(ctx)
				}
			}
			tc.fault(fb)
			if _, err := Capture(ctx, r, root, o); !errors.Is(err, fault.ErrInjected) {
				t.Fatalf("capture: %v, want the injected failure", err)
			}
			if flushErr != nil {
				t.Fatalf("flush before the last file: %v", flushErr)
			}
			fb.VerifyAllFired(t)

			ws := capTestWsKey(t, r, o.Workspace)
			k, err := r.TierKeys(blob.Workspace)
			if err != nil {
				t.Fatal(err)
			}
			_, rootKey := capCacheKeys(k, o.Workspace)
			for name := range files {
				key := capFileKey(k, rootKey, name)
				e, ok, err := r.Index().FileCacheGet(ws, key[:])
				if err != nil {
					t.Fatal(err)
				}
				if want := name != "zz-last"; ok != want {
					t.Errorf("%s: cache entry written %v, want %v", name, ok, want)
				}
				for _, id := range e.Content {
					if _, indexed, err := r.Index().Lookup(blob.Workspace, blob.Data, id); err != nil || !indexed {
						t.Errorf("%s: cache entry written ahead of its chunk %s (indexed %v, %v)", name, id.Short(), indexed, err)
					}
				}
			}
			if n, err := r.Index().FileCacheCount(ws); err != nil || n != early {
				t.Errorf("file cache holds %d entries (%v), want %d", n, err, early)
			}

			o.hooks.beforeOpen = nil
			read.Store(0)
			m := capTestCapture(t, r, root, o)
			if want := int64(len(files["zz-last"])); read.Load() != want {
				t.Errorf("the next capture read %d bytes, want %d (the last file only)", read.Load(), want)
			}
			if !m.Complete {
				t.Errorf("the next capture is partial: %v", m.Errors)
			}
			capTestCompare(t, r, root, m)
			capTestCheck(t, r)
		})
	}
}

// Repository.Unindexed holds a blob from its save until its index object
// is applied, and only blobs of the tier and type asked for.
func TestUnindexedUntilFlushed(t *testing.T) {
	ctx := context.Background()
	r := capTestOpenRepo(t)
	id, known, err := r.SaveBlob(ctx, blob.Workspace, blob.Data, []byte("pending blob"))
	if err != nil || known {
		t.Fatalf("SaveBlob: known %v, %v", known, err)
	}
	if _, ok := r.Unindexed(blob.Workspace, blob.Data)[id]; !ok {
		t.Error("a blob in an open pack is not in the unindexed set")
	}
	if _, ok := r.Unindexed(blob.Workspace, blob.Tree)[id]; ok {
		t.Error("a data blob is in the tree blobs' unindexed set")
	}
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(r.Unindexed(blob.Workspace, blob.Data)); n != 0 {
		t.Errorf("%d blobs unindexed after Flush", n)
	}
	if _, ok, err := r.Index().Lookup(blob.Workspace, blob.Data, id); err != nil || !ok {
		t.Errorf("flushed blob not in the local index: %v %v", ok, err)
	}
	if _, known, err := r.SaveBlob(ctx, blob.Workspace, blob.Data, []byte("pending blob")); err != nil || !known {
		t.Errorf("saving it again: known %v, %v", known, err)
	}
	if n := len(r.Unindexed(blob.Workspace, blob.Data)); n != 0 {
		t.Errorf("a blob found in the index is unindexed (%d)", n)
	}
}
