package local

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"lifeboat/providers"
	"lifeboat/providers/providertest"
)

func harness(t *testing.T) (providertest.Harness, string) {
	root := t.TempDir()
	return providertest.Harness{
		Peek: func(t *testing.T) string { return providertest.Listing(t, root) },
		DenyWrites: func(t *testing.T) string {
			staging := filepath.Join(root, stagingDir)
			if err := os.MkdirAll(staging, 0o700); err != nil {
				t.Fatal(err)
			}
			if !providertest.DenyWrites(t, staging) {
				return ""
			}
			return staging
		},
		New: func(t *testing.T) providers.Provider { return New(root) },
		RemoveBehindBack: func(t *testing.T, id providers.InstanceID) {
			if err := os.RemoveAll(filepath.Join(root, string(id))); err != nil {
				t.Fatal(err)
			}
		},
		Unreachable: func(t *testing.T) providers.Provider { return New(filepath.Join(root, "no-such-root")) },
		Absent:      "never-created",
	}, root
}

func TestConformance(t *testing.T) {
	h, _ := harness(t)
	providertest.Run(t, h)
}

// TestConformanceWithoutExchange runs the suite with RENAME_EXCHANGE
// reported as unsupported, so every switch takes the two-step fallback.
func TestConformanceWithoutExchange(t *testing.T) {
	noExchange(t)
	h, _ := harness(t)
	providertest.Run(t, h)
}

func noExchange(t *testing.T) {
	old := exchange
	exchange = func(*os.Root, string, string) error { return errExchangeUnsupported }
	t.Cleanup(func() { exchange = old })
}

func TestRootUnavailable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, root := range []string{filepath.Join(dir, "absent"), file} {
		p := New(root)
		_, err := p.Inspect(ctx, "ws")
		providertest.WantKind(t, "Inspect under "+root, err, providers.KindUnavailable)
		if !strings.Contains(err.Error(), root) {
			t.Fatalf("error does not name the root: %v", err)
		}
		_, err = p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
		providertest.WantKind(t, "Create under "+root, err, providers.KindUnavailable)
		providertest.WantKind(t, "DeleteCheckpoint under "+root, p.DeleteCheckpoint(ctx, "ws~0123456789abcdef"), providers.KindUnavailable)
	}
	// A root without search permission (only meaningful when not root:
	// root bypasses permission bits).
	if os.Geteuid() != 0 {
		locked := filepath.Join(dir, "locked")
		if err := os.Mkdir(locked, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(locked, 0); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.Chmod(locked, 0o700) })
		_, err := New(locked).Inspect(ctx, "ws")
		providertest.WantKind(t, "Inspect under an unreadable root", err, providers.KindUnavailable)
	}
}

