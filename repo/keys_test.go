package repo

import (
	"context"
	"errors"
	"testing"

	"github.com/zeebo/blake3"

	"lifeboat/backend"
	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/index"
)

func TestKeyLifecycle(t *testing.T) {
	ctx := context.Background()
	tr, r := openNewTestRepo(t)
	first := r.KeyID()
	if err := r.RemoveKey(ctx, first); !errors.Is(err, ErrLastKey) {
		t.Fatalf("removing the only key: %v", err)
	}
	second, err := r.AddKey(ctx, []byte("second"), blob.Tiers, testKDF())
	must(t, err)
	wsOnly, err := r.AddKey(ctx, []byte("workspace only"), []blob.Tier{blob.Workspace}, testKDF())
	must(t, err)
	keys, err := r.Keys(ctx)
	must(t, err)
	if len(keys) != 3 {
		t.Fatalf("%d keys listed", len(keys))
	}
	for _, k := range keys {
		if k.Current != (k.ID == first) {
			t.Fatalf("key %s current=%v", k.ID.Short(), k.Current)
		}
		if k.ID == wsOnly && len(k.Tiers) != 1 {
			t.Fatalf("workspace-only key lists tiers %v", k.Tiers)
		}
	}
	if err := r.RemoveKey(ctx, first); err == nil {
		t.Fatal("removed the key in use")
	}
	found, err := r.FindKey(ctx, second.String()[:6])
	if err != nil || found.ID != second {
		t.Fatalf("find by prefix: %v %v", found.ID.Short(), err)
	}
	if _, err := r.FindKey(ctx, "zz"); !errors.Is(err, ErrKeyNotFound) {
		t.Fatalf("short prefix: %v", err)
	}

	// The second key opens; passwd replaces it.
	r2 := tr.open(t, nil, []byte("second"))
	newID, err := r2.ChangePassword(ctx, []byte("second v2"), testKDF())
	must(t, err)
	if _, err := Open(ctx, tr.be, []byte("second"), Options{CacheDir: tr.cache}); !errors.Is(err, crypt.ErrWrongPassword) {
		t.Fatalf("old password still opens: %v", err)
	}
	r3 := tr.open(t, nil, []byte("second v2"))
	if r3.KeyID() != newID || len(r3.Tiers()) != 2 {
		t.Fatalf("new key %s tiers %v", r3.KeyID().Short(), r3.Tiers())
	}
	// Once one full key is left, removing it is refused.
	must(t, r3.RemoveKey(ctx, first))
	if err := r.RemoveKey(ctx, newID); !errors.Is(err, ErrLastKey) {
		t.Fatalf("removing the last full key: %v", err)
	}
}

func TestLastSensitiveKeyKept(t *testing.T) {
	ctx := context.Background()
	tr, r := openNewTestRepo(t)
	_, err := r.AddKey(ctx, []byte("ws"), []blob.Tier{blob.Workspace}, testKDF())
	must(t, err)
	ws := tr.open(t, nil, []byte("ws"))
	if err := ws.RemoveKey(ctx, r.KeyID()); !errors.Is(err, ErrLastKey) {
		t.Fatalf("removing the only sensitive key: %v", err)
	}
}

// A workspace-only key cannot touch the sensitive tier, cannot hand it on,
// and leaves the sensitive index alone when it repairs the index.
func TestWorkspaceOnlyKey(t *testing.T) {
	ctx := context.Background()
	tr, full := openNewTestRepo(t)
	wsBlobs, sBlobs := randomBlobs(t, 20, 8, 40<<10), randomBlobs(t, 21, 8, 40<<10)
	wsIDs := saveAll(t, full, blob.Workspace, wsBlobs)
	sIDs := saveAll(t, full, blob.Sensitive, sBlobs)
	_, err := full.AddKey(ctx, []byte("ws"), []blob.Tier{blob.Workspace}, testKDF())
	must(t, err)
	must(t, full.Close(ctx))

	tr.cache = t.TempDir()
	ws := tr.open(t, nil, []byte("ws"))
	if _, err := ws.TierKeys(blob.Sensitive); !errors.Is(err, crypt.ErrTierLocked) {
		t.Fatalf("sensitive keys: %v", err)
	}
	if _, _, err := ws.SaveBlob(ctx, blob.Sensitive, blob.Data, []byte("x")); !errors.Is(err, crypt.ErrTierLocked) {
		t.Fatalf("sensitive save: %v", err)
	}
	if _, err := ws.LoadBlob(ctx, blob.Sensitive, blob.Data, sIDs[0], nil); !errors.Is(err, crypt.ErrTierLocked) {
		t.Fatalf("sensitive load: %v", err)
	}
	if _, err := ws.AddKey(ctx, []byte("x"), blob.Tiers, testKDF()); !errors.Is(err, crypt.ErrTierLocked) {
		t.Fatalf("workspace key made a full key: %v", err)
	}
	// The local index holds no sensitive entries: it cannot count them.
	if err := ws.Index().ForEachBlob(blob.Sensitive, func(index.Location) error {
		t.Fatal("sensitive entry in a workspace-only index")
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	checkAll(t, ws, blob.Workspace, wsIDs, wsBlobs)
	st, err := ws.RepairIndex(ctx)
	must(t, err)
	if st.LockedPacks == 0 || st.Blobs != len(wsIDs) {
		t.Fatalf("repair with a workspace key: %+v", st)
	}
	must(t, ws.Close(ctx))

	tr.cache = t.TempDir()
	full2 := tr.open(t, nil, testPassword)
	checkAll(t, full2, blob.Sensitive, sIDs, sBlobs)
	checkAll(t, full2, blob.Workspace, wsIDs, wsBlobs)
	checkRepo(t, full2)
}

// A stray file in keys/ shows up as unreadable and can be removed; it does
// not count as a key for the last-key guard.
func TestJunkKeyFileListedAndRemovable(t *testing.T) {
	ctx := context.Background()
	tr, r := openNewTestRepo(t)
	junk := []byte("{}")
	id := blob.ID(blake3.Sum256(junk))
	must(t, tr.be.Save(ctx, backend.Handle{Type: backend.Key, Name: id.String()}, junk))
	keys, err := r.Keys(ctx)
	must(t, err)
	if len(keys) != 2 {
		t.Fatalf("%d keys listed, want the real one and the junk", len(keys))
	}
	if err := r.RemoveKey(ctx, r.KeyID()); !errors.Is(err, ErrLastKey) && !errors.Is(err, ErrKeyInUse) {
		t.Fatalf("removing the only readable key: %v", err)
	}
	must(t, r.RemoveKey(ctx, id))
}
