package repo

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/fault"
	"lifeboat/blob"
)

// commitNothing commits s with a save that only counts its calls.
func commitNothing(s *Session) (saved int, err error) {
	err = s.Commit(context.Background(), func(context.Context) error { saved++; return nil },
		func(context.Context) error { return errors.New("undo called") })
	return saved, err
}

// A pack upload fails (the storage answers "unavailable" once), in a
// Flush or in the background while the session still saves: the Flush
// fails with ErrPackLost carrying the storage's error; the session that
// saved into the pack, and one that began before the failure and saved
// the same blobs (reusing them), cannot commit. The repository is not poisoned: a
// session begun afterwards saves the lost blobs again (none is taken for
// stored), flushes, commits, and every blob loads, before and after
// reopening.
func TestLostPackFailsRunningSessionsOnly(t *testing.T) {
	for _, tc := range []struct {
		n       int
		atFlush bool // every pack is uploaded by the Flush, so no lost blob can have been saved again before it
	}{{5, true}, {40, false}} {
		n := tc.n
		t.Run(fmt.Sprintf("%d blobs", n), func(t *testing.T) {
			ctx := context.Background()
			tr := newTestRepo(t)
			fb := fault.Wrap(tr.be)
			r := tr.open(t, fb, testPassword)
			blobs := randomBlobs(t, uint64(60+n), n, 50<<10)
			fb.Add(fault.OnSave).Match(backend.Pack).Fail(fmt.Errorf("saving a pack: %w", backend.ErrUnavailable))

			a, err := r.BeginSession(ctx)
			must(t, err)
			b, err := r.BeginSession(ctx)
			must(t, err)
			ids := make([]blob.ID, len(blobs))
			for i, b := range blobs {
				if ids[i], _, err = r.SaveBlob(ctx, blob.Workspace, blob.Data, b); err != nil {
					t.Fatalf("saving blob %d: %v (a lost pack must not fail later saves)", i, err)
				}
			}
			for _, data := range blobs { // b's saves: reused, or saved again if their pack was lost already
				_, _, err := r.SaveBlob(ctx, blob.Workspace, blob.Data, data)
				must(t, err)
			}
			err = r.Flush(ctx)
			if !errors.Is(err, ErrPackLost) || !errors.Is(err, backend.ErrUnavailable) {
				t.Fatalf("flush after a failed pack upload: %v, want ErrPackLost and ErrUnavailable", err)
			}
			fb.VerifyAllFired(t)
			if err := r.Flush(ctx); err != nil {
				t.Fatalf("a second flush: %v, want nil (the loss was reported)", err)
			}
			for name, s := range map[string]*Session{"the session that saved into the lost pack": a, "a session that reused its blobs": b} {
				saved, err := commitNothing(s)
				if !errors.Is(err, ErrPackLost) || !errors.Is(err, backend.ErrUnavailable) || saved != 0 {
					t.Fatalf("commit of %s: %v, snapshot saved %d times; want ErrPackLost, nothing saved", name, err, saved)
				}
			}

			c, err := r.BeginSession(ctx)
			must(t, err)
			again := 0
			for i, data := range blobs {
				id, known, err := r.SaveBlob(ctx, blob.Workspace, blob.Data, data)
				must(t, err)
				if id != ids[i] {
					t.Fatalf("blob %d saved as %s, then as %s", i, ids[i].Short(), id.Short())
				}
				if !known {
					again++
				}
			}
			if tc.atFlush && again == 0 {
				t.Fatal("no blob was saved again after its pack was lost")
			}
			must(t, r.Flush(ctx))
			if saved, err := commitNothing(c); err != nil || saved != 1 {
				t.Fatalf("commit of a session begun after the loss: %v, saved %d times", err, saved)
			}
			checkAll(t, r, blob.Workspace, ids, blobs)
			checkRepo(t, r)
			must(t, r.Close(ctx))
			checkAll(t, tr.open(t, nil, testPassword), blob.Workspace, ids, blobs)
		})
	}
}
