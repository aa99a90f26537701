package livetest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/internal/repotest"
	"lifeboat/providers"
	lp "lifeboat/providers/local"
	"lifeboat/recovery"
	"lifeboat/repo"
)

func options(t *testing.T, p providers.Provider) Options {
	r := repotest.New(t, repotest.Options{})
	return Options{Name: "box", Type: "local", Provider: p, TempDir: t.TempDir(), Seed: 7,
		Capturer: &recovery.RepoCapturer{Repo: r}, Restorer: &recovery.RepoRestorer{Repo: r},
		RepoLock: func(ctx context.Context, fn func() error) error {
			return r.Locked(ctx, repo.LockShared, repo.LockOptions{Command: "livetest"}, func(*repo.Lock) error { return fn() })
		}}
}

// theirs makes an instance the test did not create, to check it is left
// alone.
func theirs(t *testing.T, root string) string {
	dir := filepath.Join(root, "theirs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "keep.txt"), []byte("not the test's"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func wantOnly(t *testing.T, root string, names ...string) {
	t.Helper()
	ents, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		if e.Name() != ".lifeboat" {
			got = append(got, e.Name())
		}
	}
	if strings.Join(got, ",") != strings.Join(names, ",") {
		t.Fatalf("instances under the root after the test: %v, want %v", got, names)
	}
}

// TestRunLocal: against the local provider every check passes, the
// capture is in the repository, everything the test made is gone and an
// instance it did not make is untouched.
func TestRunLocal(t *testing.T) {
	root := t.TempDir()
	mine := theirs(t, root)
	rep := Run(context.Background(), options(t, lp.New(root)))
	if rep.Result != Passed || rep.Snapshot == "" || len(rep.Checks) != 7 || len(rep.Left) > 0 {
		t.Fatalf("report: %+v", rep)
	}
	for _, c := range rep.Checks {
		if c.Result != Passed {
			t.Fatalf("check %s: %s %s", c.Name, c.Result, c.Detail)
		}
	}
	wantOnly(t, root, "theirs")
	if b, err := os.ReadFile(filepath.Join(mine, "keep.txt")); err != nil || string(b) != "not the test's" {
		t.Fatalf("the instance the test did not make: %q %v", b, err)
	}
}

// strayWriter is the local provider with a Switch that leaves an extra
// file in the second instance it writes (the replacement), as a broken
// platform would.
type strayWriter struct {
	*lp.Provider
	root     string
	switches int
}

func (s *strayWriter) Switch(ctx context.Context, id providers.InstanceID, staging string) error {
	err := s.Provider.Switch(ctx, id, staging)
	if s.switches++; s.switches == 2 && err == nil {
		err = os.WriteFile(filepath.Join(s.root, string(id), "stray.txt"), []byte("x"), 0o644)
	}
	return err
}

// TestRunFailureCleansUp: a replacement that does not match fails the
// test at that check, with the difference named, and the test still
// destroys every instance and checkpoint it made.
func TestRunFailureCleansUp(t *testing.T) {
	root := t.TempDir()
	theirs(t, root)
	rep := Run(context.Background(), options(t, &strayWriter{Provider: lp.New(root), root: root}))
	if rep.Result != Failed || !strings.Contains(rep.Reason, "recover into a replacement") || !strings.Contains(rep.Reason, "stray.txt: not in the source") {
		t.Fatalf("report: %+v", rep)
	}
	last := rep.Checks[len(rep.Checks)-1]
	if last.Name != "recover into a replacement" || last.Result != Failed {
		t.Fatalf("checks: %+v", rep.Checks)
	}
	if len(rep.Left) > 0 || len(rep.Destroyed) != len(rep.Created) {
		t.Fatalf("cleanup: created %v, destroyed %v, left %v", rep.Created, rep.Destroyed, rep.Left)
	}
	wantOnly(t, root, "theirs")
}