func TestHostileIDs(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	root := filepath.Join(parent, "root")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	// Something beside the root that ".." tricks would reach.
	if err := os.Mkdir(filepath.Join(parent, "sibling"), 0o700); err != nil {
		t.Fatal(err)
	}
	p := New(root)
	ids := []providers.InstanceID{"", ".", "..", "../sibling", "a/b", "/etc", ".lifeboat", ".hidden",
		"x\x00y", "sp ace", "semi;colon", providers.InstanceID(strings.Repeat("a", 129)), providers.InstanceID(outside)}
	for _, id := range ids {
		_, err := p.Inspect(ctx, id)
		providertest.WantKind(t, "Inspect("+string(id)+")", err, providers.KindInvalid)
		providertest.WantKind(t, "Destroy("+string(id)+")", p.Destroy(ctx, id), providers.KindInvalid)
		_, err = p.ReadFiles(ctx, id)
		providertest.WantKind(t, "ReadFiles", err, providers.KindInvalid)
		_, err = p.WriteFiles(ctx, id, outside)
		providertest.WantKind(t, "WriteFiles", err, providers.KindInvalid)
		providertest.WantKind(t, "Switch", p.Switch(ctx, id, outside), providers.KindInvalid)
		_, err = p.Exec(ctx, id, []string{"true"}, nil)
		providertest.WantKind(t, "Exec", err, providers.KindInvalid)
		_, err = p.Checkpoint(ctx, id)
		providertest.WantKind(t, "Checkpoint", err, providers.KindInvalid)
		_, err = p.Rollback(ctx, id, "ws~0123456789abcdef")
		providertest.WantKind(t, "Rollback", err, providers.KindInvalid)
		_, err = p.Create(ctx, providers.CreateSpec{Template: string(id)})
		if id != "" {
			providertest.WantKind(t, "Create from template "+string(id), err, providers.KindInvalid)
		}
	}
	for _, cp := range []providers.CheckpointID{"", "../x", "ws~../../x", "ws~0123", "../ws~0123456789abcdef", "ws~0123456789ABCDEF", "ws"} {
		providertest.WantKind(t, "DeleteCheckpoint("+string(cp)+")", p.DeleteCheckpoint(ctx, cp), providers.KindInvalid)
		_, err := p.Rollback(ctx, "ws", cp)
		providertest.WantKind(t, "Rollback to "+string(cp), err, providers.KindInvalid)
	}
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "keep" {
		t.Fatalf("outside data changed: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(parent, "sibling")); err != nil {
		t.Fatalf("sibling of the root touched: %v", err)
	}
}

// TestSymlinkEscapes: an instance name that is a symlink out of the root is
// never treated as a workspace, and symlinks inside copied trees never
// carry a write outside.
func TestSymlinkEscapes(t *testing.T) {
	ctx := context.Background()
	root, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(root, "evil")); err != nil {
		t.Fatal(err)
	}
	p := New(root)
	_, err := p.Inspect(ctx, "evil")
	providertest.WantKind(t, "Inspect of a symlinked instance", err, providers.KindConflict)
	_, err = p.ReadFiles(ctx, "evil")
	providertest.WantKind(t, "ReadFiles of a symlinked instance", err, providers.KindConflict)
	providertest.WantKind(t, "Destroy of a symlinked instance", p.Destroy(ctx, "evil"), providers.KindConflict)
	_, err = p.Checkpoint(ctx, "evil")
	providertest.WantKind(t, "Checkpoint of a symlinked instance", err, providers.KindConflict)

	// A source tree whose symlinks point out: copied as links, and the
	// instance built from them does not write through them.
	id := providertest.MustCreate(t, p, "k")
	src := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(src, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "secret"), filepath.Join(src, "secret-link")); err != nil {
		t.Fatal(err)
	}
	providertest.PutTree(t, p, id, src)
	cp, err := p.Checkpoint(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Rollback(ctx, id, cp); err != nil {
		t.Fatal(err)
	}
	if target, err := os.Readlink(filepath.Join(root, string(id), "out")); err != nil || target != outside {
		t.Fatalf("symlink not kept as a link: %q, %v", target, err)
	}
	entries, _ := os.ReadDir(outside)
	if b, err := os.ReadFile(filepath.Join(outside, "secret")); err != nil || string(b) != "keep" || len(entries) != 1 {
		t.Fatalf("outside touched: %q, %v, %d entries", b, err, len(entries))
	}
	// A staging path that points through the instance's link is refused.
	providertest.WantKind(t, "Switch through a link", p.Switch(ctx, id, filepath.Join(root, string(id), "out")), providers.KindInvalid)
}

