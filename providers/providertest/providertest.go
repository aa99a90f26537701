// Package providertest is the conformance suite every providers.Provider
// adapter passes: Inspect states, Missing only when confirmed, idempotent
// Create, Destroy of a missing instance, the WriteFiles/Switch/ReadFiles
// round trip keeping what FileSupport claims (hard links, xattrs, fifos,
// holes, owners) and never less, WriteStarted before the first change,
// sockets refused as KindUnsupported and access refusals as
// KindPermission by path, Exec, native checkpoints, and that every
// failure is a *providers.Error of the right Kind.
package providertest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/fsmeta"
)

// Harness tells the suite how to reach an adapter under test.
type Harness struct {
	// New returns the provider under test, working and reachable.
	New func(t *testing.T) providers.Provider
	// RemoveBehindBack deletes an instance without the provider knowing
	// (rm -rf on the host, the platform deleting a sandbox), so Inspect
	// must find it Missing.
	RemoveBehindBack func(t *testing.T, id providers.InstanceID)
	// Unreachable, when set, returns a provider for the same instances
	// whose backend cannot be reached (root gone, sshd stopped, API down);
	// every call must fail with KindUnavailable and never report Missing.
	Unreachable func(t *testing.T) providers.Provider
	// Absent is a well-formed id no instance has.
	Absent providers.InstanceID
	// Peek, when set, describes everything the provider holds (instances,
	// staging, its own metadata), so the suite can check that nothing had
	// changed yet when WriteStarted was called.
	Peek func(t *testing.T) string
	// DenyWrites, when set, makes the provider's staging area refuse new
	// entries until the test ends and returns the path an error must then
	// name; "" when it cannot here (the test is skipped).
	DenyWrites func(t *testing.T) string
}

// Run runs the whole suite as subtests.
func Run(t *testing.T, h Harness) {
	t.Run("InspectRunningAndMissing", func(t *testing.T) { testInspect(t, h) })
	t.Run("IdempotentCreate", func(t *testing.T) { testCreate(t, h) })
	t.Run("DestroyMissingIsOK", func(t *testing.T) { testDestroy(t, h) })
	t.Run("FilesRoundTrip", func(t *testing.T) { testRoundTrip(t, h) })
	t.Run("DataPlaneNotFoundIsNotMissing", func(t *testing.T) { testDataPlane(t, h) })
	t.Run("Exec", func(t *testing.T) { testExec(t, h) })
	t.Run("Checkpoints", func(t *testing.T) { testCheckpoints(t, h) })
	t.Run("CancelledContext", func(t *testing.T) { testCancelled(t, h) })
	t.Run("FileFidelity", func(t *testing.T) { testFidelity(t, h) })
	t.Run("WriteStarted", func(t *testing.T) { testWriteStarted(t, h) })
	t.Run("PermissionRefused", func(t *testing.T) { testPermission(t, h) })
	if h.Unreachable != nil {
		t.Run("UnreachableIsUnavailable", func(t *testing.T) { testUnreachable(t, h) })
	}
}

// RunFiles runs the file-access part of the suite alone (the round trip,
// fidelity, WriteStarted, permission refusals), for an adapter configured
// so that it writes files another way (an SSH host without GNU tar, say).
func RunFiles(t *testing.T, h Harness) {
	t.Run("FilesRoundTrip", func(t *testing.T) { testRoundTrip(t, h) })
	t.Run("FileFidelity", func(t *testing.T) { testFidelity(t, h) })
	t.Run("WriteStarted", func(t *testing.T) { testWriteStarted(t, h) })
	t.Run("PermissionRefused", func(t *testing.T) { testPermission(t, h) })
}

// Fidelity is the suite's FileFidelity case alone: a rich tree written,
// switched and read back keeps what FileSupport claims.
func Fidelity(t *testing.T, h Harness) { testFidelity(t, h) }

