package capture

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"

	"lifeboat/backend"
	"lifeboat/backend/location"
	"lifeboat/internal/repotest"
	"lifeboat/internal/s3test"
	"lifeboat/internal/seedtest"
	"lifeboat/internal/storetest"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
	"lifeboat/snapshot/restore"
)

// TestCaptureS3Faults captures and restores through a fault proxy in
// front of a real S3 server (versitygw). Transient faults (503 SlowDown,
// a lost answer to a pack PUT and to the snapshot PUT, downloads reset
// mid-body) end in a complete snapshot that restores exactly; lasting
// faults on pack or snapshot uploads end in ErrUnavailable with no new
// snapshot, and the repository checks clean: never a snapshot whose packs
// are not all stored.
func TestCaptureS3Faults(t *testing.T) {
	t.Parallel()
	srv := s3test.Start(t)
	p := srv.Proxy(t)
	bucket := srv.NewBucket(t)
	creds := location.S3{AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}
	direct := storetest.Store{Kind: "s3", Location: srv.Location(bucket, "repo"), S3: creds}
	via := storetest.Store{Kind: "s3", Location: p.Location(bucket, "repo"), S3: creds} // 6 tries a request
	failFast := via
	failFast.S3.MaxRetries = 3 // lasting faults fail sooner
	tr := newCapTestRepoIn(t, direct)

	rng := seedtest.Rand(t)
	root := t.TempDir()
	files := map[string]string{}
	for i := range 30 {
		b := make([]byte, 50<<10+rng.IntN(200<<10))
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		files[filepath.Join("d"+strconv.Itoa(i%3), "f"+strconv.Itoa(i))] = string(b)
	}
	capTestWrite(t, root, files)
	snapshots := func() int {
		t.Helper()
		r := tr.open(t)
		defer r.Close(context.Background())
		snaptest.Check(t, r)
		snaps, _, err := snapshot.List(context.Background(), r, "")
		if err != nil {
			t.Fatal(err)
		}
		return len(snaps)
	}

	t.Run("transient faults end in a complete snapshot", func(t *testing.T) {
		p.Clear()
		faults := []*s3test.Fault{
			p.Add(s3test.Fault{Method: http.MethodPut, Path: "/repo/data/", Times: 2, Action: s3test.SlowDown}),
			p.Add(s3test.Fault{Method: http.MethodPut, Path: "/repo/data/", Skip: 1, Times: 1, Action: s3test.LoseResponse}),
			p.Add(s3test.Fault{Method: http.MethodPut, Path: "/repo/snapshots/", Times: 1, Action: s3test.LoseResponse}),
		}
		r := capTestOpenBackend(t, via.Open(t), repotest.Password, tr.cache)
		m := capTestCapture(t, r, root, capTestOptions(nil))
		for _, f := range faults {
			if p.Hits(f) != f.Times {
				t.Errorf("fault %v on %s hit %d times, want %d", f.Action, f.Path, p.Hits(f), f.Times)
			}
		}
		reset := p.Add(s3test.Fault{Method: http.MethodGet, Path: "/repo/data/", Times: 2, Action: s3test.ResetBody})
		target := filepath.Join(t.TempDir(), "restored")
		if _, err := restore.Run(context.Background(), r, m, restore.Options{Target: target}); err != nil {
			t.Fatalf("restore with downloads reset: %v", err)
		}
		if p.Hits(reset) != 2 {
			t.Errorf("reset hit %d downloads, want 2", p.Hits(reset))
		}
		if want, got := snaptest.Dump(t, root, false), snaptest.Dump(t, target, false); want != got {
			t.Fatalf("restored tree differs\nsource:\n%s\nrestored:\n%s", want, got)
		}
		_ = r.Close(context.Background())
		p.Clear()
		if n := snapshots(); n != 1 {
			t.Fatalf("%d snapshots after one capture with lost answers, want 1", n)
		}
	})
	t.Run("lasting faults leave no snapshot", func(t *testing.T) {
		for i, path := range []string{"/repo/data/", "/repo/snapshots/"} {
			for f, c := range files { // new data, so the capture has packs to upload
				capTestWrite(t, root, map[string]string{f: c + "changed " + strconv.Itoa(i)})
			}
			p.Clear()
			p.Add(s3test.Fault{Method: http.MethodPut, Path: path, Action: s3test.SlowDown})
			r := capTestOpenBackend(t, failFast.Open(t), repotest.Password, tr.cache)
			_, err := Run(context.Background(), r, root, capTestOptions(nil))
			if !errors.Is(err, backend.ErrUnavailable) {
				t.Fatalf("capture while every PUT to %s answers SlowDown: %v, want ErrUnavailable", path, err)
			}
			_ = r.Close(context.Background())
			p.Clear()
			if n := snapshots(); n != 1 {
				t.Fatalf("after a capture failed on %s: %d snapshots, want only the first", path, n)
			}
		}
	})

}
