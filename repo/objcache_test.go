package repo

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/blob"
	"lifeboat/crypt"
)

// With KeepObjects, a snapshot or pin object is loaded from storage once
// per process: the next loads open the bytes kept (a long-lived serve's
// retention reads every snapshot at each capture). A removed object is
// not served from memory.
func TestObjectCacheLoadsSnapshotsOnce(t *testing.T) {
	tr := newTestRepo(t)
	fb := fault.Wrap(tr.be)
	r, err := Open(context.Background(), fb, testPassword, Options{CacheDir: tr.cache, KeepObjects: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	ctx := context.Background()
	snap, err := r.SaveObject(ctx, crypt.KindSnapshot, blob.Workspace, []byte(`{"snapshot":1}`))
	if err != nil {
		t.Fatal(err)
	}
	pin, err := r.SaveObject(ctx, crypt.KindPin, blob.Workspace, []byte(`{"pin":1}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []struct {
		kind crypt.ObjectKind
		id   blob.ID
	}{{crypt.KindSnapshot, snap}, {crypt.KindPin, pin}} {
		if _, _, err := r.LoadObject(ctx, o.kind, o.id); err != nil {
			t.Fatal(err)
		}
	}
	down := fb.Add(fault.OnLoad).Match(backend.Snapshot, backend.Pin).Always()
	_, plain, err := r.LoadObject(ctx, crypt.KindSnapshot, snap)
	if err != nil || !bytes.Equal(plain, []byte(`{"snapshot":1}`)) {
		t.Fatalf("second load of a snapshot: %q %v", plain, err)
	}
	if _, _, err := r.LoadObject(ctx, crypt.KindPin, pin); err != nil {
		t.Fatalf("second load of a pin: %v", err)
	}
	if down.Fired() != 0 {
		t.Fatalf("the second loads reached storage %d times", down.Fired())
	}
	r.Unkeep(crypt.KindPin, pin)
	if _, _, err := r.LoadObject(ctx, crypt.KindPin, pin); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("a pin let go of (Unkeep) was not loaded from storage: %v", err)
	}
	if err := r.RemoveObject(ctx, crypt.KindSnapshot, snap); err != nil {
		t.Fatal(err)
	}
	if _, _, err := r.LoadObject(ctx, crypt.KindSnapshot, snap); !errors.Is(err, fault.ErrInjected) {
		t.Fatalf("a removed snapshot was not loaded from storage: %v", err)
	}
}