// TestSpecialFiles: a fifo is copied as a fifo; a socket and a device are
// refused by name before anything is written.
func TestSpecialFiles(t *testing.T) {
	ctx := context.Background()
	p := New(t.TempDir())
	id := providertest.MustCreate(t, p, "k")
	src := t.TempDir()
	if err := mkfifo(filepath.Join(src, "pipe")); err != nil {
		t.Fatal(err)
	}
	staging, err := p.WriteFiles(ctx, id, src)
	if err != nil {
		t.Fatalf("WriteFiles of a fifo: %v", err)
	}
	if fi, err := os.Lstat(filepath.Join(staging, "pipe")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Fatalf("fifo not copied as a fifo: %v", err)
	}
	if err := os.RemoveAll(staging); err != nil {
		t.Fatal(err)
	}
	refused := []struct{ rel, kind string }{{"run/agent.sock", "socket"}}
	if err := os.Mkdir(filepath.Join(src, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	providertest.MakeSocket(t, filepath.Join(src, "run", "agent.sock"))
	if os.Geteuid() == 0 {
		if err := unix.Mknod(filepath.Join(src, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
		refused = append([]struct{ rel, kind string }{{"null", "character device"}}, refused...)
	}
	for _, r := range refused {
		_, err = p.WriteFiles(ctx, id, src)
		providertest.WantKind(t, "WriteFiles of a "+r.kind, err, providers.KindUnsupported)
		want := r.kind + " " + r.rel + " in the source tree " + src + ": provider local cannot create " + r.kind + "s; nothing was written; remove it from the workspace or exclude it"
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("refusal of a %s:\n%v\nwant it to contain:\n%s", r.kind, err, want)
		}
		if entries, _ := os.ReadDir(filepath.Join(p.Root(), stagingDir)); len(entries) != 0 {
			t.Fatalf("refused WriteFiles left %d staging dirs", len(entries))
		}
		if err := os.Remove(filepath.Join(src, r.rel)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = p.WriteFiles(ctx, id, filepath.Join(src, "absent"))
	providertest.WantKind(t, "WriteFiles from a missing source", err, providers.KindInvalid)
	// A checkpoint of a workspace holding a socket is refused the same way.
	providertest.MakeSocket(t, filepath.Join(p.Root(), string(id), "agent.sock"))
	_, err = p.Checkpoint(ctx, id)
	providertest.WantKind(t, "Checkpoint of a workspace holding a socket", err, providers.KindUnsupported)
	if entries, _ := os.ReadDir(filepath.Join(p.Root(), checkpointsDir)); len(entries) != 0 {
		t.Fatalf("refused Checkpoint left %d entries", len(entries))
	}
}

// TestCheckpointFidelity: Checkpoint and Rollback (FICLONE where the
// filesystem can, an extent copy elsewhere) and Create from a template
// keep what WriteFiles keeps.
func TestCheckpointFidelity(t *testing.T) {
	ctx := context.Background()
	p := New(t.TempDir())
	keep, err := p.FileSupport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id := providertest.MustCreate(t, p, "k")
	dir := filepath.Join(p.Root(), string(id))
	if err := os.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ref := t.TempDir()
	ft := providertest.RichTree(t, ref, true)
	providertest.RichTree(t, dir, true)
	cp, err := p.Checkpoint(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data", "a"), []byte("changed"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Rollback(ctx, id, cp); err != nil {
		t.Fatal(err)
	}
	providertest.CompareTrees(t, ref, dir, keep, ft)
	copyID, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "copy", Template: string(id)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // read-only directories inside: removed by the adapter
		_ = p.DeleteCheckpoint(ctx, cp)
		_ = p.Destroy(ctx, id)
		_ = p.Destroy(ctx, copyID)
	})
	providertest.CompareTrees(t, ref, filepath.Join(p.Root(), string(copyID)), keep, ft)
}

// TestFileSupport: the probe finds what this filesystem keeps, leaves
// nothing behind, and is answered from memory afterwards.
func TestFileSupport(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	p := New(root)
	keep, err := p.FileSupport(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !keep.HardLinks || !keep.Fifos || keep.Ownership != (os.Geteuid() == 0) {
		t.Fatalf("FileSupport = %+v", keep)
	}
	if keep.Xattrs != providertest.UserXattrs(t, root) {
		t.Fatalf("FileSupport.Xattrs = %v, but the filesystem says otherwise", keep.Xattrs)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, metaDir)); len(entries) != 0 {
		t.Fatalf("the probe left %d entries in %s", len(entries), metaDir)
	}
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	if again, err := p.FileSupport(ctx); err != nil || again != keep {
		t.Fatalf("cached FileSupport = %+v, %v", again, err)
	}
	_, err = New(root).FileSupport(ctx)
	providertest.WantKind(t, "FileSupport with the root gone", err, providers.KindUnavailable)
}

func TestStop(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	p := New(root)
	when := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	p.now = func() time.Time { return when }
	id := providertest.MustCreate(t, p, "k")
	providertest.WantKind(t, "Stop of a missing instance", p.Stop(ctx, "never-created"), providers.KindConflict)
	providertest.WantKind(t, "Stop of a bad id", p.Stop(ctx, "../x"), providers.KindInvalid)
	for i := range 2 {
		if err := p.Stop(ctx, id); err != nil {
			t.Fatalf("Stop #%d: %v", i+1, err)
		}
		p.now = func() time.Time { return when.Add(time.Hour) } // a second Stop keeps the first time
	}
	st, err := p.Inspect(ctx, id)
	if err != nil || st.State != providers.Stopped {
		t.Fatalf("Inspect after Stop = %+v, %v", st, err)
	}
	if !strings.Contains(st.Detail, "stopped by Lifeboat at 2026-05-06T07:08:09Z") {
		t.Fatalf("detail does not say when and who: %q", st.Detail)
	}
	// A new provider value (a restarted process) sees it too.
	if st, err := New(root).Inspect(ctx, id); err != nil || st.State != providers.Stopped {
		t.Fatalf("Inspect after a restart = %+v, %v", st, err)
	}
	if err := p.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, stoppedDir, string(id))); !os.IsNotExist(err) {
		t.Fatalf("Destroy left the stopped marker: %v", err)
	}
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Missing {
		t.Fatalf("Inspect after Destroy = %+v, %v", st, err)
	}
	// Made again with the same key after being removed behind our back
	// while stopped: running, not stopped.
	id, _ = p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
	if err := p.Stop(ctx, id); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, string(id))); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Missing {
		t.Fatalf("Inspect of a stopped instance removed behind our back = %+v, %v", st, err)
	}
	if _, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"}); err != nil {
		t.Fatal(err)
	}
	if st, err := p.Inspect(ctx, id); err != nil || st.State != providers.Running {
		t.Fatalf("Inspect of the instance made anew = %+v, %v", st, err)
	}
}

