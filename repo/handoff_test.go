package repo

import (
	"context"
	"sync/atomic"
	"testing"

	"lifeboat/blob"
)

// A Flush beside a SaveBlob that has just taken a full pack out of its slot
// and waits to upload it (captures of two workspaces share packs in
// `lifeboat serve`) must wait for that pack: it holds blobs saved before
// the Flush. It used to count as in flight only once it had an upload
// slot, so the Flush found neither an open pack nor an upload and returned
// with those blobs unstored.
func TestFlushWaitsForHandedOffPack(t *testing.T) {
	tr := newTestRepo(t)
	r, err := Open(context.Background(), tr.be, testPassword, Options{CacheDir: tr.cache, PackSize: 256 << 10, Packers: 1, Uploads: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })

	handedOff, proceed := make(chan struct{}), make(chan struct{})
	var first atomic.Bool
	r.testBeforeUpload = func() {
		if first.CompareAndSwap(false, true) {
			close(handedOff)
			<-proceed
		}
	}
	flushWaits := make(chan struct{}, 1)
	r.testFlushWaits = func() {
		select {
		case flushWaits <- struct{}{}:
		default:
		}
	}

	// The saver fills the first pack; its hand-off stops in the hook.
	var saved []blob.ID
	saverDone := make(chan error, 1)
	go func() {
		for _, b := range randomBlobs(t, 11, 200, 16<<10) {
			id, _, err := r.SaveBlob(context.Background(), blob.Workspace, blob.Data, b)
			if err != nil {
				saverDone <- err
				return
			}
			select {
			case <-handedOff:
			default:
				saved = append(saved, id) // saved before the hand-off
			}
		}
		saverDone <- nil
	}()
	<-handedOff
	before := len(saved) // the saver is held in the hook: saved is still
	if before == 0 {
		t.Fatal("no blob saved before the first pack was handed off")
	}
	ids := append([]blob.ID(nil), saved[:before]...)

	flushDone := make(chan error, 1)
	go func() { flushDone <- r.Flush(context.Background()) }()
	select {
	case <-flushWaits: // waiting for the handed-off pack: let it go
		close(proceed)
		if err := <-flushDone; err != nil {
			t.Fatal(err)
		}
	case err := <-flushDone:
		if err != nil {
			t.Fatal(err)
		}
		t.Error("Flush returned while a pack with blobs saved before it waited for upload")
		close(proceed)
	}
	for _, id := range ids {
		if _, ok, err := r.LookupBlob(blob.Workspace, blob.Data, id); !ok || err != nil {
			t.Errorf("blob %s saved before Flush: not stored after it (%v)", id.Short(), err)
			break
		}
	}
	if err := <-saverDone; err != nil {
		t.Fatal(err)
	}
	if err := r.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}