// MustNew returns the adapter newP makes of cfg (an adapter's New and
// Config), and fails t if it cannot.
func MustNew[C, P any](t testing.TB, newP func(C) (P, error), cfg C) P {
	t.Helper()
	p, err := newP(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// MustCreate creates an instance of p with the idempotency key key, and
// fails t if it cannot.
func MustCreate(t testing.TB, p providers.Provider, key string) providers.InstanceID {
	t.Helper()
	id, err := p.Create(context.Background(), providers.CreateSpec{IdempotencyKey: key})
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// WantKind fails t unless err is a *providers.Error of kind k.
func WantKind(t testing.TB, what string, err error, k providers.Kind) {
	t.Helper()
	var pe *providers.Error
	if !errors.As(err, &pe) {
		t.Fatalf("%s: error %v (%T) is not a *providers.Error", what, err, err)
	}
	if pe.Kind != k {
		t.Fatalf("%s: kind %q, want %q: %v", what, pe.Kind, k, err)
	}
}

func wantState(t *testing.T, p providers.Provider, id providers.InstanceID, want providers.State) {
	t.Helper()
	st, err := p.Inspect(context.Background(), id)
	if err != nil {
		t.Fatalf("Inspect(%s): %v", id, err)
	}
	if st.State != want {
		t.Fatalf("Inspect(%s) = %q (%s), want %q", id, st.State, st.Detail, want)
	}
	if st.ObservedAt.IsZero() {
		t.Fatalf("Inspect(%s): ObservedAt not set", id)
	}
}

func create(t *testing.T, p providers.Provider, key string) providers.InstanceID {
	t.Helper()
	id, err := p.Create(context.Background(), providers.CreateSpec{IdempotencyKey: key})
	if err != nil {
		t.Fatalf("Create(%q): %v", key, err)
	}
	t.Cleanup(func() { _ = p.Destroy(context.Background(), id) })
	return id
}

func uniqueKey(t *testing.T) string { return fmt.Sprintf("%s-%p", t.Name(), t) }

func testInspect(t *testing.T, h Harness) {
	p := h.New(t)
	wantState(t, p, h.Absent, providers.Missing)
	id := create(t, p, uniqueKey(t))
	wantState(t, p, id, providers.Running)
	h.RemoveBehindBack(t, id)
	wantState(t, p, id, providers.Missing)
}

func testCreate(t *testing.T, h Harness) {
	if !h.New(t).Capabilities().Create {
		t.Skip("adapter cannot create instances")
	}
	p := h.New(t)
	key := uniqueKey(t)
	ids := make([]providers.InstanceID, 4)
	errs := make([]error, 4)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() { ids[i], errs[i] = p.Create(context.Background(), providers.CreateSpec{IdempotencyKey: key}) })
	}
	wg.Wait()
	for i := range ids {
		if errs[i] != nil {
			t.Fatalf("concurrent Create %d: %v", i, errs[i])
		}
		if ids[i] != ids[0] {
			t.Fatalf("same key made two instances: %s and %s", ids[0], ids[i])
		}
	}
	t.Cleanup(func() { _ = p.Destroy(context.Background(), ids[0]) })
	// A fresh provider value (a restarted process) still finds it.
	again, err := h.New(t).Create(context.Background(), providers.CreateSpec{IdempotencyKey: key})
	if err != nil || again != ids[0] {
		t.Fatalf("Create after restart = %s, %v; want %s", again, err, ids[0])
	}
	other := create(t, p, key+"-other")
	if other == ids[0] {
		t.Fatalf("different keys gave the same instance %s", other)
	}
	wantState(t, p, ids[0], providers.Running)
}

func testDestroy(t *testing.T, h Harness) {
	p := h.New(t)
	if err := p.Destroy(context.Background(), h.Absent); err != nil {
		t.Fatalf("Destroy of an absent instance: %v", err)
	}
	id := create(t, p, uniqueKey(t))
	for i := range 2 {
		if err := p.Destroy(context.Background(), id); err != nil {
			t.Fatalf("Destroy #%d: %v", i+1, err)
		}
	}
	wantState(t, p, id, providers.Missing)
}

// Tree writes a small tree covering what a round trip must keep: nested
// and empty directories, an executable, a read-only file, a symlink that
// points out of the tree (kept as a link, never followed).
func Tree(t testing.TB, dir, tag string) {
	t.Helper()
	files := map[string]string{
		"README":             "hello " + tag + "\n",
		"src/main.go":        "package main // " + tag + "\n",
		"src/deep/a/b/c.txt": strings.Repeat(tag, 1000),
		"bin/run.sh":         "#!/bin/sh\necho " + tag + "\n",
		"ro.txt":             "read only " + tag,
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		mode fs.FileMode
	}{{"bin/run.sh", 0o755}, {"ro.txt", 0o444}} {
		if err := os.Chmod(filepath.Join(dir, c.name), c.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "empty", tag), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../etc/passwd", filepath.Join(dir, "src", "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("main.go", filepath.Join(dir, "src", "link")); err != nil {
		t.Fatal(err)
	}
}

// Listing describes a tree: every entry's type, permissions and content
// (or link target), sorted, so two trees compare with ==.
func Listing(t testing.TB, dir string) string {
	t.Helper()
	var lines []string
	err := fsmeta.Walk(dir, func(p, rel string, info fs.FileInfo) error {
		line := fmt.Sprintf("%s %v", rel, info.Mode())
		switch {
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			line += fmt.Sprintf(" %q", b)
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			line += " -> " + target
		}
		lines = append(lines, line)
		return nil
	})
	if err != nil {
		t.Fatalf("listing %s: %v", dir, err)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// PutTree writes the tree src into instance id of p through WriteFiles
// and Switch, and fails t if either fails.
func PutTree(t testing.TB, p providers.Provider, id providers.InstanceID, src string) {
	t.Helper()
	staging, err := p.WriteFiles(context.Background(), id, src)
	if err != nil {
		t.Fatalf("WriteFiles: %v", err)
	}
	if err := p.Switch(context.Background(), id, staging); err != nil {
		t.Fatalf("Switch: %v", err)
	}
}

// put writes a tree tagged tag into the instance through WriteFiles and
// Switch and returns the listing it should now have.
func put(t *testing.T, p providers.Provider, id providers.InstanceID, tag string) string {
	t.Helper()
	src := t.TempDir()
	Tree(t, src, tag)
	PutTree(t, p, id, src)
	return Listing(t, src)
}

func read(t *testing.T, p providers.Provider, id providers.InstanceID) string {
	t.Helper()
	f, err := p.ReadFiles(context.Background(), id)
	if err != nil {
		t.Fatalf("ReadFiles: %v", err)
	}
	defer f.Close()
	return Listing(t, f.Dir())
}

func testRoundTrip(t *testing.T, h Harness) {
	p := h.New(t)
	if !p.Capabilities().Files {
		t.Skip("adapter has no file access")
	}
	id := create(t, p, uniqueKey(t))
	want := put(t, p, id, "one")
	if got := read(t, p, id); got != want {
		t.Fatalf("after the first switch:\n%s\nwant:\n%s", got, want)
	}
	// A second switch replaces the tree entirely (the "one" empty dir and
	// its contents go); a second ReadFiles sees the change.
	want = put(t, p, id, "two")
	if got := read(t, p, id); got != want {
		t.Fatalf("after the second switch:\n%s\nwant:\n%s", got, want)
	}
	// A staging path the adapter did not make is refused.
	err := p.Switch(context.Background(), id, "/tmp/not-a-staging-dir")
	WantKind(t, "Switch of a foreign path", err, providers.KindInvalid)
	if got := read(t, p, id); got != want {
		t.Fatal("a refused switch changed the tree")
	}
}

func testDataPlane(t *testing.T, h Harness) {
	p := h.New(t)
	if !p.Capabilities().Files {
		t.Skip("adapter has no file access")
	}
	_, err := p.ReadFiles(context.Background(), h.Absent)
	var pe *providers.Error
	if !errors.As(err, &pe) || pe.Kind == "" {
		t.Fatalf("ReadFiles of an absent instance: %v, want a *providers.Error", err)
	}
	_, err = p.WriteFiles(context.Background(), h.Absent, t.TempDir())
	if !errors.As(err, &pe) {
		t.Fatalf("WriteFiles of an absent instance: %v, want a *providers.Error", err)
	}
}

func testExec(t *testing.T, h Harness) {
	p := h.New(t)
	if !p.Capabilities().Exec {
		_, err := p.Exec(context.Background(), h.Absent, []string{"true"}, nil)
		WantKind(t, "Exec without the capability", err, providers.KindUnsupported)
		return
	}
	id := create(t, p, uniqueKey(t))
	// No command: refused, in the same words by every provider.
	_, err := p.Exec(context.Background(), id, nil, nil)
	WantKind(t, "Exec of no command", err, providers.KindInvalid)
	if !strings.Contains(err.Error(), "empty command: give the program to run and its arguments") {
		t.Fatalf("Exec of no command: %v", err)
	}
	res, err := p.Exec(context.Background(), id, []string{"sh", "-c", "cat > from-stdin; echo out; echo err >&2; exit 3"}, strings.NewReader("piped"))
	if err != nil {
		t.Fatalf("Exec: %v", err)
	}
	if res.ExitCode != 3 || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" {
		t.Fatalf("Exec = exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	// The command ran in the workspace: its file is in the tree.
	if got := read(t, p, id); !strings.Contains(got, `from-stdin -rw`) || !strings.Contains(got, `"piped"`) {
		t.Fatalf("file written by Exec not in the workspace:\n%s", got)
	}
}

func testCheckpoints(t *testing.T, h Harness) {
	p := h.New(t)
	ctx := context.Background()
	if !p.Capabilities().NativeCheckpoints {
		_, err := p.Checkpoint(ctx, h.Absent)
		WantKind(t, "Checkpoint without the capability", err, providers.KindUnsupported)
		return
	}
	id := create(t, p, uniqueKey(t))
	v1 := put(t, p, id, "v1")
	cp, err := p.Checkpoint(ctx, id)
	if err != nil {
		t.Fatalf("Checkpoint: %v", err)
	}
	put(t, p, id, "v2")
	after, err := p.Rollback(ctx, id, cp)
	if err != nil {
		t.Fatalf("Rollback: %v", err)
	}
	if got := read(t, p, after); got != v1 {
		t.Fatalf("after rollback:\n%s\nwant:\n%s", got, v1)
	}
	for i := range 2 {
		if err := p.DeleteCheckpoint(ctx, cp); err != nil {
			t.Fatalf("DeleteCheckpoint #%d: %v", i+1, err)
		}
	}
	if _, err := p.Rollback(ctx, after, cp); err == nil {
		t.Fatal("Rollback to a deleted checkpoint succeeded")
	}
}

func testCancelled(t *testing.T, h Harness) {
	p := h.New(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := p.Inspect(ctx, h.Absent)
	WantKind(t, "Inspect with a cancelled context", err, providers.KindUnavailable)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Inspect with a cancelled context does not wrap context.Canceled: %v", err)
	}
}

func testUnreachable(t *testing.T, h Harness) {
	p := h.New(t)
	id := create(t, p, uniqueKey(t))
	u := h.Unreachable(t)
	ctx := context.Background()
	_, err := u.Inspect(ctx, id)
	WantKind(t, "Inspect while unreachable", err, providers.KindUnavailable)
	_, err = u.Inspect(ctx, h.Absent)
	WantKind(t, "Inspect of an absent instance while unreachable", err, providers.KindUnavailable)
	if u.Capabilities().Files {
		_, err = u.ReadFiles(ctx, id)
		WantKind(t, "ReadFiles while unreachable", err, providers.KindUnavailable)
	}
	if u.Capabilities().Create {
		_, err = u.Create(ctx, providers.CreateSpec{IdempotencyKey: uniqueKey(t) + "-down"})
		WantKind(t, "Create while unreachable", err, providers.KindUnavailable)
		err = u.Destroy(ctx, id)
		WantKind(t, "Destroy while unreachable", err, providers.KindUnavailable)
	}
}