func TestCreateTemplateAndIdempotencyAcrossRestart(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	p := New(root)
	tmpl := filepath.Join(root, "template")
	providertest.Tree(t, tmpl, "tmpl")
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "replacement-1", Template: "template"})
	if err != nil {
		t.Fatal(err)
	}
	if id != IDForKey("replacement-1") {
		t.Fatalf("id %s not derived from the key", id)
	}
	if got, want := providertest.Listing(t, filepath.Join(root, string(id))), providertest.Listing(t, tmpl); got != want {
		t.Fatalf("template copy:\n%s\nwant:\n%s", got, want)
	}
	// The workspace changes; a retried Create (new process) returns it as is.
	if err := os.WriteFile(filepath.Join(root, string(id), "new"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	again, err := New(root).Create(ctx, providers.CreateSpec{IdempotencyKey: "replacement-1", Template: "template"})
	if err != nil || again != id {
		t.Fatalf("retry = %s, %v", again, err)
	}
	if _, err := os.Stat(filepath.Join(root, string(id), "new")); err != nil {
		t.Fatalf("retried Create replaced the workspace: %v", err)
	}
	_, err = p.Create(ctx, providers.CreateSpec{IdempotencyKey: "r2", Template: "no-such"})
	providertest.WantKind(t, "Create from a missing template", err, providers.KindInvalid)
	a, _ := p.Create(ctx, providers.CreateSpec{})
	b, _ := p.Create(ctx, providers.CreateSpec{})
	if a == b || a == "" {
		t.Fatalf("keyless creates gave %q and %q", a, b)
	}
}

// TestCheckpointIsACopy: a checkpoint does not share inodes with the live
// tree, so an in-place write to a workspace file leaves it unchanged.
func TestCheckpointIsACopy(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	p := New(root)
	id := providertest.MustCreate(t, p, "k")
	f := filepath.Join(root, string(id), "db")
	if err := os.WriteFile(f, []byte("before"), 0o600); err != nil {
		t.Fatal(err)
	}
	cp, err := p.Checkpoint(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	h, err := os.OpenFile(f, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.WriteAt([]byte("AFTER!"), 0); err != nil {
		t.Fatal(err)
	}
	h.Close()
	if err := p.Destroy(ctx, id); err != nil {
		t.Fatal(err)
	}
	// Rollback of a destroyed instance brings it back.
	got, err := p.Rollback(ctx, id, cp)
	if err != nil || got != id {
		t.Fatalf("Rollback = %s, %v", got, err)
	}
	if b, _ := os.ReadFile(f); string(b) != "before" {
		t.Fatalf("rolled back content %q", b)
	}
	// No temporary checkpoint or staging is left behind.
	for _, d := range []string{stagingDir, checkpointsDir} {
		entries, _ := os.ReadDir(filepath.Join(root, d))
		for _, e := range entries {
			if e.Name() != string(cp) {
				t.Fatalf("left behind in %s: %s", d, e.Name())
			}
		}
	}
}

// TestSwitchFallbackInterrupted: when the two-step fallback stopped after
// parking the old tree, Inspect does not call the instance missing.
func TestSwitchFallbackInterrupted(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	p := New(root)
	id := providertest.MustCreate(t, p, "k")
	if err := os.MkdirAll(filepath.Join(root, switchingDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(root, string(id)), filepath.Join(root, switchingDir, string(id))); err != nil {
		t.Fatal(err)
	}
	_, err := p.Inspect(ctx, id)
	providertest.WantKind(t, "Inspect mid-switch", err, providers.KindConflict)
	if !strings.Contains(err.Error(), switchingDir) {
		t.Fatalf("error does not say where the old tree is: %v", err)
	}
}

// TestSwitchFailureLeavesWorkspace: a switch whose rename fails leaves the
// old tree in place, with and without RENAME_EXCHANGE.
func TestSwitchFailureLeavesWorkspace(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		ctx := context.Background()
		root := t.TempDir()
		p := New(root)
		id, _ := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "k"})
		if err := os.WriteFile(filepath.Join(root, string(id), "keep"), []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		staging, err := p.WriteFiles(ctx, id, t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		// Make the staging name unrenameable: replace it by a file.
		if err := os.RemoveAll(staging); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(staging, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if fallback {
			noExchange(t)
		}
		if err := p.Switch(ctx, id, staging); err == nil {
			t.Fatal("switch of a non-directory staging succeeded")
		}
		if b, err := os.ReadFile(filepath.Join(root, string(id), "keep")); err != nil || string(b) != "old" {
			t.Fatalf("fallback=%v: workspace changed by a failed switch: %q, %v", fallback, b, err)
		}
	}
}

func TestExecCancelAndErrors(t *testing.T) {
	p := New(t.TempDir())
	id, _ := p.Create(context.Background(), providers.CreateSpec{IdempotencyKey: "k"})
	// The command signals through a fifo in the workspace that it is
	// running; only then is the context cancelled.
	if err := mkfifo(filepath.Join(p.Root(), string(id), "ready")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		f, err := os.Open(filepath.Join(p.Root(), string(id), "ready"))
		if err == nil {
			_, _ = f.Read(make([]byte, 1))
			f.Close()
		}
		cancel()
	}()
	_, err := p.Exec(ctx, id, []string{"sh", "-c", "echo > ready; exec sleep 600"}, nil)
	providertest.WantKind(t, "Exec cancelled", err, providers.KindUnavailable)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Exec does not wrap context.Canceled: %v", err)
	}
	_, err = p.Exec(context.Background(), id, []string{"/no/such/binary"}, nil)
	providertest.WantKind(t, "Exec of a missing binary", err, providers.KindInvalid)
	res, err := p.Exec(context.Background(), id, []string{"sh", "-c", "head -c 2000000 /dev/zero"}, nil)
	if err != nil || len(res.Stdout) != providers.MaxExecOutput {
		t.Fatalf("bounded output: %d bytes, %v", len(res.Stdout), err)
	}
}

// TestDestroyReadOnlyTree: a workspace with read-only and unreadable
// directories is removed whole, also by a non-root user.
func TestDestroyReadOnlyTree(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	p := New(root)
	id := providertest.MustCreate(t, p, "k")
	dir := filepath.Join(root, string(id))
	modes := []struct {
		rel  string
		mode os.FileMode
	}{{"ro/sub", 0o500}, {"ro", 0o555}, {"closed", 0o000}} // deepest first
	for _, d := range modes {
		if err := os.MkdirAll(filepath.Join(dir, d.rel, "in"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, d.rel, "f"), nil, 0o400); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range modes {
		defer os.Chmod(filepath.Join(dir, d.rel), 0o755) // only matters if the test fails
		if err := os.Chmod(filepath.Join(dir, d.rel), d.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Destroy(ctx, id); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if entries, _ := os.ReadDir(filepath.Join(root, trashDir)); len(entries) != 0 {
		t.Fatalf("Destroy left %d entries in the trash", len(entries))
	}
}
