package capture

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"lifeboat/backend"
	"lifeboat/backend/local"
	"lifeboat/internal/repotest"
	"lifeboat/internal/seedtest"
	"lifeboat/prune"
	"lifeboat/repo"
	"lifeboat/snapshot"
	"lifeboat/snapshot/internal/snaptest"
	"lifeboat/snapshot/restore"
)

// A real capture stopped (a hook that waits on a channel) after its
// uploads and before its manifest, while a two-phase prune condemns the
// packs it reused and, a margin later, another prune deletes them:
// resumed in time, its snapshot is stored before the second prune and
// kept whole; resumed past the margin, it is refused and stores no
// snapshot. check --read-data is clean either way. Each case runs in a
// testing/synctest bubble (repotest.Bubble): the repositories and prunes
// read the bubble's clock (their default), and time.Sleep moves it at
// once.
func TestCaptureStoppedBesideTwoPhasePrune(t *testing.T) {
	t.Parallel()
	const limit, margin = 10 * time.Minute, 20 * time.Minute
	for _, inTime := range []bool{true, false} {
		name := "resumed past the margin: refused"
		if inTime {
			name = "resumed in time: kept"
		}
		t.Run(name, func(t *testing.T) {
			repotest.Bubble(t, func(t *testing.T) {
				tr := newCapTestRepo(t)
				open := func() *repo.Repository {
					be, err := local.Open(tr.dir)
					if err != nil {
						t.Fatal(err)
					}
					r, err := repo.Open(context.Background(), be, repotest.Password, repo.Options{CacheDir: t.TempDir(), SessionLimit: limit})
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { _ = r.Close(context.Background()) })
					return r
				}
				capturer, pruner := open(), open()
				src := t.TempDir()
				rng := seedtest.Rand(t)
				content := make([]byte, 256<<10)
				for i := range content {
					content[i] = byte(rng.Uint32())
				}
				if err := os.WriteFile(filepath.Join(src, "f"), content, 0o644); err != nil {
					t.Fatal(err)
				}
				first := capTestCapture(t, capturer, src, capTestOptions(nil))
				// Forgotten: everything it stored is unused now.
				if err := capturer.RemoveFile(context.Background(), backend.Handle{Type: backend.Snapshot, Name: first.ID.String()}); err != nil {
					t.Fatal(err)
				}
				flushed, resume := make(chan struct{}), make(chan struct{})
				o := capTestOptions(nil)
				o.hooks.flushed = func() { close(flushed); <-resume }
				type result struct {
					m   *snapshot.Manifest
					err error
				}
				done := make(chan result, 1)
				go func() {
					m, err := Run(context.Background(), capturer, src, o)
					done <- result{m, err}
				}()
				resumed := false
				t.Cleanup(func() { // a failed test lets the capture end before the repositories close
					if !resumed {
						close(resume)
						<-done
					}
				})
				<-flushed // the capture reused the forgotten blobs and stopped
				pruneNow := func() prune.Stats {
					t.Helper()
					p, err := prune.PlanPrune(context.Background(), pruner, snapshot.PruneSource{Repo: pruner}, prune.Options{MaxUnused: 1e-9, DeleteAfter: margin})
					if err != nil {
						t.Fatal(err)
					}
					defer p.Close()
					st, err := p.Execute(context.Background(), pruner, snapshot.PruneSource{Repo: pruner}, prune.ExecOptions{})
					if err != nil {
						t.Fatal(err)
					}
					return st
				}
				time.Sleep(time.Minute)
				if st := pruneNow(); st.PacksCondemned == 0 || st.PacksDeleted != 0 {
					t.Fatalf("first prune: %+v; want packs condemned, none deleted", st)
				}
				var res result
				if inTime {
					time.Sleep(limit / 2)
					resumed = true
					close(resume)
					res = <-done
					if res.err != nil {
						t.Fatalf("capture resumed in time: %v", res.err)
					}
				}
				time.Sleep(margin + time.Minute)
				st := pruneNow()
				if !inTime {
					if st.PacksDeleted == 0 {
						t.Fatalf("second prune deleted nothing: %+v", st)
					}
					resumed = true
					close(resume)
					res = <-done
					if !errors.Is(res.err, repo.ErrSessionExpired) {
						t.Fatalf("capture resumed past the margin: %v, want ErrSessionExpired", res.err)
					}
					if ids, _ := (snapshot.PruneSource{Repo: pruner}).Snapshots(context.Background()); len(ids) != 0 {
						t.Fatalf("%d snapshots stored by a refused capture", len(ids))
					}
				} else {
					if st.Rescued == 0 {
						t.Fatalf("second prune rescued nothing for the stored snapshot: %+v", st)
					}
					target := filepath.Join(t.TempDir(), "out")
					if _, err := restore.Run(context.Background(), pruner, res.m, restore.Options{Target: target}); err != nil {
						t.Fatalf("restore: %v", err)
					}
					if got, err := os.ReadFile(filepath.Join(target, "f")); err != nil || !bytes.Equal(got, content) {
						t.Fatalf("restored file differs (%v)", err)
					}
				}
				snaptest.Check(t, pruner)
			})
		})
	}
}
