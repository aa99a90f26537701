package recovery

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func pathExists(t *testing.T, p string) bool {
	t.Helper()
	_, err := os.Lstat(p)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// A server that loses an operation to another (frozen past its lease)
// removes its own restored tree of it when its next write is refused.
func TestSharedTakeoverRemovesLocalTree(t *testing.T) {
	onPostgres(t, func(t *testing.T) {
		a := newREnv(t, botFiles)
		cp := a.capture()
		a.lose()
		op, wake := a.freezeAt("after:restoring", cp.Snapshot) // with its restored tree in place
		tree := a.svc.localTree(op.ID)
		if !pathExists(t, filepath.Join(tree, "notes.md")) {
			t.Fatalf("no restored tree at %s", tree)
		}
		b := a.second(newFakeClock())
		b.clock.Advance(a.clock.Now().Sub(b.clock.Now()) + b.svc.cfg.LeaseTTL + time.Second)
		b.svc.resume(true)
		if done := b.wait(op.ID); done.State != OpRecovered {
			t.Fatalf("after the takeover: %+v", done)
		}
		wake() // a's next write is refused
		a.wait(op.ID)
		if pathExists(t, tree) {
			t.Fatalf("the server that lost the operation kept its tree %s", tree)
		}
		if pathExists(t, b.svc.localTree(op.ID)) {
			t.Fatal("the server that finished the operation kept its tree")
		}
	})
}

// A server that starts removes the local trees of operations (before it
// drives any; an operation it resumes does not need its tree after the
// restore step, which restores afresh) and the staging directories of
// restores no process runs; a directory that names no operation stays.
func TestStartRemovesLocalTrees(t *testing.T) {
	eachStore(t, func(t *testing.T) {
		e, cp := newLostREnv(t)
		e.svc.hooks.step = func(_ Operation, at string) error {
			if at == "before:switching" {
				return errHookStop // as a crash there
			}
			return nil
		}
		op := e.approve(cp.Snapshot, "k")
		if op = e.wait(op.ID); op.State != OpSwitching {
			t.Fatalf("stopped at %+v", op)
		}
		tree := e.svc.localTree(op.ID)
		staging := filepath.Join(e.svc.localTrees(), ".lifeboat-restore-0123456789abcdef")
		other := filepath.Join(e.svc.localTrees(), "not-an-operation")
		for _, d := range []string{staging, other} {
			writeFiles(t, d, map[string]string{"f": "left"})
		}
		if !pathExists(t, tree) {
			t.Fatalf("no restored tree at %s", tree)
		}
		e.hooks.step = nil
		e.reopen()
		if pathExists(t, tree) || pathExists(t, staging) || !pathExists(t, other) {
			t.Fatalf("after the start: tree %v, staging %v, other %v", pathExists(t, tree), pathExists(t, staging), pathExists(t, other))
		}
		if op = e.wait(op.ID); op.State != OpRecovered {
			t.Fatalf("the resumed operation: %+v", op)
		}
		if got := readFile(t, filepath.Join(e.dir(op.Replacement), "notes.md")); got != botFiles["notes.md"] {
			t.Fatalf("recovered notes.md: %q", got)
		}
	})
}
